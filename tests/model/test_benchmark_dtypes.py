"""bfloat16 accuracy on the original ALBERT fixtures, and what `--dtype auto` resolves to."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import tf_keras as keras

from albert_tf import dtypes
from albert_tf.config import AlbertConfig
from albert_tf.convert.tf1 import load_tf1_checkpoint
from tests import helpers


@pytest.mark.parametrize("name", ["albert_tf1_tiny", "albert_tf1_groups"])
def test_bfloat16_outputs_within_tolerance_of_original(fixtures_dir: Path, name: str):
    fixture = fixtures_dir / name
    config = AlbertConfig.from_json_file(fixture / "albert_config.json")
    inputs, data = helpers.fixture_reference(fixture)
    with helpers.mixed_precision("mixed_bfloat16"):
        model = load_tf1_checkpoint(fixture / "model.ckpt", config)
    assert model.encoder.compute_dtype == "bfloat16"
    assert keras.mixed_precision.global_policy().name == "float32"
    out = model.encoder(inputs, training=False)
    helpers.assert_bfloat16_close(out["sequence_output"], data["sequence_output"])
    helpers.assert_bfloat16_close(out["pooled_output"], data["pooled_output"])
    for ours, theirs in zip(out["encoder_outputs"], data["encoder_outputs"], strict=True):
        helpers.assert_bfloat16_close(ours, theirs)
    mlm_logits = model.mlm_head(out["sequence_output"])
    helpers.assert_bfloat16_close(mlm_logits, data["mlm_logits"])
    helpers.assert_bfloat16_close(model.sop_head(out["pooled_output"]), data["sop_logits"])
    # The predictions a user sees agree: masked-LM top-1 on at least 95% of positions.
    agree = np.argmax(mlm_logits, -1) == np.argmax(data["mlm_logits"], -1)
    assert agree.mean() >= 0.95


def _cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 avx2 {flags}\n\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("avx512f avx512_bf16", "bfloat16"),
        ("amx_tile amx_bf16", "bfloat16"),
        ("avx512f", "float32"),
    ],
)
def test_auto_dtype_on_cpu_follows_bf16_flags(tmp_path, monkeypatch, flags, expected):
    cpuinfo = _cpuinfo(tmp_path, flags)
    original = dtypes.cpu_supports_bfloat16
    monkeypatch.setattr(dtypes, "cpu_supports_bfloat16", lambda: original(cpuinfo))
    assert dtypes.resolve_dtype("auto", "CPU") == expected
    assert dtypes.resolve_dtype("float32", "CPU") == "float32"


def test_auto_dtype_is_what_the_benchmark_runs(monkeypatch):
    from albert_tf.commands import benchmark

    seen = {}

    def fake_run(options, progress=None):
        seen["dtypes"] = options.dtypes
        return {"meta": {}, "records": []}

    monkeypatch.setattr(benchmark, "run_benchmark", fake_run)
    monkeypatch.setattr(dtypes, "cpu_supports_bfloat16", lambda: True)
    parser = argparse.ArgumentParser()
    benchmark.add_arguments(parser)
    assert benchmark.run(parser.parse_args(["--tiny"])) == 0
    assert seen["dtypes"] == ("bfloat16",)
    monkeypatch.setattr(dtypes, "cpu_supports_bfloat16", lambda: False)
    assert benchmark.run(parser.parse_args(["--tiny"])) == 0
    assert seen["dtypes"] == ("float32",)
    assert benchmark.run(parser.parse_args(["--tiny", "--dtype", "all"])) == 0
    assert seen["dtypes"] == ("float32", "bfloat16", "int8")  # all: every dtype, int8 included
