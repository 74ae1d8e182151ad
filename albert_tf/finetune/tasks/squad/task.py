"""squad: SQuAD v1.1/v2.0 JSON; windows of the context with doc stride (`data`), a head on
`sequence_output`, the official EM/F1.

Two heads (`--squad-head`):
- `albert` (the default on v2.0 data): ALBERT's own SQuAD 2.0 head (`heads`), as
  google-research/albert's run_squad_v2.py trains and decodes it: a start distribution, end
  logits conditioned on the start (the gold one in training, a start_n_top x end_n_top beam in
  inference), and an answer-class logit that decides "no answer" against a threshold picked on
  the evaluation data;
- `bert` (the default on v1.1 data): independent start and end logits from one dense layer,
  "no answer" when the [CLS] span's score beats the best span's by more than the threshold.

The methods import TensorFlow (and `heads`) when called: `albert_tf.finetune.tasks.squad`
imports this module, and importing the package loads no TensorFlow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from albert_tf.finetune import metrics
from albert_tf.finetune.features import INPUT_NAMES
from albert_tf.finetune.tasks.base import Task, TaskData
from albert_tf.finetune.tasks.squad import data, postprocess


@dataclass
class SquadData(TaskData):
    """A SQuAD file's model inputs: one row per feature (a window of a context), so `inputs` and
    `labels` have more rows than `examples`. `squad_features[i]` maps row i back to its example
    and the context's characters; `gold_answers` holds every question's gold texts by id (empty
    for unlabelled input) for the official EM/F1."""

    squad_features: list[data.SquadFeature] = field(default_factory=list)
    gold_answers: dict[str, list[str]] = field(default_factory=dict)


class _Spans:
    """Which (start, end) token pairs of packed windows may be answers, in the graph: both in
    the context (`in_doc` bool [B, S]), end >= start, at most `max_answer_length` tokens, and
    not only bare "▁" pieces (`words` int32 [B, S]: 1 for any other piece, `cumulative` its
    running sum along S)."""

    def __init__(self, in_doc: Any, words: Any, cumulative: Any, max_answer_length: int):
        self.in_doc, self.words, self.cumulative = in_doc, words, cumulative
        self.max_answer_length = max_answer_length

    def valid(self, starts: Any, ends: Any) -> Any:
        """bool of the broadcast shape [B, ...] of int32 `starts` and `ends` ([B or 1, ...])."""
        import tensorflow as tf

        batch = tf.shape(self.in_doc)[:1]
        shape = tf.broadcast_dynamic_shape(
            tf.broadcast_dynamic_shape(tf.shape(starts), tf.shape(ends)),
            tf.concat([batch, tf.ones_like(tf.shape(starts)[1:])], 0),
        )
        starts = tf.reshape(tf.broadcast_to(starts, shape), tf.concat([batch, [-1]], 0))
        ends = tf.reshape(tf.broadcast_to(ends, shape), tf.concat([batch, [-1]], 0))  # [B, N]

        def at(values: Any, positions: Any) -> Any:
            return tf.gather(values, positions, batch_dims=1)  # [B, N]

        words = at(self.cumulative, ends) - at(self.cumulative, starts) + at(self.words, starts)
        valid = (
            at(self.in_doc, starts)
            & at(self.in_doc, ends)
            & (ends >= starts)
            & (ends - starts < self.max_answer_length)
            & (words > 0)
        )
        return tf.reshape(valid, shape)


class Squad(Task):
    name = "squad"
    best_metric = "f1"
    reads = "sequence_output"

    @property
    def albert_head(self) -> bool:
        """Whether the model has ALBERT's SQuAD 2.0 head (else the BERT-style one)."""
        head = self.settings.squad_head
        return head == "albert" or (head is None and self.settings.version_2_with_negative)

    @property
    def training_inputs(self) -> tuple[str, ...]:
        # ALBERT's end logits are conditioned on the gold start in training.
        return ("start_positions",) if self.albert_head else ()

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        examples, stats = data.read_squad(path, training=training)
        skipped = {"answers not in context": stats.answers_not_in_context}
        if stats.dropped_questions:
            skipped["questions without a usable answer"] = len(stats.dropped_questions)
        return examples, skipped

    def configure(self, examples: list, path: str) -> None:
        negative = any(e.is_impossible for e in examples)
        head = self.settings.squad_head or ("albert" if negative else "bert")
        self.settings = self.settings.replace(version_2_with_negative=negative, squad_head=head)

    def after_training(self, best_scores: dict[str, float] | None) -> None:
        """The null threshold a model keeps when none was given: the one picked on --eval at
        the best epoch (ALBERT's head), else 0.0."""
        if self.settings.null_score_diff_threshold is not None:
            return
        picked = (best_scores or {}).get("null_score_diff_threshold", 0.0)
        self.settings = self.settings.replace(null_score_diff_threshold=float(picked))

    def encode(self, examples: list, tokenizer: Any, training: bool) -> SquadData:
        s = self.settings
        squad_features = data.build_squad_features(
            examples, tokenizer, s.max_seq_length, s.doc_stride, s.max_query_length, training
        )
        inputs = {
            n: np.asarray([getattr(f, n) for f in squad_features], np.int32) for n in INPUT_NAMES
        }
        starts = np.asarray([f.start_position for f in squad_features], np.int32)
        labels = {
            "start_positions": starts,
            "end_positions": np.asarray([f.end_position for f in squad_features], np.int32),
            # the original's label: no answer in this window (the question's or the window's)
            "is_impossible": (starts == 0).astype(np.int32),
        }
        gold = {e.qid: list(e.gold_texts) for e in examples}
        return SquadData(inputs, labels, examples, squad_features=squad_features, gold_answers=gold)

    def num_outputs(self) -> int:
        return 2

    def trim_batch(self, inputs: dict, targets: Any) -> tuple[dict, Any]:
        inputs, targets = super().trim_batch(inputs, targets)
        return {**inputs, **{k: targets[k] for k in self.training_inputs}}, targets

    def forward(self, encoder: Any, head: Any, inputs: dict, training: bool | None) -> dict:
        import tensorflow as tf

        encoded = encoder({k: inputs[k] for k in INPUT_NAMES}, training=training)
        if self.albert_head:
            from albert_tf.finetune.tasks.squad.heads import answer_mask

            start = inputs.get("start_positions") if training else None
            return head(encoded, answer_mask(inputs), start, training=training)
        logits = head(encoded, training=training)  # [B, S, 2]
        padding = (1.0 - tf.cast(inputs["input_mask"], tf.float32)) * -10000.0  # [B, S]
        return {"start_logits": logits[:, :, 0] + padding, "end_logits": logits[:, :, 1] + padding}

    def loss(self, outputs: dict, labels: Any) -> Any:
        """BERT's head: the mean of the start and end cross-entropies. ALBERT's: as
        run_squad_v2.py sums it, (start + end) / 2 + answer class / 2, each a batch mean (the
        answer class a sigmoid cross-entropy against `is_impossible`)."""
        import tensorflow as tf

        if self.albert_head:
            start = -tf.gather(outputs["start_log_probs"], labels["start_positions"], batch_dims=1)
            end = -tf.gather(outputs["end_log_probs"], labels["end_positions"], batch_dims=1)
            answer = tf.nn.sigmoid_cross_entropy_with_logits(
                tf.cast(labels["is_impossible"], tf.float32), outputs["cls_logits"]
            )
            return (tf.reduce_mean(start) + tf.reduce_mean(end)) / 2.0 + tf.reduce_mean(
                answer
            ) / 2.0
        start = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels["start_positions"], outputs["start_logits"]
        )
        end = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels["end_positions"], outputs["end_logits"]
        )
        return tf.reduce_mean(start + end) / 2.0

    def null_threshold(self) -> float | None:
        """The threshold decode applies: None answers every question (v1.1 data; ALBERT's head
        before a threshold is picked), BERT's head defaults to 0.0."""
        s = self.settings
        if not s.version_2_with_negative:
            return None
        if s.null_score_diff_threshold is None and not self.albert_head:
            return 0.0
        return s.null_score_diff_threshold

    def decode(self, outputs: dict[str, np.ndarray], task_data: SquadData) -> list[dict]:
        s = self.settings
        if self.albert_head:
            predictions = postprocess.postprocess_squad_beam(
                task_data.examples,
                task_data.squad_features,
                outputs,
                n_best_size=s.n_best_size,
                max_answer_length=s.max_answer_length,
                null_score_diff_threshold=self.null_threshold(),
            )
        else:
            predictions = postprocess.postprocess_squad(
                task_data.examples,
                task_data.squad_features,
                outputs["start_logits"],
                outputs["end_logits"],
                n_best_size=s.n_best_size,
                max_answer_length=s.max_answer_length,
                version_2_with_negative=s.version_2_with_negative,
                null_score_diff_threshold=self.null_threshold() or 0.0,
            )
        records = []
        for p in predictions:
            record = {
                "id": p.qid,
                "answer": p.text,
                "char_start": p.char_start,
                "char_end": p.char_end,
                "null_score_diff": p.null_score_diff if math.isfinite(p.null_score_diff) else None,
            }
            if s.version_2_with_negative:  # the answer if the question is answered
                record["best_span"] = next((e["text"] for e in p.nbest if e["text"]), "")
            records.append(record)
        return records

    def evaluate(self, records: list[dict], task_data: SquadData) -> dict[str, float]:
        """The official EM/F1, and on v2.0 data HasAns/NoAns and the official search for the
        null threshold on the best spans (`best_exact`, `best_f1` and their `*_thresh`: with
        BERT's head a threshold for --null-score-diff-threshold as it is). ALBERT's head without
        a threshold yet (in training) decides with the picked `best_f1_thresh`, as
        run_squad_v2.py does, and `null_score_diff_threshold` says which."""
        gold = task_data.gold_answers
        answers = {r["id"]: r["answer"] for r in records}
        if not self.settings.version_2_with_negative:
            return metrics.squad_scores(answers, gold)
        spans = {r["id"]: r["best_span"] for r in records}
        null_scores = {
            r["id"]: math.inf if r["null_score_diff"] is None else r["null_score_diff"]
            for r in records
        }
        search = metrics.squad_null_threshold_search(spans, null_scores, gold)
        if not self.albert_head:
            return {**metrics.squad_scores(answers, gold), **search}
        threshold = self.settings.null_score_diff_threshold
        if threshold is None:
            threshold = search["best_f1_thresh"]
            answers = {q: "" if null_scores[q] >= threshold else spans[q] for q in spans}
        scores = metrics.squad_scores(answers, gold)
        return {**scores, **search, "null_score_diff_threshold": threshold}

    def has_labels(self, task_data: SquadData) -> bool:
        return any(task_data.gold_answers.values()) or any(
            e.is_impossible for e in task_data.examples
        )

    def serving_function(self, module: Any) -> Any:
        """`question` [B], `context` [B] -> `answer` string [B] (normalized, i.e. lowercased text
        of the answer tokens, stripped; "" for no answer), `start_token`, `end_token` int32 [B]
        (positions in the packed sequence, 0 = [CLS] for no answer), `null_score_diff` float32
        [B]; with BERT's head `start_logits`, `end_logits` [B, S], with ALBERT's the beam
        (`start_top_log_probs`, `start_top_index` [B, K], `end_top_log_probs`, `end_top_index`
        [B, K * K']). One window: contexts longer than the sequence are truncated (`albert-tf
        predict` uses doc stride and returns character offsets)."""
        import tensorflow as tf

        string = tf.TensorSpec([None], tf.string)
        fn = tf.function(lambda question, context: self.serve(module, question, context))
        return fn.get_concrete_function(question=string, context=string)

    def serve(self, module: Any, question: Any, context: Any) -> dict:
        """The serving signature's outputs (see `serving_function`)."""
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
        offset = query.row_lengths() + 2  # first context position
        positions = tf.range(length, dtype=tf.int64)[tf.newaxis]  # [1, S]
        in_doc = (positions >= offset[:, tf.newaxis]) & (
            positions < (offset + doc.row_lengths())[:, tf.newaxis]
        )  # [B, S]
        # A span of bare "▁" pieces only is empty once stripped, so it is no answer.
        ids = packed["input_word_ids"]
        words = tf.cast(ids != module.blank_id, tf.int32)  # [B, S]
        spans = _Spans(in_doc, words, tf.cumsum(words, axis=1), s.max_answer_length)
        pick = self._serve_beam if self.albert_head else self._serve_pairs
        start_token, end_token, has_answer, returned = pick(outputs, spans)
        span = tf.ragged.range(start_token, end_token + 1)  # [B, (n)]
        text = tf.strings.strip(module.detokenizer.detokenize(tf.gather(ids, span, batch_dims=1)))
        return {
            "answer": tf.where(has_answer, text, ""),
            "start_token": tf.where(has_answer, start_token, 0),
            "end_token": tf.where(has_answer, end_token, 0),
            **returned,
        }

    def _serve_pairs(self, outputs: dict, spans: _Spans) -> tuple:
        """BERT's head in the graph: the best-scoring valid (start, end) pair of all."""
        import tensorflow as tf

        length = self.settings.max_seq_length
        start, end = outputs["start_logits"], outputs["end_logits"]  # [B, S]
        pair = start[:, :, tf.newaxis] + end[:, tf.newaxis, :]  # [B, S(start), S(end)]
        positions = tf.range(length)
        valid = spans.valid(positions[tf.newaxis, :, tf.newaxis], positions[tf.newaxis, tf.newaxis])
        scores = tf.where(valid, pair, tf.fill(tf.shape(pair), -1e9))
        flat = tf.reshape(scores, [-1, length * length])  # [B, S*S]
        best = tf.argmax(flat, axis=-1, output_type=tf.int32)
        best_score = tf.reduce_max(flat, axis=-1)
        diff = start[:, 0] + end[:, 0] - best_score
        has_answer = best_score > -1e8
        threshold = self.null_threshold()
        if threshold is not None:
            has_answer &= diff <= threshold
        returned = {"null_score_diff": diff, "start_logits": start, "end_logits": end}
        return best // length, best % length, has_answer, returned

    def _serve_beam(self, outputs: dict, spans: _Spans) -> tuple:
        """ALBERT's head in the graph: the beam's best valid pair, "no answer" when the
        answer-class logit reaches the threshold (`postprocess.postprocess_squad_beam` on
        one window)."""
        import tensorflow as tf

        s = self.settings
        starts = outputs["start_top_index"][:, :, tf.newaxis]  # [B, K, 1]
        ends = tf.reshape(outputs["end_top_index"], [-1, s.start_n_top, s.end_n_top])  # [B, K, K']
        score = outputs["start_top_log_probs"][:, :, tf.newaxis] + tf.reshape(
            outputs["end_top_log_probs"], [-1, s.start_n_top, s.end_n_top]
        )  # [B, K, K']
        valid = spans.valid(starts, ends)
        flat = tf.reshape(
            tf.where(valid, score, tf.fill(tf.shape(score), -1e30)),
            [-1, s.start_n_top * s.end_n_top],
        )
        best = tf.argmax(flat, axis=-1, output_type=tf.int32)  # [B]
        beam = tf.reshape(tf.broadcast_to(starts, tf.shape(ends)), tf.shape(flat))
        start_token = tf.gather(beam, best, batch_dims=1)
        end_token = tf.gather(outputs["end_top_index"], best, batch_dims=1)
        has_answer = tf.reduce_any(valid, axis=[1, 2])
        null = outputs["cls_logits"]
        threshold = self.null_threshold()
        if threshold is not None:
            has_answer &= null < threshold
        keys = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index")
        return (
            start_token,
            end_token,
            has_answer,
            {"null_score_diff": null, **{k: outputs[k] for k in keys}},
        )
