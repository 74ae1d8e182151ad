"""Parity with tf-models-official's AlbertEncoder (all layers share one block, E != H)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.encoder import AlbertEncoder
from tests import helpers

networks = pytest.importorskip("official.nlp.modeling.networks")

_BLOCK = "encoder/transformer/group_0/inner_group_0/"
# Our variable name -> tf-models-official's.
TFM_NAMES = {
    "encoder/embeddings/word_embeddings": "word_embeddings/embeddings",
    "encoder/embeddings/token_type_embeddings": "type_embeddings/embeddings",
    "encoder/embeddings/position_embeddings": "position_embedding/embeddings",
    "encoder/embeddings/LayerNorm/gamma": "embeddings/layer_norm/gamma",
    "encoder/embeddings/LayerNorm/beta": "embeddings/layer_norm/beta",
    "encoder/embedding_hidden_mapping_in/kernel": "embedding_projection/kernel",
    "encoder/embedding_hidden_mapping_in/bias": "embedding_projection/bias",
    **{
        f"{_BLOCK}attention_1/self/{p}/{w}": f"transformer/self_attention/{p}/{w}"
        for p in ("query", "key", "value")
        for w in ("kernel", "bias")
    },
    _BLOCK
    + "attention_1/output/dense/kernel": "transformer/self_attention/attention_output/kernel",
    _BLOCK + "attention_1/output/dense/bias": "transformer/self_attention/attention_output/bias",
    _BLOCK + "LayerNorm/gamma": "transformer/self_attention_layer_norm/gamma",
    _BLOCK + "LayerNorm/beta": "transformer/self_attention_layer_norm/beta",
    _BLOCK + "ffn_1/intermediate/dense/kernel": "transformer/intermediate/kernel",
    _BLOCK + "ffn_1/intermediate/dense/bias": "transformer/intermediate/bias",
    _BLOCK + "ffn_1/intermediate/output/dense/kernel": "transformer/output/kernel",
    _BLOCK + "ffn_1/intermediate/output/dense/bias": "transformer/output/bias",
    _BLOCK + "LayerNorm_1/gamma": "transformer/output_layer_norm/gamma",
    _BLOCK + "LayerNorm_1/beta": "transformer/output_layer_norm/beta",
    "encoder/pooler/dense/kernel": "pooler_transform/kernel",
    "encoder/pooler/dense/bias": "pooler_transform/bias",
}


def test_matches_tf_models_official_albert_encoder():
    # tf-models-official's default activation is its tanh-approximated gelu: our "gelu".
    config = helpers.tiny_config(num_hidden_layers=3, num_hidden_groups=1, inner_group_num=1)
    theirs = networks.AlbertEncoder(
        vocab_size=config.vocab_size,
        embedding_width=config.embedding_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        intermediate_size=config.intermediate_size,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        dict_outputs=True,
    )
    rng = np.random.default_rng(0)
    for variable in theirs.variables:  # random LayerNorms and biases too
        variable.assign(rng.normal(0.0, 0.3, variable.shape).astype(np.float32))
    by_name = {v.name.removesuffix(":0"): v for v in theirs.variables}
    ours = AlbertEncoder(config)
    assert {v.name.removesuffix(":0") for v in ours.variables} == set(TFM_NAMES)
    assert len(by_name) == len(TFM_NAMES)
    for variable in ours.variables:
        value = by_name[TFM_NAMES[variable.name.removesuffix(":0")]].numpy()
        variable.assign(value.reshape(variable.shape))  # tfm's q/k/v/output are [H, N, D] etc.

    inputs = helpers.make_inputs(config, batch=3, seq=9)
    expected = theirs(
        [inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"]], training=False
    )
    assert set(expected) == {"sequence_output", "pooled_output", "encoder_outputs"}
    actual = ours(inputs, training=False)
    diffs = {
        key: max(
            float(np.abs(np.asarray(a) - np.asarray(e)).max())
            for a, e in zip(
                tf.nest.flatten(actual[key]), tf.nest.flatten(expected[key]), strict=True
            )
        )
        for key in expected
    }
    print("tf-models-official AlbertEncoder max abs diff:", diffs)
    assert len(actual["encoder_outputs"]) == len(expected["encoder_outputs"]) == 3
    assert max(diffs.values()) < 1e-5, diffs
