"""multiple-choice: RACE files; one `[CLS] article [SEP] question+option [SEP]` per option, the
pooled output of each scored by the head, softmax over the options."""

from __future__ import annotations

from typing import Any

import numpy as np

from albert_tf.finetune import data, features, metrics
from albert_tf.finetune.metrics import softmax
from albert_tf.finetune.tasks.base import Task, TaskData

LETTERS = "ABCDEFGHIJ"


class MultipleChoice(Task):
    name = "multiple-choice"
    best_metric = "accuracy"

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        return data.read_race(path, require_labels=require_labels), {}

    def encode(self, examples: list, tokenizer: Any, training: bool) -> TaskData:
        encoded = features.encode_choices(examples, tokenizer, self.settings.max_seq_length)
        skipped = {"truncated to --max-seq-length": encoded.truncated} if encoded.truncated else {}
        return TaskData(encoded.inputs, encoded.labels, examples, skipped)

    def input_shape(self) -> list[int]:
        return [1, 1, self.settings.max_seq_length]

    def forward(self, encoder: Any, head: Any, inputs: dict, training: bool | None) -> dict:
        import tensorflow as tf

        shape = tf.shape(inputs["input_word_ids"])  # [B, C, S]
        flat = {k: tf.reshape(v, [-1, shape[2]]) for k, v in inputs.items()}  # [B * C, S]
        logits = head(encoder(flat, training=training), training=training)  # [B * C, 1]
        return {"logits": tf.reshape(logits, [-1, shape[1]])}  # [B, C]

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        return [
            {"id": e.qid, "label": LETTERS[int(p.argmax())], "probabilities": p.tolist()}
            for e, p in zip(task_data.examples, softmax(outputs["logits"]), strict=True)
        ]

    def evaluate(self, records: list[dict], task_data: TaskData) -> dict[str, float]:
        gold = [e.label for e in task_data.examples]
        predicted = [LETTERS.index(r["label"]) for r in records]
        return {"accuracy": metrics.accuracy(gold, predicted)}

    def serving_function(self, module: Any) -> Any:
        """`context` [B], `question` [B], `options` [B, C] -> `label` ("A", "B", ...) [B],
        `label_id` [B], `probabilities` [B, C]."""
        import tensorflow as tf

        string = tf.TensorSpec([None], tf.string)
        fn = tf.function(
            lambda context, question, options: self.serve(module, context, question, options)
        )
        return fn.get_concrete_function(
            context=string, question=string, options=tf.TensorSpec([None, None], tf.string)
        )

    def serve(self, module: Any, context: Any, question: Any, options: Any) -> dict:
        import tensorflow as tf

        length = self.settings.max_seq_length
        shape = tf.shape(options)  # [B, C]
        questions = tf.reshape(tf.repeat(question[:, tf.newaxis], shape[1], axis=1), [-1])  # [B*C]
        flat_options = tf.reshape(options, [-1])  # [B*C]
        # Python's question.replace("_", option): split on "_", put the option after every part
        # but the last, join.
        parts = tf.strings.split(questions, "_")  # [B*C, (k)]
        part_index = tf.ragged.range(parts.row_lengths())
        is_last = (part_index == tf.expand_dims(parts.row_lengths() - 1, 1)).flat_values
        option_of_part = tf.gather(flat_options, parts.value_rowids())
        pieces = tf.strings.join([parts.flat_values, tf.where(is_last, "", option_of_part)])
        filled = tf.strings.reduce_join(parts.with_flat_values(pieces), axis=1)  # [B*C]
        blank = tf.strings.regex_full_match(questions, "(?s).*_.*")
        qa = tf.where(blank, filled, tf.strings.join([questions, flat_options], separator=" "))
        contexts = tf.reshape(tf.repeat(context[:, tf.newaxis], shape[1], axis=1), [-1])  # [B*C]
        packed = module.pack([module.tokenizer.tokenize(contexts), module.tokenizer.tokenize(qa)])
        packed = {k: tf.reshape(v, [shape[0], shape[1], length]) for k, v in packed.items()}
        logits = module.call_model(packed)["logits"]  # [B, C]
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "label": tf.gather(tf.constant(list(LETTERS)), label_id),
            "label_id": label_id,
            "probabilities": tf.nn.softmax(logits),
        }
