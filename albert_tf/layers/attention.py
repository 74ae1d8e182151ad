"""Multi-head self-attention with the original ALBERT scopes (`attention_1/self/query`, ...)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.layers import fast
from albert_tf.layers.dropout import Dropout
from albert_tf.layers.embeddings import truncated_normal

# Added to the logits of masked (padding) keys, as in the original code.
MASK_LOGIT = -10000.0


def attention_bias(input_mask: tf.Tensor) -> tf.Tensor:
    """[B, S] mask of 1 (attend) / 0 (padding) -> float32 additive bias [B, 1, 1, S]."""
    # expand_dims, not [:, newaxis, newaxis, :]: TFLite converts it natively for any S, where
    # that slice needs TensorFlow's own op when S is left open (the classifier files).
    mask = tf.expand_dims(tf.expand_dims(tf.cast(input_mask, tf.float32), 1), 1)  # [B, 1, 1, S]
    return (1.0 - mask) * MASK_LOGIT


def build_dense(layers: list[keras.layers.Dense], input_width: int) -> None:
    """Creates the variables of Dense layers whose kernels are used directly (not by calling the
    layer), each under its own name scope as a call would: `.../self/query/kernel`."""
    for layer in layers:
        if not layer.built:
            with tf.name_scope(layer.name):
                layer.build(tf.TensorShape([None, input_width]))


class SelfAttention(keras.layers.Layer):
    """Scaled dot-product attention over all heads, then the output projection.

    Sublayers `self/query`, `self/key`, `self/value` and `output/dense` hold the [H, H] kernels of
    the original checkpoint; the forward pass is `fast.attention` (one [H, 3H] query-key-value
    kernel built from them). Call: `x [B, S, H]`, `bias [B, 1, 1, S]` float32, optionally
    `prepared` (from `fast.attention_weights`) -> `[B, S, H]`. The mask is added and the
    softmax computed in float32 under mixed precision (inside `fused.fused_cpu_inference()`,
    by oneDNN in the compute dtype, accumulating in float32).
    """

    def __init__(self, config: AlbertConfig, **kwargs: Any) -> None:
        kwargs.setdefault("name", "attention_1")
        super().__init__(**kwargs)
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size

        def dense(name: str) -> keras.layers.Dense:
            return keras.layers.Dense(
                config.hidden_size, kernel_initializer=truncated_normal(config), name=name
            )

        self.query = dense("self/query")
        self.key = dense("self/key")
        self.value = dense("self/value")
        self.output_dense = dense("output/dense")
        self.dropout = Dropout(config.attention_probs_dropout_prob)

    def build(self, input_shape: Any) -> None:
        build_dense([self.query, self.key, self.value, self.output_dense], self.config.hidden_size)
        super().build(input_shape)

    def call(
        self,
        x: tf.Tensor,
        bias: tf.Tensor,
        training: bool | None = None,
        prepared: tuple[tf.Tensor, ...] | None = None,
    ) -> tf.Tensor:
        weights = prepared if prepared is not None else fast.attention_weights(self)
        return fast.attention(
            x, bias, weights, self.num_heads, self.head_size, self.dropout, training
        )

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> SelfAttention:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
