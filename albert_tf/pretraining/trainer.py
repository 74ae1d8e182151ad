"""`pretrain`: ALBERT's MLM + SOP pretraining as a tf.distribute custom training loop.

The sentence task comes from the training data's metadata (create-pretraining-data
--sentence-task; data without one is SOP): the loss is MLM + SOP, MLM + NSP (BERT's labels, the
same head and loss), or MLM alone ("none": the sentence head, and the pooler that feeds it, are
not trained). Metrics are named by task (sop_loss/sop_accuracy or nsp_loss/nsp_accuracy, none
for "none"); evaluation data is named by its own task.

The output directory is a checkpoint directory (albert_config.json, `ckpt-N` written by a
tf.train.CheckpointManager with root children encoder, mlm, sop, optimizer, step, and spm.model
when known) plus `pretrain_run.json` (the run's PretrainSettings as it started; a resume must
share those that decide which batches come next), `run_log.json` (`albert_tf.run_record`: each
process's steps, dtype and hardware, and every setting a resume changed, at its step) and
TensorBoard logs in logs/train and logs/eval. Running again on the same directory with the same
settings resumes exactly: weights, optimizer slots and step come from the latest checkpoint, the
input pipeline skips the batches already consumed (see data.train_dataset) and dropout masks are
a function of the step (see loop.py), so a killed and resumed run ends with the same weights as
an uninterrupted one (with --deterministic, bit for bit).

Host loops (`--steps-per-loop N`): training runs in calls of up to N steps on the device
(loop.py). A loop never crosses a checkpoint, an evaluation or the end of training: it is cut
short to end on the next multiple of `save_every` or `eval_every`, so those happen at the same
steps whatever N is. Summaries keep their `log_every` steps too: the loop brings back every
step's sums, and the host writes them at each multiple of `log_every`. The `--minutes` budget is
checked after each loop; the run stops (saving a checkpoint) when the next loop, with the last
checkpoint save and evaluation, would not fit in what is left (the first loop of a run with a
budget ends with a checkpoint, so a save is timed before it counts).

The output directory, data globs, init checkpoint, sp_model and config file may be local paths
or tf.io.gfile URLs (gs://bucket/run on Cloud TPU; see run_dir for how a URL run directory is
written without an atomic directory rename).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras
from tqdm.auto import tqdm

from albert_tf import progress
from albert_tf.checkpoint import checkpoint_children, tf_error_reason
from albert_tf.config import SP_MODEL_FILE, AlbertConfig
from albert_tf.dtypes import keras_policy, resolve_dtype
from albert_tf.errors import CheckpointError, ConfigError, DataError
from albert_tf.io_utils import gfile_errors, is_file, is_remote, join, path_str
from albert_tf.preprocess.tokenizer import load_sp_model
from albert_tf.pretrained import resolve
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.guard import (
    GUARD_FILE,
    DivergenceError,
    DivergenceGuard,
    commonest_share,
    stalled,
)
from albert_tf.pretraining.loop import SUM_KEYS, TrainLoop
from albert_tf.pretraining.losses import metrics_from_sums
from albert_tf.pretraining.preemption import StopSignals, lost_worker, restorable_checkpoint
from albert_tf.pretraining.run_dir import (
    check_init_checkpoint,
    load_config,
    prepare_output,
)
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.strategy import device_type, is_chief, make_strategy
from albert_tf.run_record import RunLog


@dataclasses.dataclass
class PretrainResult:
    """What a pretraining call did: steps done, metric history and the final evaluation."""

    output_dir: str
    step: int
    stopped_early: bool  # True when --minutes ran out before train_steps
    dtype: str
    sentence_task: str = "sop"  # the training data's: "sop", "nsp" or "none" (MLM alone)
    train_history: list[dict] = dataclasses.field(default_factory=list)  # one per log point
    eval_history: list[dict] = dataclasses.field(default_factory=list)  # incl. start and end
    seconds: float = 0.0
    steps_per_loop: int = 1
    jit_compile: bool = False
    loop_seconds: list[float] = dataclasses.field(default_factory=list)  # wall time per loop
    stopped_at: float = 0.0  # seconds from the start when training stopped (before the last save)
    last_save_seconds: float = 0.0
    preempted: str | None = None  # the signal that stopped the run (SIGTERM, SIGINT), if any
    rollbacks: list[dict] = dataclasses.field(default_factory=list)  # the guard's, this run's
    # What the whole run ran, every process of it (the chief's run_log.json, RunLog.summary):
    # steps, dtype by step range, hardware, settings changed on a resume. None on other workers.
    ran: dict | None = None
    # Held-out MLM accuracy of always answering the commonest masked piece, and the guard's
    # line when the run's final accuracy is no better (guard.stalled); None without eval data.
    mlm_baseline: float | None = None
    stalled: str | None = None


def check_xla(use_xla: bool, device: str, replicas: int) -> None:
    """ConfigError for XLA where TensorFlow refuses it: MirroredStrategy over CPU devices."""
    if use_xla and device == "CPU" and replicas > 1:
        raise ConfigError(
            "--jit-compile on: TensorFlow does not compile a step mirrored over several CPU "
            "devices with XLA; use --jit-compile off (or one device)"
        )


def pretrain(
    settings: PretrainSettings, strategy: tf.distribute.Strategy | None = None
) -> PretrainResult:
    """Pretrains (or resumes pretraining) an ALBERT on TFRecord shards; see the module docstring.

    `strategy` overrides `settings.strategy` (a strategy built by the caller, e.g. in a
    notebook). The learning rate warms up linearly over `warmup_steps`, then decays linearly to 0
    at `train_steps`. Checkpoints every `save_every` steps (keeping `keep`), at the end, and when
    the `minutes` budget is used up. Evaluates on `eval` at the start of a fresh run, every
    `eval_every` steps, and at the end. Typed errors (DataError, ConfigError, TokenizerError,
    CheckpointError, OutputError) for bad input, raised before anything is written.

    SIGTERM or SIGINT (from the main thread) stops the run at the end of the loop in progress,
    with a checkpoint of that step: the result's `preempted` names the signal. A multi-worker
    run that loses a worker raises preemption.WorkerLost.
    """
    started = time.monotonic()
    if strategy is None:
        strategy = make_strategy(settings.strategy, settings.tpu)
    # After the strategy: MultiWorkerMirroredStrategy's coordination service installs a SIGTERM
    # handler of its own (a preemption notifier), which would otherwise replace ours.
    with StopSignals() as signals:
        return _pretrain(settings, strategy, signals, started)


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """What a run reads, each checked before anything is written."""

    config: AlbertConfig
    spec: data_lib.DataSpec
    eval_spec: data_lib.DataSpec | None
    use_xla: bool
    dtype: str
    init_prefix: str | None  # the --init checkpoint's prefix
    sp_model: str | None  # --sp-model, else the --init checkpoint's


def _check_inputs(settings: PretrainSettings, strategy: tf.distribute.Strategy) -> _Inputs:
    """The config, the data, the strategy's fit, the SentencePiece model and the init
    checkpoint, checked (typed errors) before anything is written."""
    config = load_config(settings.config)
    spec = data_lib.inspect_data(settings.data, config)
    eval_spec = data_lib.inspect_data(settings.eval, config) if settings.eval else None
    device = device_type(strategy)
    replicas = strategy.num_replicas_in_sync
    settings.check_replicas(replicas)
    use_xla = settings.use_xla(device)
    check_xla(use_xla, device, replicas)
    sp_model = path_str(settings.sp_model) if settings.sp_model else None
    if sp_model:
        load_sp_model(sp_model, config.vocab_size)
    init_prefix, sp_model = _init_checkpoint(settings.init, config, sp_model)
    dtype = resolve_dtype(settings.dtype, device)
    return _Inputs(config, spec, eval_spec, use_xla, dtype, init_prefix, sp_model)


def _pretrain(
    settings: PretrainSettings,
    strategy: tf.distribute.Strategy,
    signals: StopSignals,
    started: float,
) -> PretrainResult:
    inputs = _check_inputs(settings, strategy)
    chief = is_chief(strategy)
    output = path_str(settings.output)
    resuming = False
    run_log = None
    if chief:
        record = settings.record() | {
            "max_seq_length": inputs.spec.max_seq_length,
            "max_predictions_per_seq": inputs.spec.max_predictions_per_seq,
            "sentence_task": inputs.spec.sentence_task,
        }
        resuming = prepare_output(
            output, inputs.config, record, inputs.sp_model, settings.overwrite
        )
        run_log = (RunLog(output), record)
        checkpoint_dir = output
    else:
        # Non-chief workers must save too (collectives), but to a local scratch directory.
        checkpoint_dir = tempfile.mkdtemp(prefix="albert-tf-worker-")
    if settings.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(settings.seed)
    try:
        with keras_policy(inputs.dtype):
            result = _run(settings, strategy, inputs, checkpoint_dir, run_log, signals, started)
    except BaseException:
        # A new run that fails before its first checkpoint leaves no directory behind.
        fresh_local = chief and not resuming and not is_remote(output)
        if fresh_local and tf.train.latest_checkpoint(output) is None:
            shutil.rmtree(output, ignore_errors=True)
        raise
    finally:
        if not chief:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
    result.dtype = inputs.dtype
    result.jit_compile = inputs.use_xla
    result.seconds = time.monotonic() - started
    return result


def _run(
    settings: PretrainSettings,
    strategy: tf.distribute.Strategy,
    inputs: _Inputs,
    checkpoint_dir: str,
    run_log: tuple[RunLog, dict] | None,
    signals: StopSignals,
    started: float,
) -> PretrainResult:
    """Builds the loop, restores the latest checkpoint (or the init checkpoint) and trains
    (inside the run's dtype policy); a lost worker raises preemption.WorkerLost. `run_log`: the
    chief's run log and the settings this process runs with (None on other workers)."""
    output = path_str(settings.output)
    chief = run_log is not None

    def log(message: str) -> None:
        if chief and settings.progress:
            tqdm.write(message)

    def warn(message: str) -> None:
        if chief:
            tqdm.write(f"warning: {message}", file=sys.stderr)

    loop = _train_loop(settings, strategy, inputs.config, inputs.spec, inputs.dtype, inputs.use_xla)
    # Files are read whole first: a damaged one is named as such, not reported as a model
    # mismatch, and a torn newest checkpoint gives way to the one before (and leaves the
    # checkpoint list before the manager reads it).
    latest = restorable_checkpoint(output, warn, chief)
    manager = tf.train.CheckpointManager(loop.checkpoint, checkpoint_dir, max_to_keep=settings.keep)
    if latest:
        loop.checkpoint.restore(latest).assert_existing_objects_matched()
        log(f"resuming from {latest} (step {int(loop.step.numpy())})")
    elif inputs.init_prefix:
        _restore_init(loop, inputs.init_prefix, log)
        log(f"initialized from {inputs.init_prefix}")
    ran = None
    if run_log is not None:
        ran, record = run_log
        step = int(loop.step.numpy())
        for change in ran.begin(step, record, inputs.dtype):
            log(f"{change['key']} changed at step {step}: {change['old']!r} -> {change['new']!r}")
    run = _HostLoop(settings, loop, manager, inputs.spec, inputs.eval_spec, output, ran, log)
    try:
        return run.train(fresh=latest is None, started=started, signals=signals)
    except tf.errors.OpError as e:
        lost = None
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            lost = lost_worker(e, run.step, tf.train.latest_checkpoint(output))
        if lost is None:
            raise
        raise lost from None


def _init_checkpoint(
    init: str | None, config, sp_model: str | None
) -> tuple[str | None, str | None]:
    """(the init checkpoint's prefix, the SentencePiece model) for --init `init` (a
    directory or a shipped model's name), which lends its spm.model when none is given."""
    if not init:
        return None, sp_model
    init = path_str(resolve(init))  # a shipped model's name: its checkpoint directory
    prefix = check_init_checkpoint(init, config)
    if not sp_model:
        with gfile_errors(CheckpointError, f"cannot read init checkpoint {init}"):
            if is_file(join(init, SP_MODEL_FILE)):
                sp_model = join(init, SP_MODEL_FILE)
    return prefix, sp_model


def _train_loop(settings, strategy, config, spec, dtype: str, use_xla: bool) -> TrainLoop:
    """The TrainLoop of a run (inside its dtype policy)."""
    return TrainLoop(
        strategy,
        config,
        max_seq_length=spec.max_seq_length,
        max_predictions_per_seq=spec.max_predictions_per_seq,
        dtype=dtype,
        optimizer_args=(settings.learning_rate, settings.train_steps, settings.warmup_steps),
        steps_per_loop=settings.loop_steps(device_type(strategy)),
        grad_accum_steps=settings.grad_accum_steps,
        jit_compile=use_xla,
        seed=settings.seed,
        sentence_task=spec.sentence_task,
    )


def _restore_init(loop: TrainLoop, prefix: str, log) -> None:
    names = checkpoint_children(prefix)
    for child in ("mlm", "sop"):
        if child not in names:
            log(f"init checkpoint has no '{child}' head: it starts from random weights")
    restore_weights(loop.model, prefix, names, "the model")


def restore_weights(model, prefix: str, names: set[str], expected: str) -> None:
    """Restores `model`'s encoder, and each head `names` (the checkpoint's children) has, from
    the checkpoint at `prefix`; CheckpointError if it does not match (`expected` says what)."""
    objects = {"encoder": model.encoder}
    objects.update(
        {n: h for n, h in (("mlm", model.mlm_head), ("sop", model.sop_head)) if n in names}
    )
    try:
        status = tf.train.Checkpoint(**objects).read(prefix).expect_partial()
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        raise CheckpointError(
            f"checkpoint {prefix} does not match {expected}: {tf_error_reason(e)}"
        ) from None


def distribute(strategy: tf.distribute.Strategy, make_dataset) -> tf.distribute.DistributedDataset:
    """`make_dataset(num_replicas=, num_pipelines=, pipeline_id=)` on every input pipeline."""

    def fn(ctx: tf.distribute.InputContext):
        return make_dataset(
            num_replicas=ctx.num_replicas_in_sync,
            num_pipelines=ctx.num_input_pipelines,
            pipeline_id=ctx.input_pipeline_id,
        )

    return strategy.distribute_datasets_from_function(fn)


@contextlib.contextmanager
def _shard_errors(files: tuple[str, ...], kind: str, manager) -> Iterator[None]:
    """Turns TF's DataLossError from reading `files` (a record whose length or checksum is
    wrong) into a DataError naming the shard and the last checkpoint, which the failed loop
    did not touch."""
    try:
        yield
    except tf.errors.DataLossError as e:
        shard, reason = data_lib.find_corrupt_shard(files) or (", ".join(files), tf_error_reason(e))
        latest = manager.latest_checkpoint
        kept = f"the last checkpoint {latest} is intact" if latest else "no checkpoint was written"
        raise DataError(f"{kind} shard {shard} is corrupt ({reason}); stopped: {kept}") from None


def _write_scalars(writer, metrics: dict[str, float], step: int) -> None:
    with writer.as_default():
        for name, value in metrics.items():
            tf.summary.scalar(name, value, step=step)
        writer.flush()


class _Interval:
    """The per-step sums (SUM_KEYS) of the steps since the last log point."""

    def __init__(self) -> None:
        self.totals = np.zeros(len(SUM_KEYS))
        self.steps = 0
        self.seconds = 0.0

    def add(self, row: np.ndarray, seconds: float) -> None:
        self.totals += row
        self.steps += 1
        self.seconds += seconds


def _next_multiple(step: int, every: int) -> int:
    return (step // every + 1) * every


class _HostLoop:
    """The host side of a run: loops, summaries, checkpoints, evaluation and the time budget."""

    def __init__(self, settings, loop, manager, spec, eval_spec, output, run_log, log):
        chief = run_log is not None
        self.run_log = run_log
        self.taken = 0  # steps this process ran, those a rollback repeats included
        self.settings = settings
        self.loop = loop
        self.manager = manager
        self.spec = spec
        self.log = log
        self.result = PretrainResult(output, 0, False, loop.dtype, spec.sentence_task)
        self.eval_task = eval_spec.sentence_task if eval_spec is not None else None
        self.result.steps_per_loop = loop.steps_per_loop
        noop = tf.summary.create_noop_writer()
        self.train_writer = (
            tf.summary.create_file_writer(join(output, "logs", "train")) if chief else noop
        )
        self.eval_writer = (
            tf.summary.create_file_writer(join(output, "logs", "eval")) if chief else noop
        )
        self.show_progress = chief and settings.progress
        self.chief = chief
        self.eval_set = None
        self.eval_spec = eval_spec
        self.eval_files = eval_spec.files if eval_spec is not None else ()
        if eval_spec is not None:
            self.eval_set = distribute(
                loop.strategy,
                lambda **kw: data_lib.eval_dataset(
                    eval_spec,
                    settings.batch_size,
                    max_examples=settings.max_eval_examples,
                    **kw,
                ),
            )
        self.eval_seconds = 0.0
        self.save_seconds = 0.0
        self.saved_step: int | None = None
        self.evaluated_step: int | None = None
        self.step = int(loop.step.numpy())  # the step reached, for errors raised mid-run
        record = Path(output) / GUARD_FILE if chief and not is_remote(output) else None
        self.guard = DivergenceGuard(settings.spike_factor, settings.max_rollbacks, record)
        self.guard.load(self.step)
        loop.lr_scale.assign(self.guard.lr_scale)
        # The chief's figures, agreed by all workers after each loop (they size the next loop).
        self.step_seconds = 0.0
        self.agreed_save_seconds = 0.0
        self.grace_noted = False

    def evaluate(self, at_step: int) -> None:
        if self.eval_set is None:
            return
        self.evaluated_step = at_step
        begin = time.monotonic()
        with _shard_errors(self.eval_files, "held-out", self.manager):
            metrics = metrics_from_sums(self.loop.evaluate_sums(self.eval_set), self.eval_task)
        self.eval_seconds = time.monotonic() - begin
        _write_scalars(self.eval_writer, metrics, at_step)
        self.result.eval_history.append({"step": at_step, **metrics})
        accuracies = " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if k.endswith("accuracy"))
        self.log(f"eval step {at_step}: {accuracies} loss={metrics['loss']:.4f}")

    def check_stall(self, final: dict) -> None:
        """Sets the result's MLM baseline and, when the final accuracy is no better, its
        stall line (guard.stalled)."""
        batches = data_lib.eval_dataset(
            self.eval_spec, self.settings.batch_size, max_examples=self.settings.max_eval_examples
        )
        with _shard_errors(self.eval_files, "held-out", self.manager):
            self.result.mlm_baseline = commonest_share(batches)
        self.result.stalled = stalled(final["mlm_accuracy"], self.result.mlm_baseline)

    def save(self, step: int) -> None:
        begin = time.monotonic()
        self.manager.save(checkpoint_number=step)
        self.save_seconds = time.monotonic() - begin
        self.saved_step = step
        if self.run_log is not None:
            self.run_log.reached(step, self.taken)

    def loop_length(self, step: int) -> int:
        """Steps of the next loop: N, cut short to end on a checkpoint, evaluation or the end,
        and to fit, with a checkpoint save, in the preemption grace (by the chief's timings)."""
        s = self.settings
        ends = [s.train_steps, _next_multiple(step, s.save_every)]
        if self.eval_set is not None:
            ends.append(_next_multiple(step, s.eval_every))
        steps = min(self.loop.steps_per_loop, min(ends) - step)
        if self.step_seconds > 0:
            budget = s.preemption_grace - self.agreed_save_seconds
            fitting = max(1, int(budget / self.step_seconds))
            if fitting < steps and not self.grace_noted:
                self.grace_noted = True
                self.log(
                    f"loops cut to {fitting} steps: a loop and a checkpoint save must fit in "
                    f"--preemption-grace {s.preemption_grace:g} s"
                )
            steps = min(steps, fitting)
        return steps

    def stop_reason(
        self, deadline: float | None, step: int, seconds_per_step: float, signals: StopSignals
    ) -> str | None:
        """Why the run stops after `step`, agreed by all workers: "time" when the next loop, a
        checkpoint and an evaluation would overrun the deadline, the signal's name when any
        worker got SIGTERM or SIGINT, else None. Also agrees the timings loop_length uses."""
        late = False
        if deadline is not None:
            needed = seconds_per_step * self.loop_length(step) + self.save_seconds
            late = time.monotonic() + needed + self.eval_seconds > deadline
        (late, signalled), (self.step_seconds, self.agreed_save_seconds) = self.loop.agree(
            [late, signals.requested is not None], [seconds_per_step, self.save_seconds]
        )
        if signalled:
            # A worker that got no signal itself stops for the one that did.
            return signals.requested or "another worker's signal"
        return "time" if late else None

    def write_log(self, step: int, interval: _Interval) -> None:
        """Summaries (and the bar's figures) of the steps in `interval`, which ends at `step`."""
        steps, seconds = interval.steps, interval.seconds
        metrics = metrics_from_sums(
            dict(zip(SUM_KEYS, interval.totals.tolist(), strict=True)), self.result.sentence_task
        )
        metrics["learning_rate"] = self.loop.learning_rate(step - 1)
        seconds = max(seconds, 1e-9)
        metrics["examples_per_second"] = steps * self.settings.batch_size / seconds
        metrics["seconds_per_step"] = seconds / steps
        _write_scalars(self.train_writer, metrics, step)
        self.result.train_history.append({"step": step, **metrics})
        self.bar.set_postfix(
            loss=f"{metrics['loss']:.3f}", ex_s=f"{metrics['examples_per_second']:.1f}"
        )
        if self.bar.disable:  # no bar drawn (a log file, a pipe): a line per summary step
            self.log(
                f"step {step}/{self.settings.train_steps}: loss {metrics['loss']:.4f}, "
                f"{metrics['examples_per_second']:.1f} examples/s"
            )

    def check_loop(self, step: int, rows: np.ndarray) -> bool:
        """The divergence guard on the loop that ended at `step`: True when it was bad and the
        run rolled back to its last checkpoint (DivergenceError when rollbacks are used up)."""
        task = self.result.sentence_task
        losses = [
            metrics_from_sums(dict(zip(SUM_KEYS, row.tolist(), strict=True)), task)["loss"]
            for row in rows
        ]
        reason = self.guard.check_losses(losses)
        if reason is None and not bool(self.loop.weights_finite()):
            reason = "non-finite weights"
        if reason is None:
            return False
        latest = self.manager.latest_checkpoint
        if latest is None:
            raise DivergenceError(
                f"pretraining diverged at step {step} ({reason}) before its first checkpoint: "
                "lower --learning-rate or add --warmup-steps"
            )
        self.loop.checkpoint.restore(latest).assert_existing_objects_matched()
        restored = int(self.loop.step.numpy())
        mean = float(np.mean(losses))
        rollback = self.guard.roll_back(step, mean, restored, reason)
        self.loop.lr_scale.assign(self.guard.lr_scale)
        self.result.rollbacks.append(dataclasses.asdict(rollback))
        self.log(
            f"step {step}: {reason}; rolled back to step {restored}, skipping "
            f"{rollback.skipped_batches} batches, learning rate x{rollback.lr_scale:g}"
        )
        return True

    def train(self, *, fresh: bool, started: float, signals: StopSignals) -> PretrainResult:
        """Host loops from the restored step to `train_steps`, a time stop or a signal."""
        s = self.settings
        if fresh and self.step == 0:
            self.evaluate(0)
        skip = self.step + self.guard.skipped_batches
        train_set = distribute(
            self.loop.strategy,
            lambda **kw: data_lib.train_dataset(
                self.spec, s.batch_size, s.seed, skip_steps=skip, **kw
            ),
        )
        iterator = iter(train_set)
        self.bar = progress.bar(
            total=s.train_steps,
            initial=self.step,
            enabled=self.show_progress,
            unit="step",
            smoothing=0,
        )
        deadline = started + s.minutes * 60 if s.minutes else None
        self.interval = _Interval()
        while self.step < s.train_steps:
            if self.run_loop(iterator, deadline, started, signals):
                break
        self.bar.close()
        return self.finish()

    def run_loop(
        self, iterator, deadline: float | None, started: float, signals: StopSignals
    ) -> bool:
        """One host loop from `self.step`, then the guard, summaries, checkpoint, evaluation
        and stop checks that follow it; True when the run stops here."""
        s, loop, result = self.settings, self.loop, self.result
        step = self.step
        steps = self.loop_length(step)
        begin = time.monotonic()
        with _shard_errors(self.spec.files, "training", self.manager):
            rows = loop.run(iterator, steps)
        ended = time.monotonic()
        seconds = ended - begin
        self.taken += steps
        result.loop_seconds.append(seconds)
        if self.check_loop(step + steps, rows):
            self.step = int(loop.step.numpy())
            self.bar.n = self.step
            self.bar.refresh()
            self.interval = _Interval()
            return False
        for i, row in enumerate(rows):
            at = step + i + 1
            self.interval.add(row, seconds / steps)
            if at % s.log_every == 0 or at == s.train_steps:
                self.write_log(at, self.interval)
                self.interval = _Interval()
        self.step = step = step + steps
        self.bar.update(steps)
        # Under a time budget, the first loop also ends with a checkpoint: it times a save,
        # which the budget must leave room for at the end.
        first_under_budget = deadline is not None and len(result.loop_seconds) == 1
        if step % s.save_every == 0 or step == s.train_steps or first_under_budget:
            self.save(step)
        if self.eval_set is not None and step % s.eval_every == 0 and step < s.train_steps:
            self.evaluate(step)
        if step == s.train_steps:
            result.stopped_at = ended - started
            return True
        stop = self.stop_reason(deadline, step, seconds / steps, signals)
        if stop is None:
            return False
        result.stopped_at = ended - started
        self.stop(stop)
        return True

    def stop(self, reason: str) -> None:
        """Ends a run stopped before `train_steps` (`reason`: "time" or a signal's name) at
        `self.step`: its last summaries and a checkpoint."""
        step = self.step
        if self.interval.steps:  # the steps since the last log point
            self.write_log(step, self.interval)
        if self.saved_step != step:
            self.save(step)
        if reason == "time":
            self.result.stopped_early = True
            self.log(
                f"stopping after {self.settings.minutes} minutes at step {step} (checkpoint saved)"
            )
        else:
            self.result.preempted = reason

    def finish(self) -> PretrainResult:
        """The final evaluation and stall check of a run that ended at `self.step`."""
        result, step = self.result, self.step
        # A preempted run leaves its grace to the exit; a stop at an --eval-every step has
        # evaluated already.
        if result.preempted is None and self.evaluated_step != step:
            self.evaluate(step)
        # Only a run that reached train_steps is judged (a --minutes stop may be half-way), and
        # only on the chief, which prints it.
        if self.chief and step == self.settings.train_steps and result.eval_history:
            self.check_stall(result.eval_history[-1])
        result.step = step
        result.last_save_seconds = self.save_seconds
        if self.run_log is not None:
            ended = result.preempted or ("time" if result.stopped_early else "finished")
            self.run_log.reached(step, self.taken, ended)
            result.ran = self.run_log.summary()
        return result
