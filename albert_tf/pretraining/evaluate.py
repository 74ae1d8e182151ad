"""`evaluate`: masked-LM and sentence-task loss and accuracy of a checkpoint on pretraining data.

The computation is pretrain's own evaluation (TrainLoop.evaluate_sums over data.eval_dataset,
losses.metrics_from_sums), so the final evaluation of a run and `evaluate` of its last checkpoint
on the same data and batch size give the same numbers. The sentence-task metrics are named by
the data's task (its metadata.json): sop_loss/sop_accuracy, nsp_loss/nsp_accuracy, or none.

The checkpoint may be a `pretrain` run directory (its latest checkpoint), a checkpoint prefix in
one (run/ckpt-4), or a `convert` output of an original checkpoint that has its pretraining heads
(cls/predictions and cls/seq_relationship become `mlm` and `sop`).
"""

from __future__ import annotations

import math
import os
from typing import Any

import tensorflow as tf

from albert_tf.checkpoint import checkpoint_children, latest_checkpoint, tf_error_reason
from albert_tf.config import CONFIG_FILE
from albert_tf.dtypes import keras_policy, resolve_dtype
from albert_tf.errors import CheckpointError, ConfigError, DataError
from albert_tf.io_utils import gfile_errors, is_file, join, parent, path_str
from albert_tf.pretrained import resolve
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.loop import TrainLoop
from albert_tf.pretraining.losses import metrics_from_sums
from albert_tf.pretraining.run_dir import read_config
from albert_tf.pretraining.settings import check_batch_split
from albert_tf.pretraining.strategy import device_type, make_strategy
from albert_tf.pretraining.trainer import distribute, restore_weights
from albert_tf.progress import bar as progress_bar

STEP_TENSOR = "step/.ATTRIBUTES/VARIABLE_VALUE"  # TrainLoop's step counter in a checkpoint


def resolve_checkpoint(path: str | os.PathLike) -> tuple[str, str]:
    """(checkpoint directory, checkpoint prefix) for a checkpoint directory (its latest
    checkpoint) or a checkpoint prefix (`dir/ckpt-4`) in one; CheckpointError if neither."""
    path = path_str(resolve(path))  # a shipped model's name: its checkpoint directory
    with gfile_errors(CheckpointError, f"cannot read checkpoint {path}"):
        if tf.io.gfile.isdir(path):
            directory, prefix = path, None
        elif is_file(f"{path}.index"):
            directory, prefix = parent(path), path
        else:
            raise CheckpointError(
                f"checkpoint {path} does not exist (give a checkpoint directory or a ckpt-N prefix)"
            )
        if not is_file(join(directory, CONFIG_FILE)):
            raise CheckpointError(f"{directory} is not a checkpoint directory (no {CONFIG_FILE})")
    return directory, prefix or latest_checkpoint(directory)


def _restore(loop: TrainLoop, prefix: str, sentence_task: str) -> int | None:
    """Restores the encoder and heads from `prefix` into `loop`; returns the checkpoint's step
    (None when it has none, as a converted checkpoint)."""
    with gfile_errors(CheckpointError, f"cannot read checkpoint {prefix}"):
        roots = checkpoint_children(prefix)
        reader = tf.train.load_checkpoint(prefix)
        step = int(reader.get_tensor(STEP_TENSOR)) if reader.has_tensor(STEP_TENSOR) else None
    needed = ["encoder", "mlm"] + ([] if sentence_task == "none" else ["sop"])
    missing = [name for name in needed if name not in roots]
    if missing:
        raise CheckpointError(
            f"checkpoint {prefix} has no {' or '.join(repr(m) for m in missing)} weights, which "
            f"evaluating {sentence_task} data needs (a pretraining checkpoint has them)"
        )
    restore_weights(loop.model, prefix, roots, f"its {CONFIG_FILE}")
    return step


def evaluate(
    checkpoint: str | os.PathLike,
    data: str | list[str],
    *,
    batch_size: int = 32,
    max_examples: int | None = None,
    dtype: str = "float32",
    strategy: tf.distribute.Strategy | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Evaluates a checkpoint's MLM and sentence heads on pretraining shards (one pass).

    Args:
      checkpoint: a checkpoint directory (latest checkpoint) or a `dir/ckpt-N` prefix.
      data: glob(s) of create-pretraining-data shards (comma-separated, as pretrain's).
      batch_size: the global evaluation batch (the last one is padded with weight-0 examples).
      max_examples: evaluate the first this many examples only.
      dtype: compute dtype ("auto", "float32", "bfloat16", "float16").
      strategy: defaults to the default strategy (one device).
      progress: show a progress bar (only on a terminal: albert_tf.progress).

    Returns a JSON-ready dict: checkpoint (the prefix), step (None for a checkpoint without a
    step counter), data, sentence_task, num_examples, num_masked_tokens, loss, mlm_loss, mlm_accuracy, and unless
    the task is "none", `{task}_loss` and `{task}_accuracy`.

    Raises ConfigError (bad setting or config), CheckpointError (no checkpoint, missing heads,
    weights that disagree with the config), DataError (no shards, shards that disagree with the
    config: vocabulary, sequence length, features).
    """
    if batch_size <= 0:
        raise ConfigError("--batch-size must be positive")
    if max_examples is not None and max_examples <= 0:
        raise ConfigError("--max-eval-examples must be positive")
    directory, prefix = resolve_checkpoint(checkpoint)
    config = read_config(join(directory, CONFIG_FILE))
    spec = data_lib.inspect_data(data, config)
    if strategy is None:
        strategy = make_strategy("default")
    check_batch_split(batch_size, strategy.num_replicas_in_sync)
    dtype = resolve_dtype(dtype, device_type(strategy))
    with keras_policy(dtype):
        loop = TrainLoop(
            strategy,
            config,
            max_seq_length=spec.max_seq_length,
            max_predictions_per_seq=spec.max_predictions_per_seq,
            dtype=dtype,
            optimizer_args=(1e-3, 1, 0),  # never applied: evaluation only
            steps_per_loop=1,
            sentence_task=spec.sentence_task,
        )
        step = _restore(loop, prefix, spec.sentence_task)
        eval_set = distribute(
            strategy,
            lambda **kw: data_lib.eval_dataset(spec, batch_size, max_examples=max_examples, **kw),
        )
        known = [n for n in (spec.num_instances, max_examples) if n is not None]
        total = math.ceil(min(known) / batch_size) if known else None
        with progress_bar(total=total, desc="evaluate", unit="batch", enabled=progress) as bar:
            try:
                sums = loop.evaluate_sums(eval_set, on_batch=bar.update)
            except tf.errors.InvalidArgumentError as e:  # e.g. token ids beyond the vocabulary
                raise DataError(f"cannot evaluate on {data}: {tf_error_reason(e)}") from None
    return {
        "checkpoint": prefix,
        "step": step,
        "data": data if isinstance(data, str) else ",".join(data),
        "sentence_task": spec.sentence_task,
        "num_examples": int(round(sums["example_count"])),
        "num_masked_tokens": int(round(sums["mlm_weight_sum"])),
        **metrics_from_sums(sums, spec.sentence_task),
    }
