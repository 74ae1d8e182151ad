"""AlbertEncoder, heads and pretraining model: contract, structure, serialization, precision."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from albert_tf.encoder import AlbertEncoder
from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.models import AlbertPretrainingModel
from albert_tf.params import parameter_breakdown
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
def test_sharing_modes_run_and_both_weight_paths_agree(shared_params):
    # Inference prepares each shared sublayer's weights once per call; training prepares them in
    # every layer. With dropout 0 the two paths must give the same outputs.
    config = helpers.tiny_config(shared_params=shared_params)
    encoder = AlbertEncoder(config)
    inputs = helpers.make_inputs(config)
    out = encoder(inputs, training=False)
    assert len(out["encoder_outputs"]) == 8
    trained_path = encoder(inputs, training=True)
    for a, b in zip(tf.nest.flatten(out), tf.nest.flatten(trained_path), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_symbolic_training_flag_takes_the_per_layer_path():
    # A `training` tensor (not a Python bool) cannot pick a path while tracing: it must still run.
    config = helpers.tiny_config()
    encoder = AlbertEncoder(config)
    inputs = helpers.make_inputs(config)
    forward = tf.function(lambda x, t: encoder(x, training=t)["sequence_output"], autograph=False)
    np.testing.assert_allclose(
        forward(inputs, tf.constant(False)),
        encoder(inputs, training=False)["sequence_output"],
        atol=1e-6,
    )


# === Structure: ALBERT's parameter sharing ===


def test_all_shared_parameter_count_does_not_depend_on_depth():
    counts = {
        layers: AlbertEncoder(
            helpers.tiny_config(num_hidden_layers=layers, num_hidden_groups=1)
        ).count_params()
        for layers in (1, 3, 6)
    }
    assert len(set(counts.values())) == 1, counts


@pytest.mark.parametrize("shared_params", ["all", "attention", "ffn", "none"])
def test_parameter_counts_follow_the_breakdown(shared_params):
    config = helpers.tiny_config(num_hidden_layers=3, shared_params=shared_params)
    model = AlbertPretrainingModel(config)
    expected = parameter_breakdown(config)
    encoder = model.encoder
    assert encoder.count_params() == expected["total"]
    assert sum(int(np.prod(v.shape)) for v in encoder.trainable_variables) == expected["total"]
    for group, count in enumerate(expected["breakdown"]["groups"]):
        prefix = f"encoder/transformer/group_{group}/"
        owned = [v for v in encoder.variables if v.name.startswith(prefix)]
        assert sum(int(np.prod(v.shape)) for v in owned) == count
    heads = expected["heads"]["mlm"] + expected["heads"]["sop"]
    assert model.count_params() == expected["total"] + heads  # the tied table counted once


def test_no_per_layer_weights_when_all_shared():
    config = helpers.tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    names = [v.name for v in AlbertEncoder(config).variables]
    assert not [n for n in names if "layer_" in n]
    blocks = {n.split("/")[2] + "/" + n.split("/")[3] for n in names if "/transformer/" in n}
    assert blocks == {f"group_{g}/inner_group_{i}" for g in (0, 1) for i in (0, 1)}
    assert len(names) == len(set(names))
    unshared = AlbertEncoder(config.replace(shared_params="none")).variables
    assert {v.name.split("/")[3] for v in unshared if "/transformer/" in v.name} == {
        f"layer_{layer}" for layer in range(4)
    }


def test_layers_use_their_group_blocks_in_order():
    config = helpers.tiny_config(num_hidden_layers=6, num_hidden_groups=2, inner_group_num=2)
    encoder = AlbertEncoder(config)
    names = [[block.name for block in row] for row in encoder.blocks]
    assert names == [
        [f"transformer/group_{g}/inner_group_0", f"transformer/group_{g}/inner_group_1"]
        for g in (0, 0, 0, 1, 1, 1)
    ]
    assert encoder.blocks[0][0] is encoder.blocks[2][0]


def test_padding_does_not_change_real_tokens():
    config = helpers.tiny_config()
    encoder = AlbertEncoder(config)
    inputs = helpers.make_inputs(config, batch=1, seq=6)
    pad_values = dict(input_word_ids=7, input_mask=0, input_type_ids=1)
    padded = {
        k: tf.pad(v, [[0, 0], [0, 3]], constant_values=pad_values[k]) for k, v in inputs.items()
    }
    short = encoder(inputs, training=False)
    longer = encoder(padded, training=False)
    np.testing.assert_allclose(
        longer["sequence_output"][:, :6], short["sequence_output"], atol=1e-5
    )
    np.testing.assert_allclose(longer["pooled_output"], short["pooled_output"], atol=1e-5)


# === Serialization, dropout, precision ===


def test_config_round_trip_and_dropout_only_in_training():
    config = helpers.tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    inputs = helpers.make_inputs(config, positions=2)
    encoder_inputs = {k: v for k, v in inputs.items() if k != "masked_lm_positions"}
    encoder = helpers.assert_config_round_trip(AlbertEncoder(config), encoder_inputs)
    assert encoder.config == config
    model = helpers.assert_config_round_trip(AlbertPretrainingModel(config), inputs)
    helpers.assert_dropout_only_in_training(model, inputs)


def test_checkpoint_and_saved_model_round_trips(tmp_path):
    config = helpers.tiny_config()
    inputs = helpers.make_inputs(config, positions=3)
    helpers.assert_checkpoint_round_trip(lambda: AlbertPretrainingModel(config), inputs, tmp_path)
    encoder_inputs = {k: v for k, v in inputs.items() if k != "masked_lm_positions"}
    helpers.assert_saved_model_round_trip(AlbertEncoder(config), encoder_inputs, tmp_path / "sm")


# Seeded weights: bf16 measures ~2.3e-2, fp16 ~3e-3 of each output's scale (seeds 0-5: <2.4e-2
# and <4.1e-3).
@pytest.mark.parametrize("policy, rtol", [("mixed_bfloat16", 5e-2), ("mixed_float16", 1e-2)])
def test_mixed_precision_close_to_float32(policy, rtol):
    keras.utils.set_random_seed(0)
    config = helpers.tiny_config()
    inputs = helpers.make_inputs(config, positions=2)
    helpers.assert_mixed_precision_close(
        lambda: AlbertPretrainingModel(config), inputs, policy, rtol
    )
    with helpers.mixed_precision(policy):
        model = AlbertPretrainingModel(config)
    assert model.encoder.embeddings.layer_norm.compute_dtype == "float32"
    assert model.encoder.blocks[0][0].attention_norm.compute_dtype == "float32"
    assert model.encoder.blocks[0][0].attention.compute_dtype == policy.split("_")[1]
    assert all(v.dtype == tf.float32 for v in model.variables)
