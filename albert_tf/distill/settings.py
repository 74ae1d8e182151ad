"""Every setting of a `distill` run, with the command line's names and defaults."""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass, field

from albert_tf.finetune.defaults import size_defaults

OPTIMIZERS = ("adamw", "lamb")
# The run directory's parts (albert_tf.distill.trainer writes them, .output reads them).
RUN_DIR, RUN_FILE, HISTORY_FILE = "run", "distill_run.json", "history.jsonl"
RESULT_FILE, LOGS_DIR, CACHE_DIR = "distill.json", "logs", "teacher_cache"
# Settings that decide which batches come next and what the student learns: a run in an output
# directory resumes only with the same values.
RESUME_KEYS = (
    "init",
    "config",
    "batch_size",
    "max_seq_length",
    "seed",
    "train_steps",
    "epochs",
    "mlm_weight",
    "temperature",
    "learning_rate",
)
# The steps a run takes when neither --train-steps nor --epochs is given: one pass over the texts,
# and at least this many. One pass over 1,500 texts at batch 64 is 24 steps: a student of
# albert_en_mini taught a tweet classifier in them scored 0.717 on test against its teacher's
# 0.790 (-7.4 +- 1.4 points, 2 seeds). In 300 steps (about 11 passes over those texts and the
# teacher's 300 labels, at finetune's learning rate) it scored 0.799 (+0.8 +- 0.9 points;
# experiments/task_distillation_defaults.py). Chosen before that run, not tuned on it.
MIN_TRAIN_STEPS = 300
# A sentence-encoder teacher's peak learning rate (a fine-tuned teacher's student takes
# finetune's by its size: albert_tf.finetune.defaults).
SENTENCE_LEARNING_RATE = 5e-4
MAX_SEQ_LENGTH = 128  # a sentence-encoder teacher's student's tokens per text


@dataclass(frozen=True)
class DistillSettings:
    """A distillation run: the teacher, the text, the student, the schedule."""

    teacher: str  # a BERT sentence-encoder directory or a fine-tuned albert-tf directory
    unlabeled: tuple[str, ...]  # files or globs: plain text or TSV/CSV with a text column
    output_dir: str
    init: str  # checkpoint directory, shipped model name, or "random" (with config)
    config: str | None = None  # preset, shipped name or albert_config.json, for --init random
    sp_model: str | None = None  # the student's SentencePiece model (default: the one with init)
    text_column: str | None = None
    # sentence kind: held-out texts; fine-tuned kind: a labeled file (default: the teacher's own
    # --eval file when its finetune.json names one that exists)
    eval_path: str | None = None
    # fine-tuned kind: the teacher's labeled --train file joins the texts, with its labels, when
    # its finetune.json names one that exists (--no-teacher-data: it does not)
    teacher_data: bool = True
    teacher_cache: str | None = None  # default: OUTPUT/teacher_cache
    # None: a fine-tuned teacher's own, else MAX_SEQ_LENGTH; at most the student's positions
    max_seq_length: int | None = None
    batch_size: int = 64
    epochs: int | None = None  # passes over the texts; None: see MIN_TRAIN_STEPS
    train_steps: int | None = None  # default: --epochs over the texts (`total_steps`)
    # None: SENTENCE_LEARNING_RATE, or finetune's by the student's size (`resolved`)
    learning_rate: float | None = None
    warmup_steps: int | None = None  # default: 6% of the training steps
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    mlm_weight: float = 0.5  # 0: no masked-LM loss (and the student reads clean text)
    mlm_probability: float = 0.15
    temperature: float = 2.0  # fine-tuned teacher: soft targets softmax(logits / T)
    teacher_batch_size: int = 64
    eval_batch_size: int = 64
    save_every: int = 500
    log_every: int = 50
    seed: int = 12345
    dtype: str = "float32"
    overwrite: bool = False
    quiet: bool = False
    extra: dict = field(default_factory=dict)

    def replace(self, **changes) -> DistillSettings:
        return dataclasses.replace(self, **changes)

    def resolved(
        self, kind: str, texts: int, config, teacher_length: int | None
    ) -> DistillSettings:
        """These settings with `train_steps`, `learning_rate` and `max_seq_length` filled in for
        `texts` texts, a teacher of `kind` (a fine-tuned one read `teacher_length` tokens) and a
        student of AlbertConfig `config` (a flag always wins)."""
        from albert_tf.distill.teachers import SENTENCE

        rate, length = self.learning_rate, self.max_seq_length
        if rate is None:
            sentence = kind == SENTENCE
            rate = (
                SENTENCE_LEARNING_RATE
                if sentence
                else size_defaults(config.hidden_size).learning_rate
            )
        if length is None:
            length = min(teacher_length or MAX_SEQ_LENGTH, config.max_position_embeddings)
        return self.replace(
            train_steps=self.total_steps(texts), learning_rate=rate, max_seq_length=length
        )

    def total_steps(self, texts: int) -> int:
        """The steps of a run over `texts` texts: --train-steps; else --epochs passes; else one
        pass and at least MIN_TRAIN_STEPS."""
        if self.train_steps is not None:
            return self.train_steps
        per_epoch = math.ceil(texts / self.batch_size)
        if self.epochs is not None:
            return per_epoch * self.epochs
        return max(per_epoch, MIN_TRAIN_STEPS)

    def record(self) -> dict:
        """The settings as JSON values (what `distill_run.json` and `distill.json` keep)."""
        values = dataclasses.asdict(self)
        values["unlabeled"] = list(self.unlabeled)
        values.pop("extra")
        return values

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DistillSettings:
        names = {f.name for f in dataclasses.fields(cls)}
        names -= {"extra", "output_dir", "eval_path", "teacher_data"}
        values = {
            name: getattr(args, name) for name in names if getattr(args, name, None) is not None
        }
        values["unlabeled"] = tuple(args.unlabeled)
        values["teacher_data"] = not getattr(args, "no_teacher_data", False)
        return cls(output_dir=args.output, eval_path=args.eval, **values)
