"""TFLite encoders (float32 and dynamic-range int8): names, size, drift against the SavedModel."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.runtimes import tflite_runner
from export.tflite import TFLITE_FILES, pooled_output_drift, saved_model_variable_bytes
from tests import helpers

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _interpreter(path):
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(path))


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_signature_names(groups, kind):
    signature = _interpreter(groups["bundle"].tflite / TFLITE_FILES[kind]).get_signature_list()
    assert signature == {
        "serving_default": {
            "inputs": sorted(ENCODER_INPUTS),
            "outputs": ["pooled_output", "sequence_output"],
        }
    }


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_pooled_output_cosine_on_fixture_inputs(groups, kind):
    loaded = tf.saved_model.load(str(groups["bundle"].encoder))
    path = groups["bundle"].tflite / TFLITE_FILES[kind]
    cosine = pooled_output_drift(path, loaded, groups["reference"])
    assert cosine >= 0.99
    if kind == "float32":
        assert cosine > 0.99999
        outputs = tflite_runner(path)(groups["reference"])
        np.testing.assert_allclose(
            outputs["pooled_output"], groups["reference"]["pooled_output"], atol=1e-4
        )
    assert groups["bundle"].tflite_report[f"{kind}_pooled_cosine"] >= 0.99


def test_int8_is_at_most_30_percent_of_float_variables(sp_export):
    bundle = sp_export["bundle"]
    variable_bytes = saved_model_variable_bytes(bundle.encoder)
    int8_bytes = (bundle.tflite / TFLITE_FILES["int8"]).stat().st_size
    float_bytes = (bundle.tflite / TFLITE_FILES["float32"]).stat().st_size
    assert int8_bytes <= 0.30 * variable_bytes, (int8_bytes, variable_bytes)
    assert int8_bytes < 0.35 * float_bytes
    assert bundle.tflite_report["int8_bytes"] == int8_bytes
    assert bundle.tflite_report["int8_pooled_cosine"] >= 0.99


def test_batch_is_resized(sp_export):
    run = tflite_runner(sp_export["bundle"].tflite / TFLITE_FILES["float32"])
    for batch in (1, 5):
        inputs = helpers.make_inputs(sp_export["config"], batch=batch, seq=sp_export["seq_length"])
        assert run(inputs)["pooled_output"].shape == (batch, 256)


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_gelu_is_one_operator_per_block_and_the_same_function(sp_export, kind):
    """The tanh GELU reaches the files as TFLite's GELU operator (one XNNPACK pass), once per
    applied block, leaving no tanh but the pooler's; float32 still equals the encoder."""
    path = sp_export["bundle"].tflite / TFLITE_FILES[kind]
    ops = Counter(op["op_name"] for op in _interpreter(path)._get_ops_details())
    config = sp_export["config"]
    assert config.hidden_act == "gelu"
    assert ops["GELU"] == config.num_hidden_layers * config.inner_group_num
    assert ops["TANH"] == 1
    if kind == "float32":
        inputs = helpers.make_inputs(config, batch=3, seq=sp_export["seq_length"])
        expected = sp_export["encoder"](inputs, training=False)
        outputs = tflite_runner(path)(inputs)
        for name in ("pooled_output", "sequence_output"):
            np.testing.assert_allclose(outputs[name], expected[name].numpy(), atol=1e-5)
