"""TFLite encoders (float32 and dynamic-range int8): names, size, drift against the SavedModel."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export.tflite import TFLITE_FILES, pooled_output_drift, saved_model_variable_bytes
from albert_tf.runtimes import tflite_runner
from tests import helpers

pytestmark = pytest.mark.slow

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


def test_a_fine_tuned_classifier_exports_to_tflite_as_serving_computes(tmp_path, fixtures_dir):
    """`export --finetuned DIR --tflite`: token ids in, serving/'s probabilities out (float32
    within 1e-4, int8 the same labels), the labels and tokenizer beside the files; a second
    export refuses to replace tflite/; a task the files cannot compute is one line, exit 2."""
    import json
    from types import SimpleNamespace

    import tensorflow_text  # noqa: F401  (serving/'s tokenizer ops)

    from albert_tf.cli import main
    from albert_tf.errors import ExportError
    from albert_tf.export.tflite import CLASSIFIER_FILES, check_tflite_classifier, classifier_inputs
    from albert_tf.finetune.predict import load_finetuned

    rows = [(f"the film {w} was {m}", label) for w, m, label in [("plot", "great", "pos"),
            ("cast", "awful", "neg")] * 12]  # fmt: skip
    (tmp_path / "train.tsv").write_text(
        "sentence1\tsentence2\tlabel\n" + "".join(f"{t}\tit felt so\t{y}\n" for t, y in rows)
    )
    model = tmp_path / "model"
    args = ["finetune", "--task", "classify", "--train", str(tmp_path / "train.tsv")]
    args += ["--init", "random", "--config", str(helpers.write_config(tmp_path))]
    args += ["--sp-model", str(fixtures_dir / "tokenizer" / "spm.model"), "--output", str(model)]
    args += ["--epochs", "1", "--max-seq-length", "16", "--dtype", "float32", "--quiet"]
    assert main(args) == 0
    assert main(["export", "--finetuned", str(model), "--tflite"]) == 0
    folder = model / "tflite"
    assert (folder / "labels.txt").read_text().split() == ["neg", "pos"]
    assert (folder / "spm.model").read_bytes() == (model / "spm.model").read_bytes()

    texts, pairs = ["the plot was great", "awful", ""], ["it felt great", "", "x"]
    inputs = classifier_inputs(load_finetuned(model).tokenizer, texts, pairs, 16)
    assert inputs["input_type_ids"].sum() > 0  # the pair is segment 1
    serving = tf.saved_model.load(str(model / "serving")).signatures["serving_default"]
    want = serving(text=tf.constant(texts), text_pair=tf.constant(pairs))["probabilities"].numpy()
    for kind, name in CLASSIFIER_FILES.items():
        got = tflite_runner(folder / name)(inputs)
        np.testing.assert_array_equal(got["probabilities"].argmax(-1), want.argmax(-1))
        atol = 1e-4 if kind == "float32" else 2e-2
        np.testing.assert_allclose(got["probabilities"], want, atol=atol, err_msg=name)
        np.testing.assert_allclose(got["probabilities"], tf.nn.softmax(got["logits"]), atol=1e-6)
        # Two short rows padded to their longest only: the same outputs (padding is masked).
        longest = int(inputs["input_mask"][1:].sum(axis=1).max())
        assert longest < 16
        cut = tflite_runner(folder / name)({k: v[1:, :longest] for k, v in inputs.items()})
        np.testing.assert_allclose(cut["probabilities"], got["probabilities"][1:], atol=1e-6)
    report = json.loads((folder / "report.json").read_text())
    assert report["against_serving"][CLASSIFIER_FILES["float32"]]["label_agreement"] == 1.0
    assert report["seq_length"] == 16 and report["labels"] == ["neg", "pos"]

    assert main(["export", "--finetuned", str(model), "--tflite"]) == 2
    metadata = json.loads((model / "finetune.json").read_text())
    metadata["task"] = metadata["settings"]["task"] = "regress"  # finetune.json's record
    (model / "finetune.json").write_text(json.dumps(metadata))
    with pytest.raises(ExportError, match="classify tasks of one window per text"):
        check_tflite_classifier(SimpleNamespace(finetuned_dir=model))
