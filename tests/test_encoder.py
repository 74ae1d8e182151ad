"""AlbertEncoder, heads and pretraining model: contract, structure, serialization, precision."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.encoder import AlbertEncoder
from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.models import AlbertPretrainingModel
from tests import helpers


def test_encoder_outputs_follow_the_hub_contract():
    config = helpers.tiny_config()
    encoder = AlbertEncoder(config)
    inputs = helpers.make_inputs(config, batch=3, seq=7)
    out = encoder(inputs, training=False)
    assert set(out) == {"sequence_output", "pooled_output", "encoder_outputs"}
    assert out["sequence_output"].shape == (3, 7, 32)
    assert out["pooled_output"].shape == (3, 32)
    assert len(out["encoder_outputs"]) == 4 * 2  # layers x inner groups
    assert all(t.dtype == tf.float32 for t in tf.nest.flatten(out))
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    assert encoder.name == "encoder"
    assert encoder.get_embedding_table().shape == (100, 16)


def test_pretraining_model_heads():
    config = helpers.tiny_config()
    model = AlbertPretrainingModel(config)
    inputs = helpers.make_inputs(config, batch=2, seq=6, positions=3)
    out = model(inputs, training=False)
    assert out["mlm_logits"].shape == (2, 3, 100)
    assert out["sop_logits"].shape == (2, 2)
    assert model.mlm_head.embedding_table is model.encoder.get_embedding_table()
    all_positions = model.mlm_head(out["sequence_output"])
    assert all_positions.shape == (2, 6, 100)
    gathered = tf.gather(all_positions, inputs["masked_lm_positions"], batch_dims=1)
    np.testing.assert_allclose(gathered, out["mlm_logits"], atol=1e-5)
    assert isinstance(model.mlm_head, MaskedLMHead)
    assert isinstance(model.sop_head, SentenceOrderHead)


@pytest.mark.parametrize("shared_params", ["all", "attention", "ffn", "none"])
def test_sharing_modes_run(shared_params):
    config = helpers.tiny_config(shared_params=shared_params)
    out = AlbertEncoder(config)(helpers.make_inputs(config), training=False)
    assert len(out["encoder_outputs"]) == 8
