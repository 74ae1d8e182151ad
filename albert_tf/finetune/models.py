"""The task model: an ALBERT encoder, a task head, and the task's forward pass between them.

The encoder is anything with the TF-Hub encoder contract (an `AlbertEncoder`, or a
`hub.KerasLayer` of an exported encoder): dict of int32 [B, S] `input_word_ids`, `input_mask`,
`input_type_ids` in, dict with `pooled_output [B, H]` and `sequence_output [B, S, H]` out.
Each task model owns one head, saved in checkpoints as the child `task_head`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras

from albert_tf.errors import ConfigError
from albert_tf.finetune.features import INPUT_NAMES
from albert_tf.finetune.tasks.base import Task
from albert_tf.finetune.tasks.squad.heads import SquadV2Head

CLASSIFIER_DROPOUT = 0.1  # the paper's Table 14: classifier dropout 0.1 on every task


def _initializer(stddev: float) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=stddev)


class TaskHead(keras.layers.Layer):
    """Dropout then a dense layer to `num_outputs` float32 logits.

    Reads the encoder output `reads`: `pooled_output` ([B, H] -> [B, num_outputs]) or
    `sequence_output` ([B, S, H] -> [B, S, num_outputs]).
    """

    def __init__(
        self,
        num_outputs: int,
        reads: str = "pooled_output",
        dropout: float = CLASSIFIER_DROPOUT,
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", "task_head")
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.reads = reads
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout)
        self.dense = keras.layers.Dense(
            num_outputs, kernel_initializer=_initializer(initializer_range), name="dense"
        )

    def call(
        self, encoder_outputs: dict[str, tf.Tensor], training: bool | None = None
    ) -> tf.Tensor:
        x = self.dropout(encoder_outputs[self.reads], training=training)
        return tf.cast(self.dense(x), tf.float32)

    def output_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """The output layer's kernel [H, num_outputs] and bias [num_outputs], float32 (what an
        exporter copies; in the checkpoint `task_head/dense/{kernel,bias}`)."""
        return (
            np.asarray(self.dense.kernel.numpy(), np.float32),
            np.asarray(self.dense.bias.numpy(), np.float32),
        )

    def set_output_weights(self, kernel: np.ndarray, bias: np.ndarray) -> None:
        """Assigns the output layer's kernel [H, num_outputs] and bias [num_outputs] (the head
        must be built)."""
        self.dense.kernel.assign(kernel)
        self.dense.bias.assign(bias)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "num_outputs": self.num_outputs,
            "reads": self.reads,
            "dropout": self.dropout_rate,
            "initializer_range": self.initializer_range,
        }


def reinit_pooler(encoder: Any, initializer_range: float) -> None:
    """Gives `encoder`'s pooler fresh weights, as a new layer gets (truncated normal kernel of
    stddev `initializer_range`, zero bias; drawn from the global seed). Pretraining fits the
    pooler to sentence order only, and in a briefly pretrained model its output can lie almost
    on one line whatever the text (Zhang et al. 2021 re-initialize it for few-sample fine-tuning).
    Works on an `AlbertEncoder` and on a `hub.KerasLayer` of our exported encoder."""
    pooler = [v for v in encoder.trainable_variables if "pooler" in v.name]
    kernels = [v for v in pooler if len(v.shape) == 2]
    biases = [v for v in pooler if len(v.shape) == 1]
    if len(kernels) != 1 or len(biases) != 1:
        raise ConfigError(
            "--reinit-pooler: the encoder has no single trainable pooler kernel and bias "
            f"(found {', '.join(v.name for v in pooler) or 'no variable named pooler'})"
        )
    kernel, bias = kernels[0], biases[0]
    kernel.assign(tf.cast(_initializer(initializer_range)(kernel.shape), kernel.dtype))
    bias.assign(tf.zeros_like(bias))


def build_head(task: Task, initializer_range: float) -> keras.layers.Layer:
    """The head `task` needs: a `TaskHead`, or for SQuAD with ALBERT's head a
    `tasks.squad.heads.SquadV2Head`."""
    if task.name == "squad" and task.albert_head:
        s = task.settings
        return SquadV2Head(s.start_n_top, s.end_n_top, initializer_range=initializer_range)
    return TaskHead(task.num_outputs(), task.reads, initializer_range=initializer_range)


class TaskModel(keras.Model):
    """Encoder + `TaskHead`, joined by `task.forward`; returns a dict of float32 tensors.

    Inputs: the three encoder inputs, int32 [B, S] ([B, C, S] for multiple choice, [B, K, S]
    for windows). Outputs by task: classify `logits [B, L]`; regress `predictions [B]`; squad
    with BERT's head `start_logits, end_logits [B, S]` (padding positions at -10000), with
    ALBERT's the beam and `cls_logits` (`tasks.squad.heads.SquadV2Head`); multiple-choice
    `logits [B, C]`; tag `logits [B, S, T]`.
    """

    def __init__(self, encoder: Any, task_head: TaskHead, task: Task, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.encoder = encoder
        self.task_head = task_head
        self.task = task

    def call(
        self, inputs: dict[str, tf.Tensor], training: bool | None = None
    ) -> dict[str, tf.Tensor]:
        names = (*INPUT_NAMES, *self.task.training_inputs)
        features = {name: tf.cast(inputs[name], tf.int32) for name in names if name in inputs}
        return self.task.forward(self.encoder, self.task_head, features, training)
