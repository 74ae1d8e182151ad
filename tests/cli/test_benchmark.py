"""`albert-tf benchmark`: FLOP counts, job planning, records and table, and a tiny smoke run.

No timing assertions: speed is measured by the benchmark itself, not by tests.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from albert_tf.benchmarking.cases import (
    Shape,
    benchmark_config,
    case_shape,
    forward_flops,
    step_flops,
)
from albert_tf.benchmarking.machine import cpu_description, onednn_enabled
from albert_tf.benchmarking.runner import (
    BenchmarkOptions,
    build_records,
    machine_line,
    merge_rounds,
    plan_jobs,
    render_table,
)
from albert_tf.cli import main
from albert_tf.config import PRESETS
from albert_tf.environment import cpu_flags, given_environment, onednn_choice
from tests import helpers
from tests.conftest import REPO

RECORD_KEYS = {"system", "dtype", "case", "metric", "value", "unit", "ratio_to_ours"}


def test_forward_flops_of_albert_base():
    config = PRESETS["base"]
    # Per token and layer: QKV + output (4 H^2) and FFN (2 H F) multiply-adds, 4 S H attention.
    per_layer = 2 * (4 * 768**2 + 2 * 768 * 3072) + 4 * 128 * 768
    per_token = 2 * 128 * 768 + 12 * per_layer
    assert forward_flops(config, Shape(1, 128)) == 128 * per_token + 2 * 768**2
    heads = 20 * (2 * 768 * 128 + 2 * 128 * 30000) + 2 * 768 * 2
    assert forward_flops(config, Shape(2, 128, 20)) == 2 * (128 * per_token + 2 * 768**2 + heads)


def test_plan_measures_hf_bf16_both_ways_and_skips_unsupported():
    options = BenchmarkOptions(cases=("inference", "train"), dtypes=("bfloat16",))
    jobs = plan_jobs(options, ("tfm", "hf", "kerashub"))
    keys = [(j["system"], j["case"], j.get("hf_bf16")) for j in jobs]
    assert ("hf", "inference", "cast") in keys and ("hf", "inference", "autocast") in keys
    assert ("hf", "train", "best") in keys
    assert not any(s == "kerashub" and c == "train" for s, c, _ in keys)
    assert all(j["iters"] == 5 and j["warmup"] == 2 for j in jobs)
    matmul = plan_jobs(BenchmarkOptions(cases=("matmul",), dtypes=("float32",)), ())
    assert [(j["system"], j["iters"]) for j in matmul] == [("tensorflow", 20)]
    latency = plan_jobs(BenchmarkOptions(cases=("latency",), dtypes=("float32",)), ("tfm",))
    assert [(j["system"], j["iters"]) for j in latency] == [("ours", 100), ("tfm", 100)]
    fewer = BenchmarkOptions(cases=("latency", "matmul"), dtypes=("float32",), latency_iters=7)
    assert {j["case"]: j["iters"] for j in plan_jobs(fewer, ())} == dict(latency=7, matmul=20)


def _result(system, case, seconds, dtype="bfloat16", mib=100.0):
    return dict(
        system=system,
        dtype=dtype,
        case=case,
        times=[seconds] * 3,
        peak_rss_delta_mib=mib,
        note="",
        error=None,
    )


def test_records_ratios_mfu_and_table():
    results = [
        _result("tensorflow", "matmul", 0.1),
        _result("ours", "inference", 1.0, mib=50.0),
        _result("tfm", "inference", 2.0),
        _result("ours", "latency", 0.05),
        _result("tfm", "latency", 0.1),
        dict(_result("hf", "inference", 0.0), times=[], error="RuntimeError: boom"),
    ]
    records = build_records(results, tiny=False)
    assert all(set(r) >= RECORD_KEYS for r in records)
    index = {(r["system"], r["case"], r["metric"]): r for r in records}
    ours, tfm = index["ours", "inference", "throughput"], index["tfm", "inference", "throughput"]
    assert ours["value"] == pytest.approx(32 * 128) and ours["unit"] == "tokens/s"
    assert ours["ratio_to_ours"] == 1.0 and tfm["ratio_to_ours"] == pytest.approx(0.5)
    assert index["tfm", "latency", "latency"]["value"] == pytest.approx(100.0)
    assert index["tfm", "inference", "peak_rss_delta"]["ratio_to_ours"] == pytest.approx(2.0)
    matmul = index["tensorflow", "matmul", "throughput"]
    assert matmul["value"] == pytest.approx(2 * 4096 * 768 * 3072 / 0.1 / 1e9)
    assert matmul["ratio_to_ours"] is None
    config = benchmark_config(tiny=False)
    expected_mfu = (
        100 * forward_flops(config, case_shape("inference", False)) / (matmul["value"] * 1e9)
    )
    assert index["ours", "inference", "mfu"]["value"] == pytest.approx(expected_mfu)
    assert index["hf", "inference", "throughput"]["error"] == "RuntimeError: boom"

    table = render_table({"records": records})
    assert (
        "| inference 32x128 | throughput [tokens/s] | bfloat16 | 4,096 | 2,048 (ours 2.00x)"
        in table
    )
    assert "| latency 1x128 | latency [ms] | bfloat16 | 50.0 | 100 (ours 2.00x)" in table
    assert "HF transformers (torch) bfloat16 inference: RuntimeError: boom" in table


def test_rounds_pool_each_jobs_steps():
    rounds = [
        _result("ours", "inference", 1.0, mib=50.0),
        dict(_result("hf", "inference", 2.0), note="model.to(bfloat16)"),
        dict(_result("hf", "inference", 3.0), note="torch.autocast bfloat16"),
        _result("ours", "inference", 4.0, mib=70.0),
        dict(_result("hf", "inference", 5.0), note="model.to(bfloat16)"),
        dict(_result("hf", "inference", 0.0), times=[], error="worker timed out after 9s"),
    ]
    merged = {(r["system"], r["note"]): r for r in merge_rounds(rounds)}
    assert len(merged) == 4
    assert merged["ours", ""]["times"] == [1.0] * 3 + [4.0] * 3
    assert merged["ours", ""]["peak_rss_delta_mib"] == 70.0
    assert merged["hf", "model.to(bfloat16)"]["times"] == [2.0] * 3 + [5.0] * 3
    assert merged["hf", "torch.autocast bfloat16"]["times"] == [3.0] * 3
    assert merged["hf", ""]["error"] == "worker timed out after 9s"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cases", "inference,warp"], "unknown case 'warp'"),
        (["--peers", "jax"], "unknown peer 'jax'"),
        (["--iters", "0"], "--iters must be >= 1"),
        (["--rounds", "0"], "--rounds must be >= 1"),
    ],
)
def test_bad_arguments_one_line_exit_2(argv, message, capsys):
    assert main(["benchmark", "--tiny", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("albert-tf benchmark: error:") and message in err[-1]


def test_tiny_benchmark_writes_records(tmp_path, capsys):
    out = tmp_path / "results" / "bench.json"
    argv = ["benchmark", "--tiny", "--dtype", "bfloat16", "--peers", "tfm", "--onednn-off-path"]
    argv += ["--cases", "inference,latency,train,matmul", "--json", str(out)]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    records = result["records"]
    assert all(set(r) >= RECORD_KEYS for r in records)
    assert not [r for r in records if r["error"]]
    seen = {(r["system"], r["dtype"], r["case"], r["metric"]) for r in records}
    assert ("tensorflow", "bfloat16", "matmul", "throughput") in seen
    for system in ("ours", "tfm"):
        for case in ("inference", "latency", "train"):
            for metric in ("throughput", "mfu", "peak_rss_delta"):
                assert (system, "bfloat16", case, metric) in seen
    assert all(r["value"] > 0 for r in records if r["metric"] in ("throughput", "mfu"))
    assert result["meta"]["config"]["hidden_size"] == 32
    # Every figure says what it ran on: the CPU's flags, and oneDNN per system.
    assert result["meta"]["machine"] == cpu_description()
    # On the oneDNN-off path TensorFlow peers run without oneDNN, ours as albert-tf runs.
    choice = onednn_choice(given_environment(), cpu_flags())
    ours_on = onednn_enabled() if choice is None else choice not in ("0", "false", "off")
    onednn = {(r["system"], r["onednn"]) for r in records if r["metric"] == "throughput"}
    assert onednn == {("ours", ours_on), ("tfm", False), ("tensorflow", False)}
    out = capsys.readouterr().out
    assert "| train 2x16 | throughput [examples/s] | bfloat16 |" in out
    on = "on" if ours_on else "off"
    machine = next(line for line in out.splitlines() if line.startswith("CPU: "))
    assert f"albert-tf (ours) {on}" in machine and "tf-models-official off" in machine
    assert "oneDNN-off path" in machine and result["meta"]["onednn_off_path"]


def test_machine_line_names_flags_cores_and_onednn_per_system():
    records = [
        {"system": "ours", "onednn": False},
        {"system": "hf", "onednn": True},
        {"system": "ours", "onednn": False},
    ]
    meta = {"machine": {"model": "AMD EPYC", "flags": ["avx2", "fma"], "cores": 2}}
    line = machine_line({"meta": meta, "records": records})
    assert line == (
        "CPU: AMD EPYC, 2 cores; AVX2 FMA (no AVX512F AVX512_VNNI AVX_VNNI AVX512_BF16 AMX_TILE "
        "AMX_BF16 AMX_INT8). int8 dot-product instructions: none (no VNNI, no AMX). "
        "oneDNN: albert-tf (ours) off, HF transformers (torch) on."
    )


@pytest.mark.parametrize(
    ("make", "extra", "message"),
    [
        (lambda p: p.write_text("mine"), [], "already exists (pass --overwrite"),
        (lambda p: p.mkdir(), ["--overwrite"], "is a directory"),
        (lambda p: p.parent.rmdir() or p.parent.write_text("mine"), [], "is not a directory"),
    ],
)
def test_json_output_checked_before_benchmarking(tmp_path, capsys, make, extra, message):
    target = tmp_path / "parent" / "bench.json"
    target.parent.mkdir()
    make(target)
    before = sorted((p.name, p.is_dir()) for p in tmp_path.rglob("*"))
    assert main(["benchmark", "--tiny", "--json", str(target), *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing was benchmarked
    line = helpers.one_error_line(captured.err, "benchmark")
    assert message in line
    assert str(target.parent if "not a directory" in message else target) in line
    assert sorted((p.name, p.is_dir()) for p in tmp_path.rglob("*")) == before


@pytest.mark.slow
def test_training_step_profile_smoke(tmp_path):
    """benchmarks/profile_train_step.py on the tiny config: every part is reported, the
    matmuls and the optimizer are found, the blocks' GELU and LayerNorm run compiled (no plain
    kernels of theirs), and oneDNN is as asked in each process."""
    out = tmp_path / "profile.json"
    script = REPO / "benchmarks" / "profile_train_step.py"
    argv = [sys.executable, str(script), "--tiny", "--steps", "1", "--warmup", "1"]
    argv += ["--systems", "ours-off,ours-on", "--json", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| wall time |" in proc.stdout and "|   matmuls, forward |" in proc.stdout
    results = json.loads(out.read_text())["results"]
    assert [r["system"] for r in results] == ["ours-off", "ours-on"]
    assert results[0]["onednn"] is False
    for r in results:
        kernel_ms = r["kernel_ms"]
        assert r["step_ms"] > 0 and kernel_ms["matmuls, forward"] > 0
        assert kernel_ms["matmuls, backward"] > 0 and kernel_ms["optimizer"] > 0
        assert kernel_ms["GELU"] == 0 and kernel_ms["LayerNorm"] == 0


@pytest.mark.slow
def test_inference_paths_smoke(tmp_path):
    """benchmarks/bench_inference_paths.py on the tiny config: the four TensorFlow CPU paths,
    each in a process with oneDNN off or on as named."""
    out = tmp_path / "paths.json"
    script = REPO / "benchmarks" / "bench_inference_paths.py"
    argv = [sys.executable, str(script), "--tiny", "--rounds", "1", "--iters", "1"]
    proc = subprocess.run(argv + ["--json", str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["path"], r["onednn"]) for r in rows][:2] == [("eigen", False), ("eigen+xla", False)]
    assert [r["path"] for r in rows] == ["eigen", "eigen+xla", "onednn", "onednn+xla"]
    assert all(r["inference_tokens_per_s"] > 0 and r["latency"] > 0 for r in rows)
    assert "| onednn+xla |" in proc.stdout


@pytest.mark.slow
def test_interleaved_processes_smoke(tmp_path):
    """benchmarks/interleaved_processes.py on the tiny config: two variants' processes take
    turns, the second with its own TensorFlow thread setting, the third our train step; every
    turn gives a block time per variant, the first variant's ratio to itself is 1, the train
    variant gets an MFU, and a malformed variant is refused before any process starts."""
    script = REPO / "benchmarks" / "interleaved_processes.py"
    out = tmp_path / "turns.json"
    argv = [sys.executable, str(script), "--tiny", "--turns", "2", "--calls", "1"]
    argv += ["--variant", "tf:tensorflow:matmul"]
    argv += ["--variant", "tf-1:tensorflow:matmul:TF_NUM_INTRAOP_THREADS=1"]
    argv += ["--variant", "ours:ours:train"]
    proc = subprocess.run(argv + ["--json", str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    variants = json.loads(out.read_text())["variants"]
    assert [v["name"] for v in variants] == ["tf", "tf-1", "ours"]
    assert variants[1]["environment"] == {"TF_NUM_INTRAOP_THREADS": "1"}
    assert all(len(v["block_seconds"]) == 2 and min(v["block_seconds"]) > 0 for v in variants)
    assert variants[0]["ratio_mean"] == 1.0 and variants[1]["ratio_mean"] > 0
    assert "| tf-1 | tensorflow matmul | TF_NUM_INTRAOP_THREADS=1 |" in proc.stdout
    # The train variant's MFU per turn, against the faster of the two matmul blocks.
    config = benchmark_config(True)
    matmul_flops = step_flops(config, "matmul", case_shape("matmul", True))
    train_flops = step_flops(config, "train", case_shape("train", True))
    blocks = [v["block_seconds"] for v in variants]
    expected = [
        100 * train_flops / train / (matmul_flops / min(a, b))
        for a, b, train in zip(*blocks, strict=True)
    ]
    assert variants[2]["mfu_mean"] == pytest.approx(sum(expected) / 2)
    assert "| ours |" in proc.stdout.split("MFU against")[1] and "mfu_mean" not in variants[0]
    bad = [sys.executable, str(script), "--variant", "a:ours:matmul", "--variant", "b:hf:train"]
    refused = subprocess.run(bad, capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "a:ours:matmul" in refused.stderr


@pytest.mark.slow
def test_weight_gradient_matmuls_smoke(tmp_path):
    """benchmarks/weight_gradient_matmuls.py, two short rounds: every weight in every form, the
    forward form and the per-layer sum their tables' references, and each product's forms found
    equal before timing."""
    script = REPO / "benchmarks" / "weight_gradient_matmuls.py"
    out = tmp_path / "dw.json"
    argv = [sys.executable, str(script), "--dtype", "float32", "--rounds", "2", "--calls", "1"]
    argv += ["--layers", "2", "--rows", "64", "--json", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["results"]
    assert len(rows) == 30 and {r["weight"] for r in rows} == {
        "[768, 3072]",
        "[3072, 768]",
        "[768, 2304]",
    }
    for row in rows:
        assert len(row["seconds"]) == 2 and min(row["seconds"]) > 0
        references = ("X W (forward)", "L x (X^T dY), summed in float32")
        assert (row["ratio_mean"] == 1.0) == (row["form"] in references)


def test_plan_runs_each_runtime_system_in_its_dtypes():
    options = BenchmarkOptions(cases=("inference", "train"), dtypes=("float32", "int8"))
    jobs = plan_jobs(options, ("ort",), ("onnx", "tflite"))
    keys = {(j["system"], j["dtype"], j["case"]) for j in jobs}
    assert keys == {
        ("ours", "float32", "inference"),
        ("ours", "float32", "train"),
        ("ours_onnx", "float32", "inference"),
        ("ours_onnx", "int8", "inference"),
        ("ours_onnx_static", "int8", "inference"),
        ("ours_tflite", "float32", "inference"),
        ("ours_tflite", "int8", "inference"),
        ("ort", "float32", "inference"),
        ("ort", "int8", "inference"),
    }
    only = BenchmarkOptions(cases=("latency",), dtypes=("int8",), runtimes=("tflite",))
    assert [j["system"] for j in plan_jobs(only, (), ("tflite",))] == ["ours_tflite"]


def test_int8_peers_are_compared_with_our_fastest_int8_system():
    results = [
        _result("ours_onnx", "inference", 2.0, dtype="int8"),
        _result("ours_tflite", "inference", 1.0, dtype="int8"),
        _result("ort", "inference", 1.5, dtype="int8"),
        _result("ours_tflite", "latency", 0.02, dtype="int8"),
        _result("ours_onnx", "latency", 0.01, dtype="int8"),
        _result("ort", "latency", 0.03, dtype="int8"),
    ]
    records = build_records(results, tiny=False)
    index = {(r["system"], r["case"], r["metric"]): r for r in records}
    assert index["ort", "inference", "throughput"]["ratio_to_ours"] == pytest.approx(1 / 1.5)
    assert index["ort", "latency", "latency"]["ratio_to_ours"] == pytest.approx(3.0)
    table = render_table({"records": records})
    assert (
        "| inference 32x128 | throughput [tokens/s] | int8 | 2,048 | 4,096 | 2,731 (ours 1.50x)"
        in table
    )
    assert "int8 inference throughput: peers compared with our best, albert-tf TFLite" in table
    assert "int8 latency: peers compared with our best, albert-tf ONNX (ORT)" in table


@pytest.mark.slow
def test_tiny_int8_tflite_benchmark_exports_once_and_reports_accuracy(tmp_path):
    out = tmp_path / "bench.json"
    argv = ["benchmark", "--tiny", "--dtype", "int8", "--runtimes", "tflite", "--peers", "tfm"]
    assert main([*argv, "--cases", "inference,latency", "--rounds", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    throughput = [r for r in result["records"] if r["metric"] == "throughput"]
    assert {(r["system"], r["case"]) for r in throughput} == {
        ("ours_tflite", "inference"),
        ("ours_tflite", "latency"),
    }
    assert all(r["value"] > 0 and r["error"] is None for r in throughput)
    export = result["meta"]["exports"]["ours_tflite"]
    assert 0.99 < export["int8_pooled_cosine"] <= 1.0 + 1e-6
    assert "ai-edge-litert" in result["meta"]["versions"]


def test_unknown_or_missing_runtime_is_one_line(capsys):
    assert main(["benchmark", "--tiny", "--runtimes", "tflite,tvm"]) == 2
    line = helpers.one_error_line(capsys.readouterr().err, "benchmark")
    assert "unknown runtime 'tvm'; known: tf, onnx, tflite" in line
