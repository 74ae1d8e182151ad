"""`albert-tf export`: bundle layout, packaged assets, no leaked paths, bad input, hub -> checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the preprocessing SavedModel's ops)

from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.cli import main
from albert_tf.config import AlbertConfig
from tests import helpers

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _run(capsys, *argv):
    code = main(["export", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("albert-tf export: error: ")
    return lines[0]


def _leftovers(parent, name):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}.tmp-"))


@pytest.mark.slow
def test_bundle_layout(sp_export, groups):
    bundle = sp_export["bundle"]
    assert sorted(p.name for p in bundle.output_dir.iterdir()) == [
        "encoder",
        "preprocess",
        "tflite",
    ]
    assert bundle.has_mlm
    assert not _leftovers(bundle.output_dir.parent, bundle.output_dir.name)
    # No SentencePiece model in the converted fixture checkpoint: encoder (and TFLite) only.
    assert sorted(p.name for p in groups["bundle"].output_dir.iterdir()) == ["encoder", "tflite"]
    assert groups["bundle"].preprocess is None


@pytest.mark.slow
def test_assets_packaged_after_sources_deleted(sp_export):
    assert not sp_export["checkpoint"].exists()
    loaded = tf.saved_model.load(str(sp_export["bundle"].encoder))
    sp_path = loaded.sp_model_file.asset_path.numpy().decode()
    assert sp_path.startswith(str(sp_export["bundle"].encoder / "assets"))
    with open(sp_path, "rb") as f:
        assert f.read() == sp_export["sp_model_bytes"]
    config_path = loaded.albert_config_file.asset_path.numpy().decode()
    assert AlbertConfig.from_json_file(config_path) == sp_export["config"]
    inputs = helpers.make_inputs(sp_export["config"])
    np.testing.assert_allclose(
        loaded(inputs)["pooled_output"],
        sp_export["encoder"](inputs, training=False)["pooled_output"],
        atol=1e-6,
    )
    preprocess = tf.saved_model.load(str(sp_export["bundle"].preprocess))
    assert preprocess(tf.constant(["a charming film."]))["input_word_ids"].shape == (1, 32)


@pytest.mark.slow
def test_no_temporary_or_source_paths_in_saved_models(sp_export, groups, tmp_path_factory):
    for bundle in (sp_export["bundle"], groups["bundle"]):
        for part in (bundle.encoder, bundle.preprocess):
            if part is None:
                continue
            graph = (part / "saved_model.pb").read_bytes()
            assert b".tmp-" not in graph
            assert b"albert-export-assets-" not in graph
            assert str(tmp_path_factory.getbasetemp()).encode() not in graph
            assert b"/tmp/" not in graph


@pytest.mark.slow
def test_training_functions_keep_plain_ops(sp_export):
    # training=True is traced (serve_training, hub.KerasLayer(trainable=True)) without the
    # training step's XLA-compiled kernels (layers/compiled.py), which a SavedModel should not
    # depend on; its LayerNorm and GELU are plain ops.
    graph = (sp_export["bundle"].encoder / "saved_model.pb").read_bytes()
    for name in (b"_layer_norm_forward", b"_bias_gelu_forward", b"_XlaMustCompile"):
        assert name not in graph


@pytest.mark.slow
def test_no_keras_layers_serialized(groups):
    # The SavedModel holds tf.functions, not Keras layers: nothing a Lambda could hide in.
    encoder = groups["bundle"].encoder
    assert not (encoder / "keras_metadata.pb").exists()
    assert b"Lambda" not in (encoder / "saved_model.pb").read_bytes()


@pytest.mark.slow
def test_exposes_reusable_saved_model_attributes(groups):
    loaded = tf.saved_model.load(str(groups["bundle"].encoder))
    source = groups["source"]
    assert len(loaded.variables) == len(source.encoder.variables)
    assert len(loaded.trainable_variables) == len(source.encoder.trainable_variables)
    assert list(loaded.regularization_losses) == []
    mlm_only = len(loaded.mlm.variables) - len(loaded.variables)
    assert mlm_only == 5  # transform dense kernel, bias; LayerNorm gamma, beta; output_bias
    assert sorted(loaded.signatures) == ["serving_default"]


@pytest.mark.slow
def test_hub_to_checkpoint_dir_round_trip(groups, tmp_path, capsys):
    output = tmp_path / "from_hub"
    code, out, err = _run(
        capsys, "--from-hub", str(groups["bundle"].encoder), "--output", str(output)
    )
    assert code == 0, err
    restored = load_checkpoint_dir(output)
    assert restored.config == groups["source"].config
    assert restored.mlm_head is not None
    reference = groups["reference"]
    inputs = {name: tf.constant(reference[name]) for name in ENCODER_INPUTS}
    outputs = restored.encoder(inputs, training=False)
    np.testing.assert_allclose(outputs["pooled_output"], reference["pooled_output"], atol=1e-5)
    logits = restored.mlm_head(outputs["sequence_output"])
    np.testing.assert_allclose(logits, reference["mlm_logits"], atol=1e-5)


def test_from_hub_refuses_a_directory_that_is_no_export(tmp_path, capsys):
    code, _, err = _run(capsys, "--from-hub", str(tmp_path), "--output", str(tmp_path / "out"))
    assert code == 2
    assert "no assets/albert_config.json" in _error_line(err)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_preprocess_only_export_and_overwrite(tmp_path, fixtures_dir, capsys):
    output = tmp_path / "bundle"
    output.mkdir()
    (output / "keep.txt").write_text("old")
    sp_model = str(fixtures_dir / "tokenizer" / "spm.model")
    code, _, err = _run(capsys, "--sp-model", sp_model, "--output", str(output))
    assert code == 2
    assert "already exists" in _error_line(err)
    assert (output / "keep.txt").read_text() == "old"
    code, out, err = _run(
        capsys,
        "--sp-model",
        sp_model,
        "--output",
        str(output),
        "--max-seq-length",
        "24",
        "--overwrite",
    )
    assert code == 0, err
    assert sorted(p.name for p in output.iterdir()) == ["preprocess"]
    preprocess = tf.saved_model.load(str(output / "preprocess"))
    assert preprocess(tf.constant(["hello world"]))["input_word_ids"].shape == (1, 24)
    assert not _leftovers(tmp_path, "bundle")


def test_checkpoint_without_config(tmp_path, capsys):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "checkpoint").write_text("")
    output = tmp_path / "out"
    code, _, err = _run(capsys, "--checkpoint", str(checkpoint), "--output", str(output))
    assert code == 2
    assert "albert_config.json" in _error_line(err)
    assert not output.exists() and not _leftovers(tmp_path, "out")


@pytest.mark.slow
def test_sp_vocab_size_mismatch(groups, tmp_path, fixtures_dir, capsys):
    output = tmp_path / "out"
    sp_model = str(fixtures_dir / "tokenizer" / "spm.model")
    code, _, err = _run(
        capsys,
        "--checkpoint",
        str(groups["checkpoint"]),
        "--sp-model",
        sp_model,
        "--output",
        str(output),
    )
    assert code == 2
    line = _error_line(err)
    assert "1000 pieces" in line and "vocab_size 97" in line
    assert not output.exists() and not _leftovers(tmp_path, "out")


@pytest.mark.slow
def test_unwritable_output(groups, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a directory")
    output = blocker / "out"
    argv = [
        "--checkpoint",
        str(groups["checkpoint"]),
        "--max-seq-length",
        "16",
        "--output",
        str(output),
    ]
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert str(blocker) in _error_line(err)
    assert blocker.read_text() == "a file, not a directory"


@pytest.mark.slow
def test_argument_errors(groups, tmp_path, capsys):
    output = str(tmp_path / "out")
    cases = [
        ((), "nothing to export"),
        (("--checkpoint", str(groups["checkpoint"]), "--tflite"), "(of TFLite) exceeds"),
        (("--sp-model", str(tmp_path), "--max-seq-length", "0"), "must be positive"),
        (("--sp-model", str(tmp_path / "missing.model")), "does not exist"),
        (("--from-hub", str(groups["bundle"].encoder), "--tflite"), "cannot be combined"),
    ]
    for argv, message in cases:
        code, _, err = _run(capsys, *argv, "--output", output)
        assert code == 2, argv
        assert message in _error_line(err), err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_encoder_alone_has_no_sequence_length(groups, tmp_path, capsys):
    # max_position_embeddings 64, the default --seq-length 128 and no SentencePiece model: only
    # encoder/ is written: nothing in it has a sequence length.
    assert groups["source"].config.max_position_embeddings < 128
    output = tmp_path / "out"
    code, out, err = _run(
        capsys, "--checkpoint", str(groups["checkpoint"]), "--output", str(output)
    )
    assert code == 0, err
    assert sorted(p.name for p in output.iterdir()) == ["encoder"]
    assert f"wrote {output / 'encoder'}" in out


@pytest.mark.slow
def test_tflite_report_written(groups):
    report_file = groups["bundle"].tflite / "report.json"
    assert json.loads(report_file.read_text()) == groups["bundle"].tflite_report
