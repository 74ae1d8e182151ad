"""Multi-head self-attention with the original ALBERT scopes (`attention_1/self/query`, ...)."""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.layers import fused
from albert_tf.layers.dropout import Dropout
from albert_tf.layers.embeddings import truncated_normal

# Added to the logits of masked (padding) keys, as in the original code.
MASK_LOGIT = -10000.0


def attention_bias(input_mask: tf.Tensor) -> tf.Tensor:
    """[B, S] mask of 1 (attend) / 0 (padding) -> float32 additive bias [B, 1, 1, S]."""
    mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]  # [B, 1, 1, S]
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
    the original checkpoint; the forward pass multiplies by one [H, 3H] query-key-value kernel
    built from them (see `prepared_weights`). Call: `x [B, S, H]`, `bias [B, 1, 1, S]` float32,
    optionally `prepared` (from `prepared_weights`) -> `[B, S, H]`. The mask is added and the
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

    def prepared_weights(self) -> tuple[tf.Tensor, ...]:
        """`(qkv_kernel [H, 3H], qkv_bias [3H], output_kernel [H, H], output_bias [H])` in the
        compute dtype, with the 1/sqrt(head_size) scale folded into the query part.

        One matmul of width 3H instead of three of width H; under mixed precision the variables
        are cast here, so an encoder that reuses one block for many layers casts them once.
        """
        dtype = self.compute_dtype
        scale = tf.cast(1.0 / math.sqrt(self.head_size), dtype)

        def read(variable: tf.Variable) -> tf.Tensor:
            return tf.cast(variable, dtype)

        qkv_kernel = tf.concat(
            [read(self.query.kernel) * scale, read(self.key.kernel), read(self.value.kernel)],
            axis=1,
        )
        qkv_bias = tf.concat(
            [read(self.query.bias) * scale, read(self.key.bias), read(self.value.bias)], axis=0
        )
        return qkv_kernel, qkv_bias, read(self.output_dense.kernel), read(self.output_dense.bias)

    def call(
        self,
        x: tf.Tensor,
        bias: tf.Tensor,
        training: bool | None = None,
        prepared: tuple[tf.Tensor, ...] | None = None,
    ) -> tf.Tensor:
        if prepared is None:
            prepared = self.prepared_weights()
        qkv_kernel, qkv_bias, output_kernel, output_bias = prepared
        batch, seq = tf.shape(x)[0], tf.shape(x)[1]
        hidden = self.config.hidden_size
        # 2-D matmuls: oneDNN fuses MatMul + BiasAdd (3-D inputs go through Tensordot reshapes).
        flat = tf.reshape(x, [-1, hidden])  # [B*S, H]
        qkv = tf.nn.bias_add(tf.matmul(flat, qkv_kernel), qkv_bias)  # [B*S, 3H]
        qkv = tf.reshape(qkv, [batch, seq, 3, self.num_heads, self.head_size])
        q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # 3 x [B, N, S, D]
        logits = tf.matmul(q, k, transpose_b=True)  # [B, N, S, S], already scaled
        if fused.active():
            # oneDNN's softmax accumulates in float32 whatever the input dtype. The bias is 0
            # (exact in bfloat16) or -10000 (about -9984 in bfloat16: still exp() == 0).
            probs = tf.nn.softmax(logits + tf.cast(bias, logits.dtype), axis=-1)
        else:
            # Without oneDNN a bfloat16 softmax need not accumulate in float32: cast first.
            probs = tf.nn.softmax(tf.cast(logits, tf.float32) + bias, axis=-1)
        probs = self.dropout(tf.cast(probs, x.dtype), training=training)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, S, N, D]
        context = tf.reshape(context, [-1, hidden])  # [B*S, H]
        output = tf.nn.bias_add(tf.matmul(context, output_kernel), output_bias)
        return tf.reshape(output, [batch, seq, hidden])  # [B, S, H]

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> SelfAttention:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
