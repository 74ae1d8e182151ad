"""`albert-tf check`: the first command to run on a new TPU, GPU or CPU machine.

It runs the real pretraining step (loop.TrainLoop, the code `pretrain` runs) on synthetic batches,
stage by stage, and says which stage failed and why:

1. strategy: builds the tf.distribute strategy and names the device kind and replica count;
2. dtype: resolves --dtype for that device;
3. build: creates the model and LAMB under the strategy's scope;
4. compile: the first loop (tracing, and XLA compilation with --jit-compile);
5. train: more loops; examples/s, seconds per step, and the loss must stay finite;
6. host: the host round trip that ends each loop (measured as loops of 1 step against one loop
   of N), in ms per loop and per step at the chosen steps per loop;
7. checkpoint: saves with tf.train.CheckpointManager, trains on, restores, and checks that every
   variable is back to its saved value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.config import resolve_config
from albert_tf.dtypes import keras_policy, resolve_dtype
from albert_tf.errors import AlbertError, ConfigError
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.loop import SUM_KEYS, TrainLoop
from albert_tf.pretraining.losses import metrics_from_sums
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.strategy import device_type, make_strategy
from albert_tf.pretraining.trainer import check_xla, distribute


@dataclasses.dataclass
class CheckSettings:
    """What `albert-tf check` runs; see its --help."""

    config: str = "base"
    strategy: str = "default"
    tpu: str | None = None
    dtype: str = "auto"
    batch_size: int = 32
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    steps_per_loop: int | None = None
    grad_accum_steps: int = 1
    jit_compile: str = "auto"
    loops: int = 3
    output: str | None = None  # checkpoint directory; a temporary one when None


@dataclasses.dataclass
class Stage:
    name: str
    ok: bool
    detail: str


@dataclasses.dataclass
class CheckReport:
    stages: list[Stage] = dataclasses.field(default_factory=list)
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.stages) and all(s.ok for s in self.stages)


class _StageFailed(Exception):
    pass


@contextlib.contextmanager
def _stage(report: CheckReport, name: str, echo: Callable[[str], None]) -> Iterator[list[str]]:
    """Runs one stage; records ok with the detail the block appends, or the failure's cause."""
    detail: list[str] = []
    try:
        yield detail
    except AlbertError:  # bad settings: the CLI's one line and exit code 2
        raise
    except Exception as e:  # the point of the command: say what failed, then stop
        lines = str(e).strip().splitlines() or [""]
        where = traceback.extract_tb(e.__traceback__)[-1]
        message = f"{type(e).__name__}: {lines[0][:300]} (at {where.filename}:{where.lineno})"
        report.stages.append(Stage(name, False, message))
        echo(f"  {name:<11} FAILED  {message}")
        raise _StageFailed from e
    report.stages.append(Stage(name, True, " ".join(detail)))
    echo(f"  {name:<11} ok      {' '.join(detail)}")


def run_check(settings: CheckSettings, echo: Callable[[str], None] = print) -> CheckReport:
    """Runs the stages in order, stopping at the first failure; see the module docstring.

    Bad settings (unknown preset, sizes that do not divide) raise typed errors before any stage.
    """
    config = resolve_config(settings.config)
    if settings.seq_length > config.max_position_embeddings:
        raise ConfigError(
            f"--max-seq-length {settings.seq_length} exceeds the config's "
            f"{config.max_position_embeddings} position embeddings"
        )
    # Validates batch, accumulation, steps per loop, dtype, strategy and jit names like pretrain.
    as_pretrain = PretrainSettings(
        data="(synthetic)",
        config=config,
        output=settings.output or "(temporary)",
        train_steps=1,
        batch_size=settings.batch_size,
        steps_per_loop=settings.steps_per_loop,
        grad_accum_steps=settings.grad_accum_steps,
        jit_compile=settings.jit_compile,
        dtype=settings.dtype,
        strategy=settings.strategy,
        tpu=settings.tpu,
    )
    report = CheckReport()
    with contextlib.suppress(_StageFailed):
        _run_stages(settings, as_pretrain, config, report, echo)
    echo("all checks passed" if report.ok else "check FAILED (see the stage above)")
    return report


def _run_stages(settings, as_pretrain, config, report, echo) -> None:
    """Every stage in order, each reported by `_stage` (the first failure stops the check)."""
    strategy, steps, use_xla, dtype = _setup_stages(settings, as_pretrain, report, echo)
    with keras_policy(dtype):
        loop = _build_stage(settings, config, strategy, (steps, use_xla, dtype), report, echo)
        dataset = distribute(
            strategy,
            lambda **kw: data_lib.synthetic_dataset(
                config.vocab_size,
                settings.seq_length,
                settings.max_predictions_per_seq,
                settings.batch_size,
                **kw,
            ),
        )
        _loop_stages(settings, loop, iter(dataset), (steps, use_xla), report, echo)


def _setup_stages(settings, as_pretrain, report, echo) -> tuple[Any, int, bool, str]:
    """The strategy and dtype stages: (strategy, steps per loop, XLA on, dtype)."""
    with _stage(report, "strategy", echo) as detail:
        strategy = make_strategy(settings.strategy, settings.tpu)
        device = device_type(strategy)
        replicas = strategy.num_replicas_in_sync
        as_pretrain.check_replicas(replicas)
        use_xla = as_pretrain.use_xla(device)
        check_xla(use_xla, device, replicas)
        steps = as_pretrain.loop_steps(device)
        detail.append(f"{settings.strategy}: {replicas} replica(s) on {device}")
        report.figures.update(device=device, replicas=replicas, steps_per_loop=steps)
    with _stage(report, "dtype", echo) as detail:
        dtype = resolve_dtype(settings.dtype, device)
        detail.append(f"{dtype} (--dtype {settings.dtype})")
        report.figures["dtype"] = dtype
    return strategy, steps, use_xla, dtype


def _build_stage(settings, config, strategy, plan: tuple[int, bool, str], report, echo):
    """The build stage: the TrainLoop for `plan` (steps per loop, XLA on, dtype)."""
    steps, use_xla, dtype = plan
    with _stage(report, "build", echo) as detail:
        begin = time.monotonic()
        loop = TrainLoop(
            strategy,
            config,
            max_seq_length=settings.seq_length,
            max_predictions_per_seq=settings.max_predictions_per_seq,
            dtype=dtype,
            optimizer_args=(1e-4, 10**6, 0),
            steps_per_loop=steps,
            grad_accum_steps=settings.grad_accum_steps,
            jit_compile=use_xla,
        )
        count = sum(int(np.prod(v.shape)) for v in loop.model.trainable_variables)
        detail.append(
            f"{settings.config}: {count:,} trainable parameters in {time.monotonic() - begin:.1f} s"
        )
    return loop


def _loop_stages(settings, loop, iterator, plan: tuple[int, bool], report, echo) -> None:
    """The compile, train, host and checkpoint stages on `loop` (`plan`: steps per loop, XLA
    on)."""
    steps, use_xla = plan
    with _stage(report, "compile", echo) as detail:
        begin = time.monotonic()
        _finite_loss(loop.run(iterator, steps))
        seconds = time.monotonic() - begin
        detail.append(
            f"first loop of {steps} step(s) in {seconds:.1f} s (XLA {'on' if use_xla else 'off'})"
        )
        report.figures["first_loop_seconds"] = seconds
    with _stage(report, "train", echo) as detail:
        begin = time.monotonic()
        losses = [_finite_loss(loop.run(iterator, steps)) for _ in range(settings.loops)]
        seconds = (time.monotonic() - begin) / (settings.loops * steps)
        rate = settings.batch_size / seconds
        detail.append(
            f"{settings.loops} loop(s) x {steps} step(s): {rate:.2f} examples/s, "
            f"{seconds * 1000:.1f} ms/step, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
        )
        report.figures.update(examples_per_second=rate, seconds_per_step=seconds)
    with _stage(report, "host", echo) as detail:
        round_trip = _round_trip_seconds(loop, iterator, steps, seconds)
        detail.append(
            f"round trip {round_trip * 1000:.2f} ms per loop = "
            f"{round_trip / steps * 1000:.3f} ms per step at {steps} step(s) per loop"
        )
        report.figures["host_seconds_per_step"] = round_trip / steps
    with _stage(report, "checkpoint", echo) as detail:
        directory = settings.output or tempfile.mkdtemp(prefix="albert-tf-check-")
        try:
            detail.append(_checkpoint_round_trip(loop, iterator, directory))
        finally:
            if settings.output is None:
                shutil.rmtree(directory, ignore_errors=True)


def _finite_loss(rows: np.ndarray) -> float:
    """The loop's training loss from its per-step sums; FloatingPointError unless finite."""
    loss = metrics_from_sums(dict(zip(SUM_KEYS, rows.sum(axis=0).tolist(), strict=True)))["loss"]
    if not math.isfinite(loss):
        raise FloatingPointError(f"the training loss is {loss}")
    return loss


def _round_trip_seconds(loop, iterator, steps: int, seconds_per_step: float) -> float:
    """Host time one loop adds: N loops of one step minus one loop of N steps, per extra loop
    (the median of three such pairs; with N = 1, one step's wall time minus the loops' rate)."""

    def timed(count: int, size: int) -> float:
        begin = time.monotonic()
        for _ in range(count):
            loop.run(iterator, size)
        return time.monotonic() - begin

    if steps == 1:
        samples = [timed(1, 1) - seconds_per_step for _ in range(3)]
    else:
        samples = [(timed(steps, 1) - timed(1, steps)) / (steps - 1) for _ in range(3)]
    return max(float(np.median(samples)), 0.0)


def _checkpoint_round_trip(loop, iterator, directory: str) -> str:
    """Saves, trains one step (the weights must move), restores: every weight as saved."""
    manager = tf.train.CheckpointManager(loop.checkpoint, directory, max_to_keep=1)
    begin = time.monotonic()
    path = manager.save(checkpoint_number=int(loop.step.numpy()))
    saved_seconds = time.monotonic() - begin
    weights = [v.numpy() for v in loop.model.variables]
    loop.run(iterator, 1)
    moved = any(
        not np.array_equal(w, v.numpy()) for w, v in zip(weights, loop.model.variables, strict=True)
    )
    if not moved:
        raise AssertionError("one more step left every weight unchanged")
    loop.checkpoint.restore(path).assert_existing_objects_matched()
    for saved, variable in zip(weights, loop.model.variables, strict=True):
        if not np.array_equal(saved, variable.numpy()):
            raise AssertionError(f"{variable.name} differs from its saved value after restore")
    return f"saved {path} in {saved_seconds:.2f} s, restored every weight exactly"
