"""Multi-head self-attention with the original ALBERT scopes (`attention_1/self/query`, ...)."""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.layers.embeddings import truncated_normal

# Added to the logits of masked (padding) keys, as in the original code.
MASK_LOGIT = -10000.0


def attention_bias(input_mask: tf.Tensor) -> tf.Tensor:
    """[B, S] mask of 1 (attend) / 0 (padding) -> float32 additive bias [B, 1, 1, S]."""
    mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]  # [B, 1, 1, S]
    return (1.0 - mask) * MASK_LOGIT


class SelfAttention(keras.layers.Layer):
    """Scaled dot-product attention over all heads, then the output projection.

    Sublayers `self/query`, `self/key`, `self/value` and `output/dense` hold [H, H] kernels as in
    the original checkpoint. Call: `x [B, S, H]`, `bias [B, 1, 1, S]` float32 -> `[B, S, H]`.
    The mask is added and the softmax computed in float32 under mixed precision.
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
        self.dropout = keras.layers.Dropout(config.attention_probs_dropout_prob)

    def call(self, x: tf.Tensor, bias: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        batch, seq = tf.shape(x)[0], tf.shape(x)[1]
        hidden = self.config.hidden_size
        # Dense layers on 2-D inputs: oneDNN fuses MatMul + BiasAdd (3-D inputs go through
        # Tensordot reshapes that block the fusion).
        flat = tf.reshape(x, [-1, hidden])  # [B*S, H]
        heads = [batch, seq, self.num_heads, self.head_size]
        scale = tf.cast(1.0 / math.sqrt(self.head_size), flat.dtype)
        q = tf.reshape(self.query(flat) * scale, heads)  # [B, S, N, D]
        k = tf.reshape(self.key(flat), heads)  # [B, S, N, D]
        v = tf.reshape(self.value(flat), heads)  # [B, S, N, D]
        logits = tf.einsum("bqnd,bknd->bnqk", q, k)  # [B, N, S, S]
        # Softmax in float32 under every policy (measured: a bfloat16 softmax is no faster here).
        probs = tf.nn.softmax(tf.cast(logits, tf.float32) + bias, axis=-1)
        probs = self.dropout(tf.cast(probs, x.dtype), training=training)
        context = tf.einsum("bnqk,bknd->bqnd", probs, v)  # [B, S, N, D]
        context = tf.reshape(context, [-1, hidden])  # [B*S, H]
        return tf.reshape(self.output_dense(context), [batch, seq, hidden])  # [B, S, H]

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> SelfAttention:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
