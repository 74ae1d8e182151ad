"""The encoder's speed paths: the same arithmetic as `encoder.plain_forward`, faster.

The layers (attention.py, transformer_block.py) hold the variables under the original scopes and
call these functions; tests/model/test_plain_forward.py checks each path against the plain pass.

1. Fused query-key-value: one [H, 3H] matmul instead of three [H, H] ones, with the
   1/sqrt(head_size) scale folded into the query kernel and bias (`attention_weights`).
2. Prepared weights: under mixed precision the variables are cast to the compute dtype (and the
   QKV kernel assembled) once per encoder call for a block that many layers reuse, instead of
   once per layer (`block_weights`; inference only: training prepares them per layer, so each
   layer's weight gradient reaches float32 before the layers' gradients are summed).
3. 2-D matmuls: [B*S, H] inputs, so oneDNN fuses MatMul + BiasAdd (+ activation) into one
   kernel (3-D inputs go through Tensordot reshapes).
4. oneDNN's softmax in the compute dtype inside `fused.fused_cpu_inference()` (it accumulates
   in float32); the fused LayerNorm is in embeddings.LayerNorm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from albert_tf.layers import fused


def attention_weights(attention: Any) -> tuple[tf.Tensor, ...]:
    """`(qkv_kernel [H, 3H], qkv_bias [3H], output_kernel [H, H], output_bias [H])` of a
    SelfAttention in its compute dtype, the 1/sqrt(head_size) scale folded into the query part."""
    dtype = attention.compute_dtype
    scale = tf.cast(1.0 / math.sqrt(attention.head_size), dtype)

    def read(variable: tf.Variable) -> tf.Tensor:
        return tf.cast(variable, dtype)

    query, key, value = attention.query, attention.key, attention.value
    qkv_kernel = tf.concat(
        [read(query.kernel) * scale, read(key.kernel), read(value.kernel)], axis=1
    )
    qkv_bias = tf.concat([read(query.bias) * scale, read(key.bias), read(value.bias)], axis=0)
    output = attention.output_dense
    return qkv_kernel, qkv_bias, read(output.kernel), read(output.bias)


def ffn_weights(ffn: Any) -> tuple[tf.Tensor, ...]:
    """`(intermediate_kernel, intermediate_bias, output_kernel, output_bias)` of a FeedForward in
    its compute dtype."""
    variables = (
        ffn.intermediate.kernel,
        ffn.intermediate.bias,
        ffn.output_dense.kernel,
        ffn.output_dense.bias,
    )
    return tuple(tf.cast(v, ffn.compute_dtype) for v in variables)


def block_weights(block: Any, cache: dict[int, tuple[tf.Tensor, ...]]) -> tuple[Any, Any]:
    """A TransformerBlock's attention and FFN weights, memoized in `cache` (one per encoder call)
    by sublayer, so blocks that share a sublayer share its prepared weights too."""

    def memo(layer: Any, prepare: Callable[[Any], tuple[tf.Tensor, ...]]) -> tuple:
        if id(layer) not in cache:
            cache[id(layer)] = prepare(layer)
        return cache[id(layer)]

    return memo(block.attention, attention_weights), memo(block.ffn, ffn_weights)


def attention(
    x: tf.Tensor,
    bias: tf.Tensor,
    weights: tuple[tf.Tensor, ...],
    num_heads: int,
    head_size: int,
    dropout: Callable[..., tf.Tensor],
    training: bool | None,
) -> tf.Tensor:
    """Self-attention of `x [B, S, H]` with `bias [B, 1, 1, S]` float32 and `attention_weights`;
    `dropout` on the probabilities. Returns [B, S, H] in `x`'s dtype."""
    qkv_kernel, qkv_bias, output_kernel, output_bias = weights
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]
    hidden = num_heads * head_size
    flat = tf.reshape(x, [-1, hidden])  # [B*S, H]
    qkv = tf.nn.bias_add(tf.matmul(flat, qkv_kernel), qkv_bias)  # [B*S, 3H]
    qkv = tf.reshape(qkv, [batch, seq, 3, num_heads, head_size])  # [B, S, 3, N, D]
    q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # 3 x [B, N, S, D]
    logits = tf.matmul(q, k, transpose_b=True)  # [B, N, S, S], already scaled
    if fused.active():
        # oneDNN's softmax accumulates in float32 whatever the input dtype. The bias is 0
        # (exact in bfloat16) or -10000 (about -9984 in bfloat16: still exp() == 0).
        probs = tf.nn.softmax(logits + tf.cast(bias, logits.dtype), axis=-1)
    else:
        # Without oneDNN a bfloat16 softmax need not accumulate in float32: cast first.
        probs = tf.nn.softmax(tf.cast(logits, tf.float32) + bias, axis=-1)
    probs = dropout(tf.cast(probs, x.dtype), training=training)
    context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, S, N, D]
    context = tf.reshape(context, [-1, hidden])  # [B*S, H]
    output = tf.nn.bias_add(tf.matmul(context, output_kernel), output_bias)  # [B*S, H]
    return tf.reshape(output, [batch, seq, hidden])  # [B, S, H]


def feed_forward(
    x: tf.Tensor,
    weights: tuple[tf.Tensor, ...],
    activation: Callable[[tf.Tensor], tf.Tensor] | None = None,
    bias_activation: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None,
) -> tf.Tensor:
    """`activation(x W1 + b1) W2 + b2` of `x [B, S, H]` with `ffn_weights`, as 2-D matmuls.
    Exactly one of `activation` and `bias_activation` (a function of `x W1` and `b1`, such as
    compiled.bias_gelu) is given."""
    in_kernel, in_bias, out_kernel, out_bias = weights
    flat = tf.reshape(x, [-1, in_kernel.shape[0]])  # [B*S, H]
    if bias_activation is not None:
        hidden = bias_activation(tf.matmul(flat, in_kernel), in_bias)  # [B*S, F]
    else:
        hidden = activation(tf.nn.bias_add(tf.matmul(flat, in_kernel), in_bias))  # [B*S, F]
    output = tf.nn.bias_add(tf.matmul(hidden, out_kernel), out_bias)  # [B*S, H]
    return tf.reshape(output, tf.shape(x))  # [B, S, H]
