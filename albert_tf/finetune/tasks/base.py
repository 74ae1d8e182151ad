"""What a fine-tuning task is: settings, featurized data, and the `Task` every task module extends.

A task is one object built from the run's `FinetuneSettings`: it reads its file format
(`read`), learns what it needs from the training examples (`configure`), turns examples into
model inputs (`encode`), runs its head on the encoder (`forward`), defines the training loss
(`loss`), learns what it keeps from the best epoch's evaluation (`after_training`), turns
model outputs into one JSON-ready record per example (`decode`), scores records
against the gold labels (`evaluate`) and builds its serving signature on raw strings
(`serving_function`). The trainer, `albert-tf predict`, the serving export and the tests all go
through these methods. The methods import TensorFlow when called: `albert_tf.finetune.tasks`
imports this module, and listing the tasks (the CLI's `--task` choices) loads no TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from albert_tf.errors import DataError
from albert_tf.finetune.settings import FinetuneSettings


@dataclass
class TaskData:
    """Model inputs of one file; `labels` is None for unlabelled input. A task that keeps more
    of a file for decoding extends it (`tasks.squad.task.SquadData`)."""

    inputs: dict[str, np.ndarray]
    labels: Any
    examples: list
    skipped: dict[str, int] = field(default_factory=dict)
    word_index: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.examples)


class Task:
    """A task bound to its settings. Subclasses set `name` and `best_metric` and implement
    `read`, `encode`, `decode` and `evaluate`; the rest has defaults for a head on
    `pooled_output` trained with cross-entropy on `logits`."""

    name: ClassVar[str]
    best_metric: ClassVar[str]  # the metric that picks the best epoch
    reads: ClassVar[str] = "pooled_output"  # the encoder output the head reads
    # labels the forward pass reads in training (`trim_batch` puts them among the inputs)
    training_inputs: tuple[str, ...] = ()

    def __init__(self, settings: FinetuneSettings) -> None:
        self.settings = settings

    # === Files ===

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        """Examples of a task file, and counts of what was skipped (reported by callers)."""
        raise NotImplementedError

    def configure(self, examples: list, path: str) -> None:
        """Completes the settings from the training examples (labels, pairs): replaces
        `self.settings` with them filled in."""

    def after_training(self, best_scores: dict[str, float] | None) -> None:
        """Completes the settings from the best epoch's evaluation scores (None without
        --eval) before the model directory records them."""

    def encode(self, examples: list, tokenizer: Any, training: bool) -> TaskData:
        """Model inputs (and labels, when every example has one) of `examples`."""
        raise NotImplementedError

    def load(
        self,
        path: str,
        tokenizer: Any,
        training: bool = False,
        require_labels: bool = True,
        configure: bool = False,
    ) -> TaskData:
        """Reads `path` once and encodes it; with `configure` (the training file) the settings
        are first completed from its examples. DataError on malformed records, labels unknown
        to the settings, or a file without examples."""
        examples, skipped = self.read(path, training, require_labels)
        if not examples:
            raise DataError(f"{path} holds no examples")
        if configure:
            self.configure(examples, path)
        task_data = self.encode(examples, tokenizer, training)
        task_data.skipped = {**skipped, **task_data.skipped}
        return task_data

    # === Model ===

    def num_outputs(self) -> int:
        """Width of the head's dense layer."""
        return 1

    def input_shape(self) -> list[int]:
        """Shape of a one-example batch of model inputs (to build the model's variables)."""
        s = self.settings
        return [1, s.max_windows, s.max_seq_length] if s.max_windows > 1 else [1, s.max_seq_length]

    def forward(self, encoder: Any, head: Any, inputs: dict, training: bool | None) -> dict:
        """The task model's outputs (dict of float32 tensors) for int32 encoder inputs."""
        return {"logits": head(encoder(inputs, training=training), training=training)}

    def loss(self, outputs: dict, labels: Any) -> Any:
        """Mean training loss of one batch."""
        import tensorflow as tf

        return tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.cast(labels, tf.int32), outputs["logits"]
            )
        )

    def training_rows(self, task_data: TaskData) -> tuple[dict[str, np.ndarray], Any]:
        """(inputs, labels) of the rows training steps draw batches from."""
        return task_data.inputs, task_data.labels

    def trim_batch(self, inputs: dict, targets: Any) -> tuple[dict, Any]:
        """Cuts a batch's padding to its longest sequence (training cost follows real lengths)."""
        import tensorflow as tf

        length = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=-1))
        return {k: v[..., :length] for k, v in inputs.items()}, targets  # [..., L]

    # === Predictions ===

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        """One JSON-ready prediction record per example (see `albert-tf predict --help`)."""
        raise NotImplementedError

    def evaluate(self, records: list[dict], task_data: TaskData) -> dict[str, float]:
        """The task's metrics of `records` against the gold labels of `task_data`."""
        raise NotImplementedError

    def has_labels(self, task_data: TaskData) -> bool:
        """Whether `task_data` carries gold labels for every example."""
        return task_data.labels is not None

    # === Serving ===

    def serving_function(self, module: Any) -> Any:
        """The concrete `serving_default` function on raw strings; `module` is the
        `serving.ServingModule` holding the tokenizer and the model."""
        raise NotImplementedError
