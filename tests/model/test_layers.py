"""Layers: activations, embeddings, attention masking, blocks, heads; config round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.activations import get_activation, training_activation
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import ConfigError
from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.layers.attention import SelfAttention, attention_bias
from albert_tf.layers.embeddings import AlbertEmbeddings
from albert_tf.layers.transformer_block import FeedForward, TransformerBlock
from tests import helpers

X = np.linspace(-4.0, 4.0, 41).astype(np.float32)


def test_gelu_is_the_tanh_approximation_and_gelu_exact_uses_erf():
    tanh = 0.5 * X * (1 + np.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X**3)))
    erf = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in X])
    for name in ("gelu", "gelu_new"):
        np.testing.assert_allclose(get_activation(name)(X), tanh, atol=1e-6)
    for name in ("gelu_exact", "gelu_python"):
        np.testing.assert_allclose(get_activation(name)(X), erf, atol=1e-6)
    assert np.abs(tanh - erf).max() > 1e-4  # the two are really different functions
    np.testing.assert_allclose(get_activation("relu")(X), np.maximum(X, 0))
    np.testing.assert_allclose(get_activation("swish")(X), X / (1 + np.exp(-X)), atol=1e-6)
    with pytest.raises(ConfigError, match="unknown activation"):
        get_activation("tanhh")


@pytest.mark.parametrize("dtype, atol", [(tf.float32, 1e-5), (tf.bfloat16, 2e-2)])
def test_training_gelu_has_the_same_values_and_gradient(dtype, atol):
    x = tf.constant(np.linspace(-6.0, 6.0, 121), dtype)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        plain = get_activation("gelu")(x)
        written = training_activation("gelu")(x)
    assert training_activation("gelu") is not get_activation("gelu")
    assert training_activation("relu") is get_activation("relu")
    np.testing.assert_allclose(tf.cast(written, tf.float32), tf.cast(plain, tf.float32), atol=atol)
    np.testing.assert_allclose(
        tf.cast(tape.gradient(written, x), tf.float32),
        tf.cast(tape.gradient(plain, x), tf.float32),
        atol=atol,
    )
    # The derivative of the tanh approximation, in closed form (it dips below 0 near x = -1.5).
    xs = np.linspace(-6.0, 6.0, 121)
    t = np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs**3))
    slope = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * xs**2)
    expected = 0.5 * (1 + t) + 0.5 * xs * (1 - t**2) * slope
    np.testing.assert_allclose(tf.cast(tape.gradient(written, x), tf.float32), expected, atol=atol)


def test_attention_bias_and_masked_keys_are_ignored():
    bias = attention_bias(tf.constant([[1, 1, 0]]))
    assert bias.shape == (1, 1, 1, 3)
    np.testing.assert_array_equal(bias[0, 0, 0], [0.0, 0.0, -10000.0])
    config = helpers.tiny_config()
    attention = SelfAttention(config)
    x = tf.random.stateless_normal([2, 5, 32], seed=[1, 2])
    mask = tf.constant([[1, 1, 1, 0, 0]] * 2)
    changed = tf.concat([x[:, :3], x[:, 3:] + 5.0], axis=1)  # only masked positions differ
    a = attention(x, attention_bias(mask))
    b = attention(changed, attention_bias(mask))
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-5)
    names = sorted(v.name for v in attention.variables)
    assert names[0] == "attention_1/output/dense/bias:0"
    assert "attention_1/self/query/kernel:0" in names


def test_embeddings_sum_then_layer_norm():
    config = helpers.tiny_config(embedding_size=8)
    layer = AlbertEmbeddings(config)
    ids, types = tf.constant([[3, 4, 5]]), tf.constant([[0, 1, 1]])
    out = layer(ids, types)
    assert out.shape == (1, 3, 8)
    summed = (
        tf.gather(layer.word_embeddings, ids)
        + tf.gather(layer.token_type_embeddings, types)
        + layer.position_embeddings[None, :3]
    )
    mean, var = tf.nn.moments(summed, axes=[-1], keepdims=True)
    np.testing.assert_allclose(out, (summed - mean) / tf.sqrt(var + 1e-12), atol=1e-5)


@pytest.mark.parametrize("layer_class", [SelfAttention, FeedForward, TransformerBlock])
def test_layer_config_round_trip(layer_class):
    config = helpers.tiny_config(hidden_act="relu")
    layer = layer_class(config, name="block")
    rebuilt = layer_class.from_config(layer.get_config())
    assert rebuilt.config == config and rebuilt.name == "block"


def test_embeddings_and_sop_head_config_round_trip():
    config = helpers.tiny_config()
    for layer in (AlbertEmbeddings(config), SentenceOrderHead(config)):
        rebuilt = type(layer).from_config(layer.get_config())
        assert rebuilt.config == config and rebuilt.name == layer.name


def test_mlm_head_config_round_trip():
    config = helpers.tiny_config()
    encoder = AlbertEncoder(config)
    head = MaskedLMHead(config, encoder.get_embedding_table())
    sequence_output = tf.random.stateless_normal([2, 5, config.hidden_size], seed=[1, 2])
    rebuilt = helpers.assert_config_round_trip(head, sequence_output)
    assert rebuilt.embedding_table is not encoder.get_embedding_table()
    assert rebuilt.name == head.name == "cls/predictions"


def test_block_sharing_reuses_sublayers():
    config = helpers.tiny_config()
    owner = TransformerBlock(config, name="a")
    shares_attention = TransformerBlock(config, share_attention_with=owner, name="b")
    assert shares_attention.attention is owner.attention
    assert shares_attention.attention_norm is owner.attention_norm
    assert shares_attention.ffn is not owner.ffn
    with pytest.raises(NotImplementedError):
        shares_attention.get_config()


def test_sop_head_is_pooled_times_output_weights():
    config = helpers.tiny_config()
    head = SentenceOrderHead(config)
    assert [v.name for v in head.variables] == [
        "cls/seq_relationship/output_weights:0",
        "cls/seq_relationship/output_bias:0",
    ]
    head.output_bias.assign([0.5, -0.5])
    pooled = tf.random.stateless_normal([3, 32], seed=[3, 4])
    expected = pooled.numpy() @ head.output_weights.numpy().T + [0.5, -0.5]
    np.testing.assert_allclose(head(pooled), expected, atol=1e-5)
