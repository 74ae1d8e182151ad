"""oneDNN's fused CPU kernels in inference graphs, opt-in with `fused_cpu_inference()`.

TensorFlow's x86 builds carry oneDNN kernels that its graph rewrites create only from op patterns
they recognise, and ALBERT's LayerNorm (epsilon 1e-12, gamma and beta as variables) matches none
of them: it runs as five elementwise passes over the activations. `_MklLayerNorm` does the same
float32 arithmetic in one (measured on [4096, 768]: 2-3x faster; the encoder's outputs stay
within 1e-5 of the original's). Inside `fused_cpu_inference()`, functions traced by the encoder
call that kernel, and the attention softmax runs in the compute dtype: oneDNN's softmax
accumulates in float32 for bfloat16 inputs, so the two casts around a float32 softmax only cost
time.

Opt-in, because such a graph is not portable: `_MklLayerNorm` has no gradient and no GPU
kernel, and a SavedModel holding it loads only into a TensorFlow built with oneDNN. So it is off
in eager execution and while a SavedModel is being saved (`tf.saved_model.save` retraces
inside its save context), and on when oneDNN is (x86 CPU, no GPU, `TF_ENABLE_ONEDNN_OPTS` not 0).
`albert-tf benchmark` turns it on, and so do `albert-tf predict` and fine-tuning's evaluation for
float32 models (`finetune.inference.batched_outputs` says why not for bfloat16 ones).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.framework import kernels, op_def_library
from tensorflow.python.saved_model import save_context
from tensorflow.python.util import _pywrap_util_port

_REQUESTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "albert_tf_fused_cpu_inference", default=False
)


@functools.cache
def onednn_kernels_available() -> bool:
    """True if this process runs oneDNN's CPU kernels: TensorFlow built and enabled with oneDNN,
    `_MklLayerNorm` registered for the CPU, and no GPU that would otherwise take the ops."""
    if not _pywrap_util_port.IsMklEnabled() or tf.config.list_physical_devices("GPU"):
        return False
    registered = kernels.get_registered_kernels_for_op("_MklLayerNorm").kernel
    return any(kernel.device_type == "CPU" for kernel in registered)


@contextlib.contextmanager
def fused_cpu_inference(enabled: bool = True) -> Iterator[bool]:
    """Functions traced inside the block use oneDNN's fused kernels (when available); yields
    whether they do. For inference only: the fused LayerNorm has no gradient."""
    token = _REQUESTED.set(enabled and onednn_kernels_available())
    try:
        yield _REQUESTED.get()
    finally:
        _REQUESTED.reset(token)


def active() -> bool:
    """Whether the graph being traced now should use the fused kernels."""
    return _REQUESTED.get() and not tf.executing_eagerly() and not save_context.in_save_context()


def layer_norm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float) -> tf.Tensor:
    """LayerNorm over the last axis of a rank-2 or rank-3 `x` by `_MklLayerNorm`; `gamma` and
    `beta` are [width] in `x`'s dtype. Only inside a graph with `active()` true."""
    _, _, op, _ = op_def_library._apply_op_helper(
        "_MklLayerNorm", name="FusedLayerNorm", x=x, scale=gamma, offset=beta, epsilon=epsilon
    )
    return op.outputs[0]
