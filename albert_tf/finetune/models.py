"""Task models on an ALBERT encoder: classification/regression, spans, multiple choice, tags.

The encoder is anything with the TF-Hub encoder contract (an `AlbertEncoder`, or a
`hub.KerasLayer` of an exported encoder): dict of int32 [B, S] `input_word_ids`, `input_mask`,
`input_type_ids` in, dict with `pooled_output [B, H]` and `sequence_output [B, S, H]` out.
Each task model owns one head, saved in checkpoints as the child `task_head`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

TASKS = ("classify", "regress", "squad", "multiple-choice", "tag")
CLASSIFIER_DROPOUT = 0.1  # the paper's Table 14: classifier dropout 0.1 on every task


def _initializer(stddev: float) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=stddev)


class TaskHead(keras.layers.Layer):
    """Dropout then a dense layer to `num_outputs` float32 logits.

    Reads `pooled_output` (classify, regress, multiple-choice: [B, H] -> [B, num_outputs]) or
    `sequence_output` (squad, tag: [B, S, H] -> [B, S, num_outputs]).
    """

    def __init__(
        self,
        task: str,
        num_outputs: int,
        dropout: float = CLASSIFIER_DROPOUT,
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", "task_head")
        super().__init__(**kwargs)
        self.task = task
        self.num_outputs = num_outputs
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout)
        self.dense = keras.layers.Dense(
            num_outputs, kernel_initializer=_initializer(initializer_range), name="dense"
        )

    def call(
        self, encoder_outputs: dict[str, tf.Tensor], training: bool | None = None
    ) -> tf.Tensor:
        key = "sequence_output" if self.task in ("squad", "tag") else "pooled_output"
        x = self.dropout(encoder_outputs[key], training=training)
        return tf.cast(self.dense(x), tf.float32)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "task": self.task,
            "num_outputs": self.num_outputs,
            "dropout": self.dropout_rate,
            "initializer_range": self.initializer_range,
        }


def num_head_outputs(task: str, num_labels: int) -> int:
    """Width of the head's dense layer for `task` with `num_labels` classes/tags."""
    return {"classify": num_labels, "tag": num_labels, "regress": 1, "squad": 2}.get(task, 1)


class TaskModel(keras.Model):
    """Encoder + `TaskHead`; returns a dict of float32 logits.

    Inputs: the three encoder inputs, int32 [B, S] (multiple-choice: [B, C, S]).
    Outputs by task: classify `logits [B, L]`; regress `predictions [B]`; squad
    `start_logits, end_logits [B, S]` (padding positions at -10000); multiple-choice
    `logits [B, C]`; tag `logits [B, S, T]`.
    """

    def __init__(self, encoder: Any, task_head: TaskHead, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.encoder = encoder
        self.task_head = task_head
        self.task = task_head.task

    def call(
        self, inputs: dict[str, tf.Tensor], training: bool | None = None
    ) -> dict[str, tf.Tensor]:
        names = ("input_word_ids", "input_mask", "input_type_ids")
        features = {name: tf.cast(inputs[name], tf.int32) for name in names}
        if self.task == "multiple-choice":
            shape = tf.shape(features["input_word_ids"])
            features = {k: tf.reshape(v, [-1, shape[2]]) for k, v in features.items()}  # [B*C, S]
        outputs = self.encoder(features, training=training)
        logits = self.task_head(outputs, training=training)
        if self.task == "classify" or self.task == "tag":
            return {"logits": logits}
        if self.task == "regress":
            return {"predictions": logits[:, 0]}
        if self.task == "multiple-choice":
            return {"logits": tf.reshape(logits, [-1, shape[1]])}  # [B, C]
        padding = (1.0 - tf.cast(features["input_mask"], tf.float32)) * -10000.0
        return {"start_logits": logits[:, :, 0] + padding, "end_logits": logits[:, :, 1] + padding}


def task_loss(task: str, outputs: dict[str, tf.Tensor], labels: Any) -> tf.Tensor:
    """Mean training loss: cross-entropy (MSE for regress; squad averages start and end;
    tag ignores label -100)."""
    if task == "regress":
        return tf.reduce_mean(tf.square(outputs["predictions"] - tf.cast(labels, tf.float32)))
    if task == "squad":
        start = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels["start_positions"], outputs["start_logits"]
        )
        end = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels["end_positions"], outputs["end_logits"]
        )
        return tf.reduce_mean(start + end) / 2.0
    if task == "tag":
        labels = tf.cast(labels, tf.int32)
        weights = tf.cast(labels >= 0, tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
            tf.maximum(labels, 0), outputs["logits"]
        )
        return tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(labels, tf.int32), outputs["logits"])
    )
