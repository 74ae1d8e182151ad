"""`pretrain`: ALBERT's MLM + SOP pretraining as a tf.distribute custom training loop.

The output directory is a checkpoint directory (albert_config.json, `ckpt-N` written by a
tf.train.CheckpointManager with root children encoder, mlm, sop, optimizer, step, and spm.model
when known) plus `pretrain_run.json` (the settings a resume must share) and TensorBoard logs in
logs/train and logs/eval. Running again on the same directory with the same config resumes
exactly: weights, optimizer slots and step come from the latest checkpoint, and the input
pipeline skips the batches already consumed (see data.train_dataset).

The output directory, data globs, init checkpoint, sp_model and config file may be local paths
or tf.io.gfile URLs (gs://bucket/run on Cloud TPU; see run_dir for how a URL run directory is
written without an atomic directory rename).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time

import tensorflow as tf
import tf_keras as keras
from tqdm.auto import tqdm

from albert_tf.config import AlbertConfig
from albert_tf.dtypes import keras_policy, resolve_dtype
from albert_tf.errors import CheckpointError, ConfigError
from albert_tf.io_utils import gfile_errors, is_file, join, path_str
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.losses import metrics_from_sums, pretraining_sums, replica_loss
from albert_tf.pretraining.optimizer import build_optimizer
from albert_tf.pretraining.run_dir import (
    check_init_checkpoint,
    check_sp_model,
    checkpoint_roots,
    load_config,
    prepare_output,
    run_settings,
)
from albert_tf.pretraining.strategy import device_type, is_chief, make_strategy


@dataclasses.dataclass
class PretrainResult:
    """What a pretraining call did: steps done, metric history and the final evaluation."""

    output_dir: str
    step: int
    stopped_early: bool  # True when --minutes ran out before train_steps
    dtype: str
    train_history: list[dict] = dataclasses.field(default_factory=list)  # one per log point
    eval_history: list[dict] = dataclasses.field(default_factory=list)  # incl. start and end
    seconds: float = 0.0


# === Training ===


class _Loop:
    """The model, optimizer and compiled step functions under one strategy."""

    def __init__(self, strategy, config, spec, dtype, optimizer_args):
        from albert_tf.models import AlbertPretrainingModel

        self.strategy = strategy
        self.dtype = dtype
        with strategy.scope():
            self.model = AlbertPretrainingModel(config)
            self.model(_dummy_inputs(spec), training=False)
            self.optimizer = build_optimizer(*optimizer_args, dtype=dtype)
            self.step = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                name="step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
        self.checkpoint = tf.train.Checkpoint(
            encoder=self.model.encoder,
            mlm=self.model.mlm_head,
            sop=self.model.sop_head,
            optimizer=self.optimizer,
            step=self.step,
        )

    def _replica_train_step(self, batch):
        ctx = tf.distribute.get_replica_context()
        global_weight = ctx.all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        global_count = ctx.all_reduce("sum", tf.reduce_sum(batch["example_weight"]))
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(_model_inputs(batch), training=True)
            sums = pretraining_sums(outputs["mlm_logits"], outputs["sop_logits"], batch)
            loss = replica_loss(sums, global_weight, global_count)["loss"]
            if self.dtype == "float16":
                loss = self.optimizer.get_scaled_loss(loss)
        grads = tape.gradient(loss, variables)
        if self.dtype == "float16":
            grads = self.optimizer.get_unscaled_gradients(grads)
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        return sums

    def _replica_eval_step(self, batch):
        outputs = self.model(_model_inputs(batch), training=False)
        return pretraining_sums(outputs["mlm_logits"], outputs["sop_logits"], batch)

    def _reduce(self, per_replica):
        return {
            k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
            for k, v in per_replica.items()
        }

    @tf.function
    def train_step(self, iterator):
        sums = self._reduce(self.strategy.run(self._replica_train_step, args=(next(iterator),)))
        self.step.assign_add(1)
        return sums

    @tf.function
    def eval_step(self, batch):
        return self._reduce(self.strategy.run(self._replica_eval_step, args=(batch,)))

    @tf.function
    def any_worker(self, flag):
        """True if `flag` is true on any worker (so all workers stop together)."""
        value = self.strategy.run(lambda: tf.cast(flag, tf.float32))
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) > 0

    def learning_rate(self, step: int) -> float:
        inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        return float(inner.learning_rate(step))

    def evaluate(self, dataset) -> dict[str, float]:
        totals: dict[str, float] = {}
        for batch in dataset:
            for k, v in self.eval_step(batch).items():
                totals[k] = totals.get(k, 0.0) + float(v)
        return metrics_from_sums(totals) if totals else {}


def _model_inputs(batch):
    return {k: batch[k] for k in data_lib.MODEL_INPUTS}


def _dummy_inputs(spec: data_lib.DataSpec) -> dict[str, tf.Tensor]:
    seq = tf.zeros([1, spec.max_seq_length], tf.int32)
    return {
        "input_word_ids": seq,
        "input_mask": tf.ones_like(seq),
        "input_type_ids": seq,
        "masked_lm_positions": tf.zeros([1, spec.max_predictions_per_seq], tf.int32),
    }


def _restore_init(loop: _Loop, prefix: str, log) -> None:
    names = checkpoint_roots(prefix)
    objects = {"encoder": loop.model.encoder}
    for child, head in (("mlm", loop.model.mlm_head), ("sop", loop.model.sop_head)):
        if child in names:
            objects[child] = head
        else:
            log(f"init checkpoint has no '{child}' head: it starts from random weights")
    status = tf.train.Checkpoint(**objects).restore(prefix).expect_partial()
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise CheckpointError(f"{prefix} does not fit the model: {str(e)[:300]}") from None


def _distribute(strategy, make_dataset):
    def fn(ctx: tf.distribute.InputContext):
        return make_dataset(
            num_replicas=ctx.num_replicas_in_sync,
            num_pipelines=ctx.num_input_pipelines,
            pipeline_id=ctx.input_pipeline_id,
        )

    return strategy.distribute_datasets_from_function(fn)


def _write_scalars(writer, metrics: dict[str, float], step: int) -> None:
    with writer.as_default():
        for name, value in metrics.items():
            tf.summary.scalar(name, value, step=step)
        writer.flush()


def pretrain(
    data: str | list[str],
    config: str | os.PathLike | AlbertConfig,
    output_dir: str | os.PathLike,
    *,
    train_steps: int,
    batch_size: int,
    learning_rate: float = 0.00176,
    warmup_steps: int = 0,
    eval_data: str | list[str] | None = None,
    init_checkpoint: str | os.PathLike | None = None,
    sp_model: str | os.PathLike | None = None,
    save_every: int = 1000,
    keep: int = 3,
    eval_every: int = 1000,
    log_every: int = 100,
    max_eval_examples: int | None = None,
    strategy: str | tf.distribute.Strategy = "default",
    tpu: str | None = None,
    dtype: str = "auto",
    seed: int = 12345,
    max_minutes: float | None = None,
    overwrite: bool = False,
    deterministic: bool = False,
    progress: bool = True,
) -> PretrainResult:
    """Pretrains (or resumes pretraining) an ALBERT on TFRecord shards; see the module docstring.

    `data`/`eval_data`: globs (comma-separated or a list) of create-pretraining-data shards.
    `config`: preset name, config JSON/dir, or AlbertConfig. `batch_size` is the global batch.
    The learning rate warms up linearly over `warmup_steps`, then decays linearly to 0 at
    `train_steps`. Checkpoints every `save_every` steps (keeping `keep`), at the end, and when
    `max_minutes` of wall time are used up. Evaluates on `eval_data` at the start of a fresh run,
    every `eval_every` steps, and at the end. `deterministic` enables TF op determinism (exact
    reproducibility, slower). Typed errors (DataError, ConfigError, TokenizerError,
    CheckpointError, OutputError) for bad input, raised before anything is written.
    """
    started = time.monotonic()
    if isinstance(strategy, str):
        strategy = make_strategy(strategy, tpu)
    config = load_config(config)
    for name, value in (("batch size", batch_size), ("save every", save_every), ("keep", keep)):
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")
    eval_every, log_every = max(int(eval_every), 1), max(int(log_every), 1)
    spec = data_lib.inspect_data(data, config)
    eval_spec = data_lib.inspect_data(eval_data, config) if eval_data else None
    if batch_size % strategy.num_replicas_in_sync:
        raise ConfigError(
            f"batch size {batch_size} is not divisible by the "
            f"{strategy.num_replicas_in_sync} replicas"
        )
    if sp_model:
        check_sp_model(sp_model, config)
    init_prefix = check_init_checkpoint(init_checkpoint, config) if init_checkpoint else None
    if init_prefix and not sp_model:
        with gfile_errors(CheckpointError, f"cannot read init checkpoint {init_checkpoint}"):
            if is_file(join(init_checkpoint, "spm.model")):
                sp_model = join(init_checkpoint, "spm.model")
    dtype = resolve_dtype(dtype, device_type(strategy))
    chief = is_chief(strategy)
    settings = run_settings(
        dict(
            batch_size=batch_size,
            seed=seed,
            learning_rate=learning_rate,
            warmup_steps=warmup_steps,
            max_seq_length=spec.max_seq_length,
            max_predictions_per_seq=spec.max_predictions_per_seq,
        )
    )
    output = path_str(output_dir)
    if chief:
        prepare_output(
            output, config, settings, os.fspath(sp_model) if sp_model else None, overwrite
        )
        checkpoint_dir = output
    else:
        # Non-chief workers must save too (collectives), but to a local scratch directory.
        checkpoint_dir = tempfile.mkdtemp(prefix="albert-tf-worker-")

    def log(message: str) -> None:
        if chief and progress:
            tqdm.write(message)

    if deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(seed)
    try:
        with keras_policy(dtype):
            loop = _Loop(strategy, config, spec, dtype, (learning_rate, train_steps, warmup_steps))
            manager = tf.train.CheckpointManager(loop.checkpoint, checkpoint_dir, max_to_keep=keep)
            latest = tf.train.latest_checkpoint(output)
            if latest:
                loop.checkpoint.restore(latest).assert_existing_objects_matched()
                log(f"resuming from {latest} (step {int(loop.step.numpy())})")
            elif init_prefix:
                _restore_init(loop, init_prefix, log)
                log(f"initialized from {init_prefix}")
            result = _train(
                loop,
                manager,
                spec,
                eval_spec,
                output,
                chief,
                log,
                fresh=latest is None,
                train_steps=train_steps,
                batch_size=batch_size,
                seed=seed,
                save_every=save_every,
                eval_every=eval_every,
                log_every=log_every,
                max_eval_examples=max_eval_examples,
                max_minutes=max_minutes,
                started=started,
                progress=progress,
            )
    finally:
        if not chief:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
    result.dtype = dtype
    result.seconds = time.monotonic() - started
    return result


def _train(
    loop: _Loop,
    manager,
    spec,
    eval_spec,
    output: str,
    chief: bool,
    log,
    *,
    fresh: bool,
    train_steps: int,
    batch_size: int,
    seed: int,
    save_every: int,
    eval_every: int,
    log_every: int,
    max_eval_examples,
    max_minutes,
    started: float,
    progress: bool,
) -> PretrainResult:
    strategy = loop.strategy
    step = int(loop.step.numpy())
    result = PretrainResult(output, step, False, loop.dtype)
    noop = tf.summary.create_noop_writer()
    train_writer = tf.summary.create_file_writer(join(output, "logs", "train")) if chief else noop
    eval_writer = tf.summary.create_file_writer(join(output, "logs", "eval")) if chief else noop
    eval_set = None
    if eval_spec is not None:
        eval_set = _distribute(
            strategy,
            lambda **kw: data_lib.eval_dataset(
                eval_spec, batch_size, max_examples=max_eval_examples, **kw
            ),
        )

    def evaluate(at_step: int) -> None:
        if eval_set is None:
            return
        metrics = loop.evaluate(eval_set)
        _write_scalars(eval_writer, metrics, at_step)
        result.eval_history.append({"step": at_step, **metrics})
        log(
            f"eval step {at_step}: mlm_accuracy={metrics['mlm_accuracy']:.4f} "
            f"sop_accuracy={metrics['sop_accuracy']:.4f} loss={metrics['loss']:.4f}"
        )

    if fresh and step == 0:
        evaluate(0)
    train_set = _distribute(
        strategy,
        lambda **kw: data_lib.train_dataset(spec, batch_size, seed, skip_steps=step, **kw),
    )
    iterator = iter(train_set)
    bar = tqdm(
        total=train_steps, initial=step, disable=not (chief and progress), unit="step", smoothing=0
    )
    totals: dict[str, float] = {}
    interval_start, interval_steps = time.monotonic(), 0
    deadline = started + max_minutes * 60 if max_minutes else None
    while step < train_steps:
        sums = loop.train_step(iterator)
        step += 1
        interval_steps += 1
        for k, v in sums.items():
            totals[k] = totals.get(k, 0.0) + float(v)
        out_of_time = deadline is not None and bool(
            loop.any_worker(tf.constant(time.monotonic() > deadline))
        )
        last = step == train_steps or out_of_time
        if step % log_every == 0 or last:
            elapsed = max(time.monotonic() - interval_start, 1e-9)
            metrics = metrics_from_sums(totals)
            metrics["learning_rate"] = loop.learning_rate(step - 1)
            metrics["examples_per_second"] = interval_steps * batch_size / elapsed
            _write_scalars(train_writer, metrics, step)
            result.train_history.append({"step": step, **metrics})
            bar.set_postfix(
                loss=f"{metrics['loss']:.3f}", ex_s=f"{metrics['examples_per_second']:.1f}"
            )
            totals, interval_start, interval_steps = {}, time.monotonic(), 0
        bar.update(1)
        if step % save_every == 0 or last:
            manager.save(checkpoint_number=step)
        if step % eval_every == 0 and not last:
            evaluate(step)
        if out_of_time and step < train_steps:
            result.stopped_early = True
            log(f"stopping after {max_minutes} minutes at step {step} (checkpoint saved)")
            break
    bar.close()
    evaluate(step)
    result.step = step
    return result
