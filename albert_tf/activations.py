"""Activation functions by the names `AlbertConfig.hidden_act` accepts.

In an ALBERT config "gelu" is the original code's tanh approximation; Hugging Face calls the
same function "gelu_new" and the erf form "gelu" (ours: "gelu_exact" / "gelu_python").
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf
import tf_keras as keras

from albert_tf.errors import ConfigError


@keras.utils.register_keras_serializable(package="albert_tf")
def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
    """GELU, tanh approximation: the original ALBERT `gelu` (HF "gelu_new")."""
    x = tf.convert_to_tensor(x)
    coeff = tf.cast(math.sqrt(2.0 / math.pi), x.dtype)
    return 0.5 * x * (1.0 + tf.tanh(coeff * (x + tf.cast(0.044715, x.dtype) * x * x * x)))


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


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The activation called `name` (one of `albert_tf.config.ACTIVATIONS`)."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ConfigError(
            f"unknown activation {name!r}; known: {', '.join(_ACTIVATIONS)}"
        ) from None
