"""Running a task model over featurized inputs in batches (evaluation, predict, tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.finetune.features import INPUT_NAMES
from albert_tf.finetune.models import TaskModel
from albert_tf.layers.fused import fused_cpu_inference

# Batches are cut after their longest row rounded up to a multiple of this (the padding costs
# time, not accuracy).
BUCKET = 16


def trimmed(batch: dict[str, np.ndarray], bucket: int = BUCKET) -> dict[str, np.ndarray]:
    """`batch` (arrays [..., S] with `input_mask`) cut after its longest row, rounded up to a
    multiple of `bucket` (at most S): the padding the encoder masks anyway, so the outputs are
    those of the whole batch within float rounding."""
    mask = batch["input_mask"]
    longest = int(mask.reshape(-1, mask.shape[-1]).sum(axis=1).max()) if mask.size else 0
    keep = min(mask.shape[-1], max(bucket, -(-longest // bucket) * bucket))
    return {name: value[..., :keep] for name, value in batch.items()}


def batched_outputs(
    model: TaskModel, inputs: dict[str, np.ndarray], batch_size: int, encoder: Any = None
) -> dict[str, np.ndarray]:
    """Runs `model` (inference mode) over `inputs` in batches; concatenated numpy outputs.

    Each batch is cut after its longest text (`trimmed`, in length buckets) where the task
    reads the pooled output (every runtime's encoder takes any length); tasks that read every
    position keep `max_seq_length`.
    The last batch is padded to `batch_size`; the function is traced once per model, for any
    batch shape. A
    float32 model's function is traced with oneDNN's fused CPU kernels where they are available
    (within 1e-7 of the serving SavedModel's logits). A bfloat16 model's is not: the fused
    kernels round float32 otherwise (1e-7), bfloat16 rounding carries that to 3e-4 in
    probability, and without them the function computes the serving SavedModel's logits bit
    for bit, as `predict` says it does. With `encoder` (a
    `albert_tf.runtimes.encoder.RuntimeEncoder`), the task's forward pass runs eagerly around
    that encoder instead of the model's own.
    """
    if encoder is not None:

        def call(batch: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
            features = {name: tf.constant(batch[name], tf.int32) for name in INPUT_NAMES}
            return model.task.forward(encoder, model.task_head, features, False)

    else:
        call = getattr(model, "_inference_function", None)
        if call is None:
            # Traced once, for batches of any size and length: traced per shape, a pass over
            # texts of every length (a teacher's in `distill`) traced it once per length bucket,
            # and TensorFlow warned of retracing.
            spec = {
                name: tf.TensorSpec([None] * value.ndim, tf.as_dtype(value.dtype))
                for name, value in inputs.items()
            }
            call = model._inference_function = tf.function(
                lambda x: model(x, training=False), input_signature=[spec]
            )
    trim = model.task.reads == "pooled_output"
    pieces: dict[str, list[np.ndarray]] = {}
    count = len(next(iter(inputs.values())))
    with fused_cpu_inference(model.compute_dtype == "float32"):
        for begin in range(0, count, batch_size):
            batch = {k: v[begin : begin + batch_size] for k, v in inputs.items()}
            size = len(batch["input_word_ids"])
            if size < batch_size and count > batch_size:
                pad = [(0, batch_size - size)] + [(0, 0)] * (batch["input_word_ids"].ndim - 1)
                batch = {k: np.pad(v, pad) for k, v in batch.items()}
            for name, value in call(trimmed(batch) if trim else batch).items():
                pieces.setdefault(name, []).append(value.numpy()[:size])
    return {name: np.concatenate(values) for name, values in pieces.items()}
