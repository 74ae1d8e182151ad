"""TF1 conversion against the original code's outputs, and `albert-tf convert` failures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.cli import main
from albert_tf.config import AlbertConfig
from albert_tf.convert.tf1 import load_tf1_checkpoint, read_tf1_checkpoint
from albert_tf.errors import CheckpointError, ConfigError
from tests import helpers

FIXTURES = ("albert_tf1_tiny", "albert_tf1_groups")


def assert_matches_reference(encoder, mlm_head, sop_head, fixture: Path) -> None:
    """Every output of the original code, within 1e-5."""
    inputs, expected = helpers.fixture_reference(fixture)
    out = encoder(inputs, training=False)
    np.testing.assert_allclose(out["sequence_output"], expected["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], expected["pooled_output"], atol=1e-5)
    assert len(out["encoder_outputs"]) == len(expected["encoder_outputs"])
    for ours, theirs in zip(out["encoder_outputs"], expected["encoder_outputs"], strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    np.testing.assert_allclose(mlm_head(out["sequence_output"]), expected["mlm_logits"], atol=1e-5)
    np.testing.assert_allclose(sop_head(out["pooled_output"]), expected["sop_logits"], atol=1e-5)


def write_tf1_checkpoint(prefix: Path, tensors: dict[str, np.ndarray]) -> Path:
    """A name-based (TF1 Saver format) checkpoint holding `tensors`."""
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=str(prefix),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )
    return prefix


@pytest.mark.parametrize("name", FIXTURES)
def test_tf1_fixture_reproduces_original_outputs(fixtures_dir, name):
    fixture = fixtures_dir / name
    config = AlbertConfig.from_json_file(fixture / "albert_config.json")
    model = load_tf1_checkpoint(fixture / "model.ckpt", config)
    assert_matches_reference(model.encoder, model.mlm_head, model.sop_head, fixture)


def test_convert_cli_writes_a_checkpoint_dir_that_reloads(fixtures_dir, tmp_path, capsys):
    fixture = fixtures_dir / "albert_tf1_groups"
    out = tmp_path / "converted"
    argv = ["convert", "--tf1-checkpoint", str(fixture / "model.ckpt")]
    argv += ["--config", str(fixture / "albert_config.json"), "--output", str(out)]
    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    assert main([*argv, "--sp-model", str(sp_model)]) == 0
    assert str(out) in capsys.readouterr().out
    loaded = load_checkpoint_dir(out)
    assert loaded.config == AlbertConfig.from_json_file(fixture / "albert_config.json")
    assert loaded.sp_model_path.read_bytes() == sp_model.read_bytes()
    assert_matches_reference(loaded.encoder, loaded.mlm_head, loaded.sop_head, fixture)
    assert main(argv) == 2  # exists
    assert "already exists" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert load_checkpoint_dir(out).sp_model_path is None


def test_optimizer_slots_ignored_and_heads_optional(fixtures_dir, tmp_path):
    fixture = fixtures_dir / "albert_tf1_tiny"
    tensors = read_tf1_checkpoint(fixture / "model.ckpt")
    backbone = {k: v for k, v in tensors.items() if not k.startswith("cls/")}
    extra = {"global_step": np.int64(7)}
    for name in list(backbone)[:3]:
        extra[f"{name}/adam_m"] = np.zeros_like(backbone[name])
        extra[f"{name}/adam_v"] = np.zeros_like(backbone[name])
    prefix = write_tf1_checkpoint(tmp_path / "model.ckpt", backbone | extra)
    config = AlbertConfig.from_json_file(fixture / "albert_config.json")
    model = load_tf1_checkpoint(prefix, config)
    assert model.mlm_head is None and model.sop_head is None
    inputs, expected = helpers.fixture_reference(fixture)
    out = model.encoder(inputs, training=False)
    np.testing.assert_allclose(out["sequence_output"], expected["sequence_output"], atol=1e-5)


def _convert(fixtures_dir, tmp_path, capsys, config: dict, tensors=None) -> tuple[int, str]:
    """Runs `albert-tf convert` on the tiny fixture (or `tensors`) with config `config`."""
    fixture = fixtures_dir / "albert_tf1_tiny"
    checkpoint = fixture / "model.ckpt"
    if tensors is not None:
        checkpoint = write_tf1_checkpoint(tmp_path / "model.ckpt", tensors)
    config_path = tmp_path / "albert_config.json"
    config_path.write_text(json.dumps(config))
    argv = ["convert", "--tf1-checkpoint", str(checkpoint), "--config", str(config_path)]
    code = main([*argv, "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    return code, err


def _fixture_config(fixtures_dir) -> dict:
    return json.loads((fixtures_dir / "albert_tf1_tiny" / "albert_config.json").read_text())


@pytest.mark.parametrize(
    "change, message",
    [
        ({"not_a_key": 1}, "unknown config key(s): not_a_key"),
        ({"num_attention_heads": 5}, "not divisible"),
        ({"num_hidden_groups": 5}, "exceeds"),
        (
            {"intermediate_size": 48},
            "variable bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/"
            "kernel has shape [32, 64] but the config needs [32, 48]",
        ),
        ({"num_hidden_groups": 2}, "missing variable(s) for encoder/transformer/group_1/"),
    ],
)
def test_bad_config_one_line_exit_2(fixtures_dir, tmp_path, capsys, change, message):
    code, err = _convert(fixtures_dir, tmp_path, capsys, _fixture_config(fixtures_dir) | change)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and err.startswith("albert-tf convert: error:")


def test_missing_and_unexpected_variables(fixtures_dir, tmp_path, capsys):
    tensors = read_tf1_checkpoint(fixtures_dir / "albert_tf1_tiny" / "model.ckpt")
    config = _fixture_config(fixtures_dir)
    missing = {k: v for k, v in tensors.items() if k != "bert/pooler/dense/bias"}
    code, err = _convert(fixtures_dir, tmp_path, capsys, config, missing)
    assert code == 2 and "missing variable(s) for encoder/pooler/dense/bias" in err
    config = AlbertConfig.from_dict(config)
    unexpected = tensors | {"bert/encoder/mystery": np.zeros(3, np.float32)}
    with pytest.raises(CheckpointError, match="bert/encoder/mystery"):
        load_tf1_checkpoint(write_tf1_checkpoint(tmp_path / "u.ckpt", unexpected), config)
    stray = tensors | {"other/weights": np.zeros(3, np.float32)}
    with pytest.raises(CheckpointError, match="unexpected variable.*other/weights"):
        load_tf1_checkpoint(write_tf1_checkpoint(tmp_path / "s.ckpt", stray), config)


def test_missing_checkpoint_and_hf_dir_without_safetensors(fixtures_dir, tmp_path, capsys):
    config = str(fixtures_dir / "albert_tf1_tiny" / "albert_config.json")
    out = str(tmp_path / "out")
    code = main(
        ["convert", "--tf1-checkpoint", str(tmp_path / "nope"), "--config", config, "--output", out]
    )
    assert code == 2 and "not found" in capsys.readouterr().err
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "albert"}))
    assert main(["convert", "--hf-checkpoint", str(hf), "--output", out]) == 2
    err = capsys.readouterr().err
    assert "has no model.safetensors" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


# === Hugging Face layout, without torch: the TF1 fixture rewritten as HF safetensors ===

HF_KEYS = [
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias",
    "encoder.embedding_hidden_mapping_in.weight",
    "encoder.embedding_hidden_mapping_in.bias",
    "pooler.weight",
    "pooler.bias",
    *[
        f"encoder.albert_layer_groups.{{g}}.albert_layers.{{i}}.{part}.{kind}"
        for part in (
            "attention.query",
            "attention.key",
            "attention.value",
            "attention.dense",
            "attention.LayerNorm",
            "ffn",
            "ffn_output",
            "full_layer_layer_norm",
        )
        for kind in ("weight", "bias")
    ],
]
HEAD_KEYS = [
    "predictions.dense.weight",
    "predictions.dense.bias",
    "predictions.LayerNorm.weight",
    "predictions.LayerNorm.bias",
    "predictions.bias",
    "sop_classifier.classifier.weight",
    "sop_classifier.classifier.bias",
]


def write_hf_dir(fixture: Path, directory: Path, prefix: str = "albert.") -> None:
    """The TF1 fixture's weights under HF names ([out, in] linear weights), with config.json."""
    from safetensors.numpy import save_file

    from albert_tf.convert.hf import target_of
    from albert_tf.convert.tf1 import PREFIXES

    config = json.loads((fixture / "albert_config.json").read_text())
    ours = {}
    for name, array in read_tf1_checkpoint(fixture / "model.ckpt").items():
        for source, target in PREFIXES:
            if name.startswith(source):
                ours[target + name[len(source) :]] = array
    blocks = [
        (g, i) for g in range(config["num_hidden_groups"]) for i in range(config["inner_group_num"])
    ]
    keys = {key.format(g=g, i=i) for key in HF_KEYS for g, i in blocks} | set(HEAD_KEYS)
    tensors = {}
    for key in keys:
        name, transpose = target_of(key)
        array = ours[name]
        tensors[("" if key.startswith(("predictions", "sop")) else prefix) + key] = (
            np.ascontiguousarray(array.T if transpose else array)
        )
    tensors["predictions.decoder.weight"] = tensors[prefix + "embeddings.word_embeddings.weight"]
    directory.mkdir()
    save_file(tensors, str(directory / "model.safetensors"))
    act = {"gelu": "gelu_new", "relu": "relu"}[config["hidden_act"]]
    hf_config = config | {"model_type": "albert", "hidden_act": act, "layer_norm_eps": 1e-12}
    (directory / "config.json").write_text(json.dumps(hf_config))


@pytest.mark.parametrize("name", FIXTURES)
def test_hf_layout_of_the_tf1_fixture_reproduces_original_outputs(fixtures_dir, tmp_path, name):
    from albert_tf.convert.hf import load_hf_checkpoint

    write_hf_dir(fixtures_dir / name, tmp_path / "hf")
    model = load_hf_checkpoint(tmp_path / "hf")
    assert_matches_reference(model.encoder, model.mlm_head, model.sop_head, fixtures_dir / name)


def test_hf_failures(fixtures_dir, tmp_path):
    from albert_tf.convert.hf import config_from_hf, load_hf_checkpoint

    base = json.loads((fixtures_dir / "albert_tf1_tiny" / "albert_config.json").read_text())
    assert config_from_hf(base | {"hidden_act": "gelu"}).hidden_act == "gelu_exact"
    assert config_from_hf(base | {"hidden_act": "gelu_new"}).hidden_act == "gelu"
    with pytest.raises(ConfigError, match="hidden_act 'quick_gelu'"):
        config_from_hf(base | {"hidden_act": "quick_gelu"})
    with pytest.raises(ConfigError, match="layer_norm_eps"):
        config_from_hf(base | {"layer_norm_eps": 1e-5})
    with pytest.raises(ConfigError, match="assign layers to groups differently"):
        config_from_hf(base | {"num_hidden_layers": 22, "num_hidden_groups": 22})
    write_hf_dir(fixtures_dir / "albert_tf1_tiny", tmp_path / "hf")
    (tmp_path / "hf" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="model.safetensors is corrupt or unreadable"):
        load_hf_checkpoint(tmp_path / "hf")
