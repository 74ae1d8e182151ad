"""Every setting of a `distill` run, with the command line's names and defaults."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

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
    eval_path: str | None = None  # sentence kind: held-out texts; fine-tuned kind: labeled file
    teacher_cache: str | None = None  # default: OUTPUT/teacher_cache
    max_seq_length: int = 128
    batch_size: int = 64
    epochs: int = 1
    train_steps: int | None = None  # default: --epochs over the texts
    learning_rate: float = 5e-4
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

    def record(self) -> dict:
        """The settings as JSON values (what `distill_run.json` and `distill.json` keep)."""
        values = dataclasses.asdict(self)
        values["unlabeled"] = list(self.unlabeled)
        values.pop("extra")
        return values

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DistillSettings:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra", "output_dir", "eval_path"}
        values = {
            name: getattr(args, name) for name in names if getattr(args, name, None) is not None
        }
        values["unlabeled"] = tuple(args.unlabeled)
        return cls(output_dir=args.output, eval_path=args.eval, **values)
