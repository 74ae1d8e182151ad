"""Every speed path of the encoder equals `plain_forward`, ALBERT's forward pass written plainly.

The speed paths: the fused [H, 3H] query-key-value kernel with the scale folded in, weights
prepared once per call for blocks reused across layers (inference), per layer (training), and
oneDNN's fused LayerNorm and softmax in graphs traced inside `fused_cpu_inference()`. The plain
pass itself equals the original code's outputs on the fixtures.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.convert.tf1 import load_tf1_checkpoint
from albert_tf.encoder import AlbertEncoder, plain_forward
from albert_tf.layers import fused
from tests import helpers

ATOL = 1e-5


@pytest.fixture(scope="module", params=["all", "attention", "ffn", "none"])
def encoder_and_inputs(request):
    config = helpers.tiny_config(shared_params=request.param)
    keras.utils.set_random_seed(7)
    return AlbertEncoder(config), helpers.make_inputs(config, batch=3, seq=9)


def test_inference_path_with_prepared_weights_equals_plain(encoder_and_inputs):
    encoder, inputs = encoder_and_inputs
    expected = plain_forward(encoder, inputs)
    helpers.assert_outputs_close(encoder(inputs, training=False), expected, atol=ATOL)


def test_training_path_with_per_layer_weights_equals_plain(encoder_and_inputs):
    # The configs have no dropout: training only changes how the weights are prepared and which
    # activation (one with a hand-written gradient) runs.
    encoder, inputs = encoder_and_inputs
    expected = plain_forward(encoder, inputs)
    helpers.assert_outputs_close(encoder(inputs, training=True), expected, atol=ATOL)


@pytest.mark.slow
@pytest.mark.skipif(not fused.onednn_kernels_available(), reason="no oneDNN kernels here")
def test_onednn_path_equals_plain(encoder_and_inputs):
    encoder, inputs = encoder_and_inputs
    call = tf.function(lambda x: encoder(x, training=False))
    with fused.fused_cpu_inference() as on:
        assert on
        actual = call(inputs)
    helpers.assert_outputs_close(actual, plain_forward(encoder, inputs), atol=ATOL)


@pytest.mark.parametrize("name", ["albert_tf1_tiny", "albert_tf1_groups"])
def test_plain_forward_equals_the_original(fixtures_dir, name):
    fixture = fixtures_dir / name
    config = AlbertConfig.from_json_file(fixture / "albert_config.json")
    inputs, data = helpers.fixture_reference(fixture)
    out = plain_forward(load_tf1_checkpoint(fixture / "model.ckpt", config).encoder, inputs)
    np.testing.assert_allclose(out["sequence_output"], data["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(out["pooled_output"], data["pooled_output"], atol=ATOL)
    for actual, expected in zip(out["encoder_outputs"], data["encoder_outputs"], strict=True):
        np.testing.assert_allclose(actual, expected, atol=ATOL)
