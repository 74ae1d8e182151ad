"""What a fine-tuning task is: settings, featurized data, and the `Task` every task module extends.

A task is one object built from its `TaskSettings`: it reads its file format (`read`), learns
what it needs from the training examples (`configure`), turns examples into model inputs
(`encode`), runs its head on the encoder (`forward`), defines the training loss (`loss`), turns
model outputs into one JSON-ready record per example (`decode`), scores records against the gold
labels (`evaluate`) and builds its serving signature on raw strings (`serving_function`). The
trainer, `albert-tf predict`, the serving export and the tests all go through these methods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from albert_tf.errors import ConfigError, DataError

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
WINDOW_POOLINGS = ("mean", "max")
WINDOW_PLACEMENTS = ("head", "spread", "head-tail")  # see finetune.windows.window_starts


@dataclass
class TaskSettings:
    """What decides how a task's files become features; saved in the fine-tuned model."""

    task: str
    max_seq_length: int = 128
    labels: list[str] | None = None  # classify: class names; tag: tag names
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    has_header: bool = True
    quoting: str = "auto"  # TSV/CSV quoting: "auto", "csv" or "none" (see data.read_text_file)
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    version_2_with_negative: bool = True
    has_pair: bool = False  # classify/regress: examples are sentence pairs
    # classify/regress: windows of max_seq_length over long texts (see finetune.windows)
    max_windows: int = 1
    window_stride: int | None = None  # tokens between window starts; None: half a window
    window_pooling: str = "mean"  # how window logits make the document's: "mean" or "max"
    window_placement: str = "head"  # where K windows go on a longer text (windows.window_starts)
    max_first_segment_length: int | None = None  # pairs in windows: tokens kept of text A


@dataclass
class TaskData:
    """Model inputs of one file; `labels` is None for unlabelled input."""

    inputs: dict[str, np.ndarray]
    labels: Any
    examples: list
    skipped: dict[str, int] = field(default_factory=dict)
    squad_features: list | None = None
    word_index: np.ndarray | None = None
    gold_answers: dict[str, list[str]] | None = None

    def __len__(self) -> int:
        return len(self.examples)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (float64 inputs stay float64)."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


class Task:
    """A task bound to its settings. Subclasses set `name` and `best_metric` and implement
    `read`, `encode`, `decode` and `evaluate`; the rest has defaults for a head on
    `pooled_output` trained with cross-entropy on `logits`."""

    name: ClassVar[str]
    best_metric: ClassVar[str]  # the metric that picks the best epoch
    reads: ClassVar[str] = "pooled_output"  # the encoder output the head reads
    supports_windows: ClassVar[bool] = False

    def __init__(self, settings: TaskSettings) -> None:
        self.settings = settings

    def validate(self) -> None:
        """ConfigError for settings the task cannot use."""
        s = self.settings
        if s.window_stride is not None and s.window_stride < 1:
            raise ConfigError(f"--window-stride must be positive, got {s.window_stride}")
        if s.window_pooling not in WINDOW_POOLINGS:
            raise ConfigError(
                f"--window-pooling must be one of {', '.join(WINDOW_POOLINGS)}, "
                f"got {s.window_pooling!r}"
            )
        if s.window_placement not in WINDOW_PLACEMENTS:
            raise ConfigError(
                f"--window-placement must be one of {', '.join(WINDOW_PLACEMENTS)}, "
                f"got {s.window_placement!r}"
            )
        if s.max_windows < 1:
            raise ConfigError(f"--max-windows must be positive, got {s.max_windows}")
        if s.max_windows > 1 and not self.supports_windows:
            raise ConfigError(
                f"--max-windows applies to classify, regress and tag, not {self.name}"
            )

    # === Files ===

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        """Examples of a task file, and counts of what was skipped (reported by callers)."""
        raise NotImplementedError

    def configure(self, examples: list, path: str) -> None:
        """Completes the settings from the training examples (labels, pairs)."""

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
