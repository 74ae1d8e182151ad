"""A fine-tuning run's settings: one frozen dataclass for the CLI, the library call, the tasks
and finetune.json.

Every default is written here and only here: `albert-tf finetune` takes its flag defaults from
the fields (`cli_defaults`). Field names are the flag names (`--max-windows` is `max_windows`,
`--eval` is `eval`) except where a flag turns something off: `--no-header`/`--no-lower-case`/
`--no-serving` are `has_header`/`do_lower_case`/`export_serving` (the positive name that
finetune.json, `predict` and the exports read), and `--labels a,b` is the tuple ("a", "b").
Model directories written before the paths took the flags' names record `train_path`,
`eval_path` and `output_dir` (`LEGACY_NAMES`, read by `from_record`).
`has_pair` and `version_2_with_negative` are not flags: the task learns them from the training
file (`Task.configure` replaces the settings with them filled in), and finetune.json records
them with the rest, so `predict` and the serving export read a model exactly as it was trained.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from typing import Any

from albert_tf.dtypes import DTYPES
from albert_tf.errors import ConfigError
from albert_tf.optimizer import OPTIMIZERS

TASK_NAMES = ("classify", "regress", "squad", "multiple-choice", "tag")
WINDOWED_TASKS = ("classify", "regress", "tag")
QUOTINGS = ("auto", "csv", "none")  # TSV/CSV quoting (see data.read_text_file)
WINDOW_POOLINGS = ("mean", "max")
WINDOW_PLACEMENTS = ("head", "spread", "head-tail")  # the formulas: windows.window_starts
# squad: ALBERT's own SQuAD 2.0 head (tasks.squad.heads) or BERT's start/end head
SQUAD_HEADS = ("albert", "bert")
# Chosen by experiments/long_documents.py (docs/guides/long-documents.md): at equal K it matched
# windows over every token where the evidence comes last, and cost nothing where it does not.
DEFAULT_WINDOW_PLACEMENT = "spread"
# Old finetune.json key -> the flag's name that replaced it.
LEGACY_NAMES = {"train_path": "train", "eval_path": "eval", "output_dir": "output"}
# Flag -> field where a flag turns something off.
_INVERTED = {
    "no_header": "has_header",
    "no_lower_case": "do_lower_case",
    "no_serving": "export_serving",
}
_LEARNED = ("has_pair", "version_2_with_negative")  # from --train, not flags
# Fields a model directory's finetune.json records but a run does not need again.
_PLACEHOLDER = "(not recorded)"


@dataclasses.dataclass(frozen=True)
class FinetuneSettings:
    """Everything one `finetune` run needs; see `albert-tf finetune --help` for each flag."""

    task: str  # one of TASK_NAMES
    train: str  # the training file
    init: str  # checkpoint dir, TF1 checkpoint, TF-Hub encoder dir, or "random"
    output: str  # the fine-tuned model directory
    eval: str | None = None  # evaluated after each epoch
    overwrite: bool = False
    config: str | None = None  # albert_config.json or preset (TF1 checkpoints, "random")
    sp_model: str | None = None  # default: the one that comes with `init`
    do_lower_case: bool = True
    # === Optimization ===
    # None: by the encoder's size (finetune.defaults), filled in when the run starts
    epochs: int | None = None
    batch_size: int = 32  # training rows per step (windows, with --max-windows)
    eval_batch_size: int = 64  # texts per evaluation batch
    learning_rate: float | None = None  # peak, after warmup; by size when None
    warmup_proportion: float | None = None  # by size when None
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    # fresh pooler weights before training (its pretrained ones serve sentence order); by size
    reinit_pooler: bool | None = None
    train_steps: int | None = (
        None  # at most this many steps (default: the epochs'); 0 evaluates the start
    )
    seed: int = 12345
    seeds: int = 1  # runs with seeds seed, seed+1, ...; the best on eval is kept
    restarts: int = 2  # with eval: a run that does not beat its floor starts again
    dtype: str = "auto"
    # === Features ===
    max_seq_length: int = 128
    # classify/regress files
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    has_header: bool = True
    quoting: str = "auto"
    labels: tuple[str, ...] | None = None  # classify: class names; tag: tag names
    # classify/regress/tag: windows of max_seq_length over long texts (see finetune.windows)
    max_windows: int = 1
    window_stride: int | None = None  # tokens between window starts; None: half a window
    window_placement: str = DEFAULT_WINDOW_PLACEMENT  # where K windows go on a longer text
    window_pooling: str = "mean"  # how window logits make the document's: "mean" or "max"
    max_first_segment_length: int | None = None  # pairs in windows: tokens kept of text A
    # squad
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    # "no answer" threshold; None: 0.0 for BERT's head, picked on --eval for ALBERT's (the model
    # then records the one picked)
    null_score_diff_threshold: float | None = None
    # None: albert on v2.0 data (some questions have no answer), bert on v1.1 (filled in from --train)
    squad_head: str | None = None
    start_n_top: int = 5  # ALBERT's head: starts in the beam (run_squad_v2.py's default)
    end_n_top: int = 5  # ALBERT's head: ends per start
    # === Learned from the training file (not flags) ===
    has_pair: bool = False  # classify/regress: examples are text pairs
    version_2_with_negative: bool = True  # squad: some questions have no answer
    # === Output ===
    export_serving: bool = True  # write serving/ (--no-serving skips it)

    def __post_init__(self) -> None:
        if self.labels is not None and not isinstance(self.labels, tuple):
            object.__setattr__(self, "labels", tuple(self.labels))
        for name in ("train", "eval", "output", "init", "config", "sp_model"):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
        self.validate()

    def validate(self) -> None:
        """ConfigError naming the flag for any value out of range or not fitting the task
        (nothing is read: files are checked when the run starts)."""
        self._require(self.task in TASK_NAMES, "task", f"must be one of {', '.join(TASK_NAMES)}")
        self._require(self.epochs is None or self.epochs >= 1, "epochs", "must be positive")
        for name in ("batch_size", "eval_batch_size", "max_windows", "seeds"):
            self._require(getattr(self, name) >= 1, name, "must be positive")
        self._require(self.restarts >= 0, "restarts", "must not be negative")
        self._validate_squad()
        self._require(
            self.window_stride is None or self.window_stride >= 1,
            "window_stride",
            "must be positive",
        )
        self._require(self.max_seq_length >= 4, "max_seq_length", "must be at least 4")
        self._require(
            self.learning_rate is None
            or (math.isfinite(self.learning_rate) and self.learning_rate > 0),
            "learning_rate",
            "must be positive",
        )
        self._require(
            math.isfinite(self.weight_decay) and self.weight_decay >= 0,
            "weight_decay",
            "must be a number >= 0",
        )
        self._require(
            self.warmup_proportion is None or 0.0 <= self.warmup_proportion <= 1.0,
            "warmup_proportion",
            "must be in [0, 1]",
        )
        self._require(
            self.train_steps is None or self.train_steps >= 0, "train_steps", "must not be negative"
        )
        for name, choices in (
            ("optimizer", OPTIMIZERS),
            ("dtype", DTYPES),
            ("quoting", QUOTINGS),
            ("window_pooling", WINDOW_POOLINGS),
            ("window_placement", WINDOW_PLACEMENTS),
        ):
            value = getattr(self, name)
            self._require(value in choices, name, f"must be one of {', '.join(choices)}")
        if self.max_windows > 1:
            self._require(
                self.task in WINDOWED_TASKS,
                "max_windows",
                f"applies to {', '.join(WINDOWED_TASKS[:-1])} and {WINDOWED_TASKS[-1]}, not {self.task}",
            )
        if self.task == "tag":
            self._require(
                self.window_pooling == "mean",
                "window_pooling",
                "must be mean for tag (a word's tag is the mean over the windows holding it)",
            )
        elif self.max_windows > 1 and self.max_first_segment_length is not None:
            limit = self.max_seq_length - 4  # at least one token of text B per window
            self._require(
                1 <= self.max_first_segment_length <= limit,
                "max_first_segment_length",
                f"must be in [1, {limit}] at --max-seq-length {self.max_seq_length}",
            )

    def _validate_squad(self) -> None:
        """The SQuAD settings' part of `validate`."""
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            self._require(getattr(self, name) >= 1, name, "must be positive")
        for name in ("start_n_top", "end_n_top"):
            self._require(getattr(self, name) >= 1, name, "must be positive")
            self._require(
                self.task != "squad" or getattr(self, name) <= self.max_seq_length,
                name,
                f"must be at most --max-seq-length {self.max_seq_length}",
            )
        self._require(
            self.squad_head is None or self.squad_head in SQUAD_HEADS,
            "squad_head",
            f"must be one of {', '.join(SQUAD_HEADS)}",
        )
        self._require(
            self.null_score_diff_threshold is None or math.isfinite(self.null_score_diff_threshold),
            "null_score_diff_threshold",
            "must be a number",
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FinetuneSettings:
        """The settings from `albert-tf finetune`'s parsed arguments."""
        given = vars(args)
        values = {k: v for k, v in given.items() if k in _FIELDS}
        values.update({field: not given[flag] for flag, field in _INVERTED.items()})
        if values.get("labels") is not None:
            values["labels"] = tuple(values["labels"].split(","))
        return cls(**values)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> FinetuneSettings:
        """The settings a model directory's finetune.json recorded (`record()`), also from a
        model fine-tuned before the settings were one object (task and training settings apart,
        no paths, windows at the head, SQuAD with BERT's head; paths under LEGACY_NAMES)."""
        values = {"window_placement": "head"} if "window_placement" not in record else {}
        if "squad_head" not in record:  # SQuAD models from before ALBERT's head have BERT's
            values["squad_head"] = "bert"
        values.update({LEGACY_NAMES.get(k, k): v for k, v in record.items()})
        values = {k: v for k, v in values.items() if k in _FIELDS}
        for name in ("train", "init", "output"):
            values.setdefault(name, _PLACEHOLDER)
        return cls(**values)

    def record(self) -> dict[str, Any]:
        """The settings as JSON values, for finetune.json."""
        values = dataclasses.asdict(self)
        if self.labels is not None:
            values["labels"] = list(self.labels)
        return values

    def _require(self, condition: bool, name: str, message: str) -> None:
        """ConfigError "--flag-name message, got value" unless `condition`."""
        if not condition:
            value = getattr(self, name)
            shown = repr(value) if isinstance(value, str) else value
            raise ConfigError(f"--{name.replace('_', '-')} {message}, got {shown}")

    def replace(self, **changes: Any) -> FinetuneSettings:
        """A copy with `changes` (validated again)."""
        return dataclasses.replace(self, **changes)


_FIELDS = frozenset(f.name for f in dataclasses.fields(FinetuneSettings))


def cli_defaults() -> dict[str, Any]:
    """Flag defaults, by argparse destination, from the fields (the one place they are written)."""
    return {
        f.name: f.default
        for f in dataclasses.fields(FinetuneSettings)
        if f.default is not dataclasses.MISSING and f.name not in (*_INVERTED.values(), *_LEARNED)
    }
