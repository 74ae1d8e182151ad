"""Damaged checkpoint files given to `export` and `convert`: one line naming the file, exit 2.

Each case asserts exit code 2, exactly one line on stderr (TF's own logging included, so the
file descriptor is captured) that names the damaged file, no traceback, and no output written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from albert_tf.cli import main
from tests.helpers import one_error_line, overwrite_mid_file, truncate

DATA = "ckpt-1.data-00000-of-00001"


def _remove(path: Path) -> None:
    path.unlink()


# (damaged file, damage, what the line says about it)
CASES = [
    (DATA, overwrite_mid_file, "is corrupt or unreadable: Checksum does not match"),
    (DATA, truncate, "is corrupt or unreadable"),
    (DATA, _remove, "is corrupt or unreadable"),
    ("ckpt-1.index", overwrite_mid_file, "is corrupt or unreadable"),
    ("ckpt-1.index", truncate, "is corrupt or unreadable"),
    ("ckpt-1.index", _remove, "does not exist"),
    ("checkpoint", lambda path: path.write_bytes(b"garbage\x00\x01"), "is corrupt"),
]


def _fails_naming(capfd, argv: list[str], output: Path, expected: str) -> str:
    """`albert-tf ARGV --output OUTPUT` exits 2 with one error line holding `expected` and
    writes nothing; returns the line."""
    assert main([*argv, "--output", str(output)]) == 2
    line = one_error_line(capfd.readouterr().err, argv[0])
    assert expected in line, line
    assert not output.exists()
    return line


@pytest.mark.slow
@pytest.mark.parametrize(("name", "damage", "message"), CASES)
def test_export_names_the_damaged_file(groups, tmp_path, capfd, name, damage, message):
    checkpoint = tmp_path / "checkpoint_dir"
    shutil.copytree(groups["checkpoint"], checkpoint)
    damage(checkpoint / name)
    argv = ["export", "--checkpoint", str(checkpoint)]
    line = _fails_naming(capfd, argv, tmp_path / "out", str(checkpoint / name))
    assert message in line and "albert_config.json" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_dir"]


@pytest.mark.slow
def test_export_config_mismatch_is_one_line(groups, tmp_path, capfd):
    checkpoint = tmp_path / "checkpoint_dir"
    shutil.copytree(groups["checkpoint"], checkpoint)
    config = json.loads((checkpoint / "albert_config.json").read_text())
    config.update(hidden_size=64, intermediate_size=128)
    (checkpoint / "albert_config.json").write_text(json.dumps(config))
    argv = ["export", "--checkpoint", str(checkpoint)]
    expected = "does not match albert_config.json: Received incompatible tensor"
    _fails_naming(capfd, argv, tmp_path / "out", expected)


@pytest.mark.slow
def test_export_from_hub_names_the_damaged_variables(groups, tmp_path, capfd):
    encoder = tmp_path / "encoder"
    shutil.copytree(groups["bundle"].encoder, encoder)
    (data,) = (encoder / "variables").glob("variables.data-*")
    overwrite_mid_file(data)
    argv = ["export", "--from-hub", str(encoder)]
    _fails_naming(capfd, argv, tmp_path / "out", f"checkpoint file {data} is corrupt")


def test_convert_tf1_names_the_damaged_file(fixtures_dir, tmp_path, capfd):
    source = fixtures_dir / "albert_tf1_groups"
    for path in source.glob("model.ckpt.*"):
        shutil.copy(path, tmp_path)
    (data,) = tmp_path.glob("model.ckpt.data-*")
    overwrite_mid_file(data)
    argv = ["convert", "--tf1-checkpoint", str(tmp_path / "model.ckpt")]
    argv += ["--config", str(source / "albert_config.json")]
    expected = f"checkpoint file {data} is corrupt or unreadable: Checksum does not match"
    _fails_naming(capfd, argv, tmp_path / "out", expected)


def test_convert_hf_names_the_damaged_file(tmp_path, capfd):
    from safetensors.numpy import save_file

    hf = tmp_path / "hf"
    hf.mkdir()
    config = dict(model_type="albert", vocab_size=97, embedding_size=16, hidden_size=32)
    (hf / "config.json").write_text(json.dumps(config))
    weights = hf / "model.safetensors"
    save_file({"embeddings.word_embeddings.weight": np.zeros((97, 16), np.float32)}, weights)
    truncate(weights)
    argv = ["convert", "--hf-checkpoint", str(hf)]
    _fails_naming(capfd, argv, tmp_path / "out", f"checkpoint file {weights} is corrupt")
