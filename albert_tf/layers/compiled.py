"""The training step's elementwise chains as XLA-compiled kernels, each with its gradient.

Without XLA, TensorFlow runs the FFN's bias + GELU and each block's residual add + LayerNorm as
one Eigen kernel per op: a GELU is nine passes over the [B*S, F] activations forward and eight
backward, a LayerNorm five forward and about ten backward, plus the casts around it under mixed
precision and a separate bias-gradient reduction. On a CPU with fast matmuls (AMX) these passes
are a large share of the step. Here each chain is one small `tf.function(jit_compile=True)` for
the forward pass and one for its gradient, so XLA fuses it into a few loops; the matmuls around
them stay TensorFlow's (oneDNN), which is why the step as a whole is not compiled (XLA's own
CPU matmuls make it slower: benchmarks/README.md). Measured in benchmarks/README.md
("Where the training step's time goes").

The arithmetic is the same as the layers' plain path, done in float32 inside the kernel
(bfloat16 inputs are widened once, outputs rounded once), so under mixed_bfloat16 the results
differ from it only by bfloat16 rounding. The gradients keep nothing but the inputs: the
backward kernel recomputes the cheap forward values instead of storing them.

Training graphs use it (`active(hidden_size)`) for models at least `MIN_HIDDEN_SIZE` wide, except
while a SavedModel is being saved, where the layers keep their plain, portable ops;
`compiled_training(False)` turns it off for graphs traced inside (the A/B benchmark's "before"
step) and `compiled_training(True)` on at any width (the tests' tiny models).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import tensorflow as tf
from tensorflow.python.saved_model import save_context

from albert_tf.activations import GELU_TANH_COEFF, GELU_TANH_CUBIC, gelu_tanh_derivative

# Below this hidden size each kernel's call costs more than the passes it saves: the step of a
# hidden-32 model took 20.6 ms with the kernels against 14.6 without (and 1.7 s more to trace),
# while the quickstart's hidden-128 step took 0.80x (bfloat16) and 0.94x (float32) the time.
MIN_HIDDEN_SIZE = 128

# None: by width (MIN_HIDDEN_SIZE); True or False: forced by compiled_training.
_ENABLED: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "albert_tf_compiled_training", default=None
)


@contextlib.contextmanager
def compiled_training(enabled: bool = True) -> Iterator[None]:
    """Training graphs traced inside the block use the compiled kernels if `enabled`, at any
    width."""
    token = _ENABLED.set(enabled)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def active(hidden_size: int) -> bool:
    """Whether a training pass of a model `hidden_size` wide, traced now, should use the
    compiled kernels."""
    enabled = _ENABLED.get()
    if enabled is None:
        enabled = hidden_size >= MIN_HIDDEN_SIZE
    return enabled and not save_context.in_save_context()


# === bias + GELU (tanh approximation) ===


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_forward(h: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    z = tf.cast(h, tf.float32) + tf.cast(bias, tf.float32)
    t = tf.tanh(GELU_TANH_COEFF * (z + GELU_TANH_CUBIC * z * z * z))
    return tf.cast(0.5 * z * (1.0 + t), h.dtype)


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_backward(
    h: tf.Tensor, bias: tf.Tensor, upstream: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    z = tf.cast(h, tf.float32) + tf.cast(bias, tf.float32)
    z_squared = z * z
    t = tf.tanh(GELU_TANH_COEFF * (z + GELU_TANH_CUBIC * z_squared * z))
    grad = tf.cast(upstream, tf.float32) * gelu_tanh_derivative(z, z_squared, t)
    return tf.cast(grad, h.dtype), tf.cast(tf.reduce_sum(grad, axis=0), bias.dtype)


@tf.custom_gradient
def bias_gelu(h: tf.Tensor, bias: tf.Tensor) -> tuple[tf.Tensor, Callable]:
    """`gelu_tanh(h + bias)` of `h [N, F]` and `bias [F]` (one dtype), in `h`'s dtype."""

    def grad(upstream: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return _bias_gelu_backward(h, bias, upstream)

    return _bias_gelu_forward(h, bias), grad


# === residual add + LayerNorm ===


def _normalized(x: tf.Tensor, residual: tf.Tensor, epsilon: float) -> tuple[tf.Tensor, tf.Tensor]:
    """(x_hat, 1/std) of `x + residual` in float32, over the last axis."""
    s = tf.cast(x, tf.float32) + tf.cast(residual, tf.float32)
    centered = s - tf.reduce_mean(s, axis=-1, keepdims=True)
    inv_std = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
    return centered * inv_std, inv_std


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_forward(x, residual, gamma, beta, epsilon):
    x_hat, _ = _normalized(x, residual, epsilon)
    return tf.cast(x_hat * gamma + beta, x.dtype)


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_backward(x, residual, gamma, epsilon, upstream):
    x_hat, inv_std = _normalized(x, residual, epsilon)
    dy = tf.cast(upstream, tf.float32)
    rows = tf.range(tf.rank(dy) - 1)  # every axis but the last
    d_gamma = tf.reduce_sum(dy * x_hat, axis=rows)
    d_beta = tf.reduce_sum(dy, axis=rows)
    d_x_hat = dy * gamma
    d_s = inv_std * (
        d_x_hat
        - tf.reduce_mean(d_x_hat, axis=-1, keepdims=True)
        - x_hat * tf.reduce_mean(d_x_hat * x_hat, axis=-1, keepdims=True)
    )
    d_s = tf.cast(d_s, x.dtype)
    return d_s, d_s, d_gamma, d_beta


def residual_layer_norm(
    x: tf.Tensor, residual: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float
) -> tf.Tensor:
    """LayerNorm over the last axis of `x + residual` (same shape and dtype), computed in
    float32 with float32 `gamma` and `beta` [width]; the result is in `x`'s dtype."""

    @tf.custom_gradient
    def norm(x, residual, gamma, beta):
        def grad(upstream):
            return _layer_norm_backward(x, residual, gamma, epsilon, upstream)

        return _layer_norm_forward(x, residual, gamma, beta, epsilon), grad

    return norm(x, residual, gamma, beta)
