"""A pretraining run's settings: one dataclass for the CLI, the library call and pretrain_run.json.

Field names are the command line's flag names (`--train-steps` is `train_steps`, `--eval` is
`eval`), so the CLI builds the settings from its parsed arguments and `pretrain_run.json` records
them under the names a user typed. Every default is written here and only here: `albert-tf
pretrain` takes its flag defaults from the fields (`cli_defaults`). Run directories written
before the fields took the flags' names record `eval_data` and `init_checkpoint`: they resume as
they are, since a resume compares only run_dir.RESUME_KEYS.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from typing import Any

from albert_tf.config import AlbertConfig
from albert_tf.dtypes import DTYPES
from albert_tf.errors import ConfigError
from albert_tf.pretraining.guard import DEFAULT_MAX_ROLLBACKS, DEFAULT_SPIKE_FACTOR

JIT_CHOICES = ("auto", "on", "off")
DTYPE_CHOICES = DTYPES
STRATEGY_CHOICES = ("default", "mirrored", "multi_worker", "tpu")

# Steps per host loop when --steps-per-loop is not given, by the kind of device the replicas run
# on. A TPU or GPU step of a small or medium model takes milliseconds, as long as the host round
# trip (launch, metric read-back, Python bookkeeping) that ends each loop: 1000 on TPU as the
# original TPUEstimator code (iterations_per_loop) and tf-models-official's TPU configs, 100 on
# GPU (round trip below 1% of the loop, progress still every few seconds). On the CPU a step
# costs tens of milliseconds even for the tiny preset, and benchmarks/README.md measures the
# difference between 1, 10 and 100 steps per loop there.
DEFAULT_STEPS_PER_LOOP = {"TPU": 1000, "GPU": 100, "CPU": 10}
# Seconds between SIGTERM and the kill that --preemption-grace assumes: a Cloud TPU VM's ~30 s.
DEFAULT_GRACE_SECONDS = 30.0


@dataclasses.dataclass(frozen=True)
class PretrainSettings:
    """Everything one `pretrain` run needs; see `albert-tf pretrain --help` for each flag."""

    data: str | tuple[str, ...]  # globs of training shards (comma-separated), local or gs://
    config: str | AlbertConfig  # preset name, albert_config.json, checkpoint dir, or a config
    output: str  # the run directory (a checkpoint directory), local or gs://
    train_steps: int
    batch_size: int  # the global batch: all replicas and all accumulated micro-batches
    learning_rate: float = 0.00176
    warmup_steps: int = 0
    eval: str | tuple[str, ...] | None = None  # globs of held-out shards (comma-separated)
    max_eval_examples: int | None = None
    init: str | None = None  # checkpoint dir or shipped model's name to start from
    sp_model: str | None = None
    save_every: int = 1000
    keep: int = 3
    eval_every: int = 1000
    log_every: int = 100
    strategy: str = "default"
    tpu: str | None = None
    dtype: str = "auto"
    seed: int = 12345
    minutes: float | None = None  # wall-time budget; the run stops at a loop boundary within it
    steps_per_loop: int | None = None  # None: DEFAULT_STEPS_PER_LOOP for the device kind
    grad_accum_steps: int = 1  # micro-batches of batch_size / replicas / K per replica step
    jit_compile: str = "auto"  # XLA for the replica step: auto (TPU/GPU on, CPU off), on, off
    deterministic: bool = False  # TF op determinism: bit-exact reruns and resumes
    preemption_grace: float = DEFAULT_GRACE_SECONDS  # SIGTERM to kill: a loop + a save fit in it
    spike_factor: float = DEFAULT_SPIKE_FACTOR  # a loop's mean loss above this x the reference
    max_rollbacks: int = DEFAULT_MAX_ROLLBACKS  # rollbacks before a divergence stops the run
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("data", "eval"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for name in ("output", "init", "sp_model"):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
        if isinstance(self.config, os.PathLike):
            object.__setattr__(self, "config", os.fspath(self.config))
        self.validate()

    def validate(self) -> None:
        """ConfigError naming the flag for any value out of range (nothing is read or written)."""
        positive = ("train_steps", "batch_size", "save_every", "grad_accum_steps")
        for name in positive:
            _require(getattr(self, name) > 0, name, "must be positive")
        # Two at least: a checkpoint torn by a kill during its save falls back to the one before.
        _require(self.keep >= 2, "keep", "must be at least 2 (a torn checkpoint falls back)")
        for name in ("eval_every", "log_every", "steps_per_loop", "max_eval_examples"):
            value = getattr(self, name)
            _require(value is None or value > 0, name, "must be positive")
        _require(
            math.isfinite(self.learning_rate) and self.learning_rate > 0,
            "learning_rate",
            "must be a positive number",
        )
        _require(
            0 <= self.warmup_steps <= self.train_steps,
            "warmup_steps",
            f"must be in [0, --train-steps {self.train_steps}]",
        )
        _require(
            self.minutes is None or (math.isfinite(self.minutes) and self.minutes > 0),
            "minutes",
            "must be a positive number",
        )
        _require(
            math.isfinite(self.preemption_grace) and self.preemption_grace > 0,
            "preemption_grace",
            "must be a positive number of seconds",
        )
        _require(
            not math.isnan(self.spike_factor) and self.spike_factor > 1,
            "spike_factor",
            "must be a number above 1 (inf: no spike check)",
        )
        _require(self.max_rollbacks >= 0, "max_rollbacks", "must be 0 or more")
        check_batch_split(self.batch_size, 1, self.grad_accum_steps)
        for name, choices in (
            ("jit_compile", JIT_CHOICES),
            ("dtype", DTYPE_CHOICES),
            ("strategy", STRATEGY_CHOICES),
        ):
            _require(getattr(self, name) in choices, name, f"must be one of {', '.join(choices)}")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PretrainSettings:
        """The settings from `albert-tf pretrain`'s parsed arguments (flags named like fields)."""
        values = {
            f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.name != "progress"
        }
        return cls(**values, progress=not args.quiet)

    def check_replicas(self, replicas: int) -> None:
        """ConfigError unless the global batch splits into `replicas` x --grad-accum-steps."""
        check_batch_split(self.batch_size, replicas, self.grad_accum_steps)

    def loop_steps(self, device: str) -> int:
        """Steps per host loop: --steps-per-loop, or DEFAULT_STEPS_PER_LOOP for `device`."""
        return self.steps_per_loop or DEFAULT_STEPS_PER_LOOP[device]

    def use_xla(self, device: str) -> bool:
        """--jit-compile resolved for `device` ("TPU", "GPU" or "CPU"): auto is off on the CPU,
        where benchmarks/README.md measures the XLA-compiled ALBERT-base step slower."""
        if self.jit_compile == "auto":
            return device in ("TPU", "GPU")
        return self.jit_compile == "on"

    def record(self) -> dict[str, Any]:
        """The settings as JSON values, for pretrain_run.json."""
        values = dataclasses.asdict(self)
        if isinstance(self.config, AlbertConfig):
            values["config"] = "(an AlbertConfig: see albert_config.json)"
        for name in ("data", "eval"):
            if isinstance(values[name], tuple):
                values[name] = ",".join(values[name])
        return values


def cli_defaults() -> dict[str, Any]:
    """Flag defaults, by argparse destination, from the fields (the one place they are written)."""
    return {
        f.name: f.default
        for f in dataclasses.fields(PretrainSettings)
        if f.default is not dataclasses.MISSING and f.name != "progress"
    }


def check_batch_split(batch_size: int, replicas: int, grad_accum_steps: int = 1) -> None:
    """ConfigError unless --batch-size splits into `replicas` per-replica batches, each of
    `grad_accum_steps` micro-batches: the one check of the batch's divisibility (pretrain,
    check and evaluate call it; the input pipelines rely on it)."""
    if batch_size % replicas:
        raise ConfigError(f"--batch-size {batch_size} is not divisible by the {replicas} replicas")
    if (batch_size // replicas) % grad_accum_steps:
        per_replica = (
            "" if replicas == 1 else f" gives {batch_size // replicas} examples per replica, which"
        )
        raise ConfigError(
            f"--batch-size {batch_size}{per_replica} must be divisible by "
            f"--grad-accum-steps {grad_accum_steps}"
        )


def _require(condition: bool, name: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"--{name.replace('_', '-')} {message}")
