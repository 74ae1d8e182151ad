"""Activation functions by the names `AlbertConfig.hidden_act` accepts.

In an ALBERT config "gelu" is the original code's tanh approximation; Hugging Face calls the
same function "gelu_new" and the erf form "gelu" (ours: "gelu_exact" / "gelu_python").
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator

import tensorflow as tf
import tf_keras as keras

from albert_tf.errors import ConfigError

# The tanh approximation: GELU(x) ~ x/2 (1 + tanh(GELU_TANH_COEFF (x + GELU_TANH_CUBIC x^3))),
# here and in every other form of it (the compiled training kernels, the ONNX graph).
GELU_TANH_COEFF = math.sqrt(2.0 / math.pi)
GELU_TANH_CUBIC = 0.044715

_AS_ONE_OP: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "albert_tf_gelu_as_one_op", default=False
)


@contextlib.contextmanager
def gelu_as_one_op() -> Iterator[None]:
    """Functions traced inside compute `gelu_tanh` with `tf.nn.gelu(approximate=True)`: the
    same function (ALBERT-base's float32 TFLite outputs move by at most 3e-6), written in the
    op pattern TFLite's converter turns into one GELU operator, which XNNPACK runs as one pass
    over the [B*S, F] activations instead of nine elementwise operators. `albert_tf.export.tflite` traces
    in it: ALBERT-base int8, 128 tokens, LiteRT on 2 cores (AVX-512 VNNI) takes 0.94x the time
    at batch 1 and 0.93x at batch 32. TensorFlow's own graphs keep the written-out form that
    their checks and measurements were made with."""
    token = _AS_ONE_OP.set(True)
    try:
        yield
    finally:
        _AS_ONE_OP.reset(token)


@keras.utils.register_keras_serializable(package="albert_tf")
def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
    """GELU, tanh approximation: the original ALBERT `gelu` (HF "gelu_new"); one `tf.nn.gelu`
    inside `gelu_as_one_op()`."""
    if _AS_ONE_OP.get():
        return tf.nn.gelu(x, approximate=True)
    with tf.name_scope("gelu"):  # names the ops in profiles
        x = tf.convert_to_tensor(x)
        coeff = tf.cast(GELU_TANH_COEFF, x.dtype)
        return (
            0.5 * x * (1.0 + tf.tanh(coeff * (x + tf.cast(GELU_TANH_CUBIC, x.dtype) * x * x * x)))
        )


def gelu_tanh_derivative(x: tf.Tensor, x_squared: tf.Tensor, t: tf.Tensor) -> tf.Tensor:
    """d/dx `gelu_tanh` at `x`, from the forward pass's `x_squared` and its tanh
    `t = tanh(c (x + a x^3))`: (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 a x^2), in x's dtype."""
    coeff = tf.cast(GELU_TANH_COEFF, x.dtype)
    cubic = tf.cast(GELU_TANH_CUBIC, x.dtype)
    slope = coeff * (1.0 + (3.0 * cubic) * x_squared)
    return 0.5 * (1.0 + t) + (0.5 * x) * (1.0 - t * t) * slope


@tf.custom_gradient
def gelu_tanh_for_training(x: tf.Tensor) -> tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
    """`gelu_tanh` with its derivative written out, for graphs that are differentiated.

    Autodiff of the nine-op forward pass emits about twenty elementwise ops on the [B*S, F]
    activations; the closed form below reuses the forward's tanh and needs eight. Inference keeps
    plain `gelu_tanh`: `tf.custom_gradient` wraps its ops in identities, which would stop
    oneDNN from fusing the activation into the preceding MatMul.
    """
    with tf.name_scope("gelu"):  # names the ops in profiles
        x = tf.convert_to_tensor(x)
        coeff = tf.cast(GELU_TANH_COEFF, x.dtype)
        cubic = tf.cast(GELU_TANH_CUBIC, x.dtype)
        x_squared = x * x
        t = tf.tanh(coeff * (x + cubic * x_squared * x))

    def grad(upstream: tf.Tensor) -> tf.Tensor:
        with tf.name_scope("gelu_grad"):
            return upstream * gelu_tanh_derivative(x, x_squared, t)

    return (0.5 * x) * (1.0 + t), grad


@keras.utils.register_keras_serializable(package="albert_tf")
def gelu_exact(x: tf.Tensor) -> tf.Tensor:
    """GELU with the exact Gaussian CDF (erf): HF "gelu"."""
    x = tf.convert_to_tensor(x)
    return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


_ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu_tanh,
    "gelu_new": gelu_tanh,
    "gelu_exact": gelu_exact,
    "gelu_python": gelu_exact,
    "relu": tf.nn.relu,
    "swish": tf.nn.silu,
}


def training_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The activation called `name` for a training pass (same values, cheaper gradient)."""
    activation = get_activation(name)
    return gelu_tanh_for_training if activation is gelu_tanh else activation


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The activation called `name` (one of `albert_tf.config.ACTIVATIONS`)."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ConfigError(
            f"unknown activation {name!r}; known: {', '.join(_ACTIVATIONS)}"
        ) from None
