"""squad: SQuAD v1.1/v2.0 JSON; windows of the context with doc stride (`finetune.squad`), start
and end logits from the head on `sequence_output`, the official EM/F1."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from albert_tf.finetune import data, metrics, squad
from albert_tf.finetune.features import INPUT_NAMES
from albert_tf.finetune.tasks.base import Task, TaskData


class Squad(Task):
    name = "squad"
    best_metric = "f1"
    reads = "sequence_output"

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        examples, stats = data.read_squad(path, training=training)
        skipped = {"answers not in context": stats.answers_not_in_context}
        if stats.dropped_questions:
            skipped["questions without a usable answer"] = len(stats.dropped_questions)
        return examples, skipped

    def configure(self, examples: list, path: str) -> None:
        negative = any(e.is_impossible for e in examples)
        self.settings = self.settings.replace(version_2_with_negative=negative)

    def encode(self, examples: list, tokenizer: Any, training: bool) -> TaskData:
        s = self.settings
        squad_features = squad.build_squad_features(
            examples, tokenizer, s.max_seq_length, s.doc_stride, s.max_query_length, training
        )
        inputs = {
            n: np.asarray([getattr(f, n) for f in squad_features], np.int32) for n in INPUT_NAMES
        }
        labels = {
            "start_positions": np.asarray([f.start_position for f in squad_features], np.int32),
            "end_positions": np.asarray([f.end_position for f in squad_features], np.int32),
        }
        gold = {e.qid: list(e.gold_texts) for e in examples}
        return TaskData(inputs, labels, examples, {}, squad_features, gold_answers=gold)

    def num_outputs(self) -> int:
        return 2

    def forward(self, encoder: Any, head: Any, inputs: dict, training: bool | None) -> dict:
        import tensorflow as tf

        logits = head(encoder(inputs, training=training), training=training)  # [B, S, 2]
        padding = (1.0 - tf.cast(inputs["input_mask"], tf.float32)) * -10000.0  # [B, S]
        return {"start_logits": logits[:, :, 0] + padding, "end_logits": logits[:, :, 1] + padding}

    def loss(self, outputs: dict, labels: Any) -> Any:
        """Mean of the start and end cross-entropies."""
        import tensorflow as tf

        start = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels["start_positions"], outputs["start_logits"]
        )
        end = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels["end_positions"], outputs["end_logits"]
        )
        return tf.reduce_mean(start + end) / 2.0

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        s = self.settings
        predictions = squad.postprocess_squad(
            task_data.examples,
            task_data.squad_features,
            outputs["start_logits"],
            outputs["end_logits"],
            n_best_size=s.n_best_size,
            max_answer_length=s.max_answer_length,
            version_2_with_negative=s.version_2_with_negative,
            null_score_diff_threshold=s.null_score_diff_threshold,
        )
        return [
            {
                "id": p.qid,
                "answer": p.text,
                "char_start": p.char_start,
                "char_end": p.char_end,
                "null_score_diff": p.null_score_diff if math.isfinite(p.null_score_diff) else None,
            }
            for p in predictions
        ]

    def evaluate(self, records: list[dict], task_data: TaskData) -> dict[str, float]:
        predicted = {r["id"]: r["answer"] for r in records}
        return metrics.squad_scores(predicted, task_data.gold_answers)

    def has_labels(self, task_data: TaskData) -> bool:
        return any(task_data.gold_answers.values()) or any(
            e.is_impossible for e in task_data.examples
        )

    def serving_function(self, module: Any) -> Any:
        """`question` [B], `context` [B] -> `answer` string [B] (normalized, i.e. lowercased text
        of the answer tokens; "" for no answer), `start_token`, `end_token` int32 [B] (positions
        in the packed sequence, 0 = [CLS] for no answer), `null_score_diff` float32 [B],
        `start_logits`, `end_logits` [B, S]. One window: contexts longer than the sequence are
        truncated (`albert-tf predict` uses doc stride and returns character offsets)."""
        import tensorflow as tf

        string = tf.TensorSpec([None], tf.string)
        fn = tf.function(lambda question, context: self.serve(module, question, context))
        return fn.get_concrete_function(question=string, context=string)

    def serve(self, module: Any, question: Any, context: Any) -> dict:
        import tensorflow as tf

        s, length = self.settings, self.settings.max_seq_length
        query = module.tokenizer.tokenize(question)[:, : s.max_query_length]
        doc = module.tokenizer.tokenize(context)
        budget = length - 3 - query.row_lengths()
        doc = tf.ragged.boolean_mask(
            doc, tf.ragged.range(doc.row_lengths()) < budget[:, tf.newaxis]
        )
        packed = module.pack([query, doc])
        outputs = module.call_model(packed)
        start, end = outputs["start_logits"], outputs["end_logits"]  # [B, S]
        offset = query.row_lengths() + 2  # first context position
        positions = tf.range(length, dtype=tf.int64)[tf.newaxis]  # [1, S]
        in_doc = (positions >= offset[:, tf.newaxis]) & (
            positions < (offset + doc.row_lengths())[:, tf.newaxis]
        )
        pair = start[:, :, tf.newaxis] + end[:, tf.newaxis, :]  # [B, S(start), S(end)]
        band = tf.linalg.band_part(tf.ones([length, length]), 0, s.max_answer_length - 1)
        valid = (band > 0)[tf.newaxis] & in_doc[:, :, tf.newaxis] & in_doc[:, tf.newaxis, :]
        scores = tf.where(valid, pair, tf.fill(tf.shape(pair), -1e9))
        flat = tf.reshape(scores, [-1, length * length])  # [B, S*S]
        best = tf.argmax(flat, axis=-1, output_type=tf.int32)
        best_score = tf.reduce_max(flat, axis=-1)
        start_token, end_token = best // length, best % length
        diff = start[:, 0] + end[:, 0] - best_score
        has_answer = best_score > -1e8
        if s.version_2_with_negative:
            has_answer &= diff <= s.null_score_diff_threshold
        span = tf.ragged.range(start_token, end_token + 1)  # [B, (n)]
        answer_ids = tf.gather(packed["input_word_ids"], span, batch_dims=1)
        text = module.detokenizer.detokenize(answer_ids)
        return {
            "answer": tf.where(has_answer, text, ""),
            "start_token": tf.where(has_answer, start_token, 0),
            "end_token": tf.where(has_answer, end_token, 0),
            "null_score_diff": diff,
            "start_logits": start,
            "end_logits": end,
        }
