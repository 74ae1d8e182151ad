"""benchmarks/gpu/: the exporter of our XLA train step and the GPU script's arithmetic (the GPU
script itself runs where jax is installed; see benchmarks/README.md)."""

import importlib.util
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.benchmarking.cases import benchmark_config, case_shape, make_batch
from albert_tf.benchmarking.tf_systems import TRAIN_KEYS, ours_train_forward, train_function
from tests.conftest import REPO

GPU_DIR = REPO / "benchmarks" / "gpu"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, GPU_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


exporter = _load("export_train_hlo")
runner = _load("run_gpu_train")


def test_bfloat16_bits_round_like_tensorflow():
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.standard_normal(1000).astype(np.float32),
            # ties: halfway between two bfloat16 values, with even and odd last kept bits
            np.array([0x3F808000, 0x3F818000, 0xBF808000], np.uint32).view(np.float32),
        ]
    )
    expected = tf.cast(tf.cast(values, tf.bfloat16), tf.float32).numpy()
    bits = exporter.bfloat16_bits(values)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(exporter.from_bfloat16_bits(bits), expected)


def test_entry_signature_reads_parameters_and_aliases():
    text = (
        "HloModule m, input_output_alias={ {1}: (2, {}, may-alias), {2}: (3, {}, may-alias) }\n"
        "\n%add (x: f32[], y: f32[]) -> f32[] {\n}\n\n"
        "ENTRY %main (arg0.1: s32[2,16], arg1.2: f32[], arg2.3: f32[128,16], arg3.4: s64[]) -> "
        "(f32[], f32[128,16], s64[]) {\n}\n"
    )
    params, aliases = exporter.entry_signature(text)
    assert params == [("int32", [2, 16]), ("float32", []), ("float32", [128, 16]), ("int64", [])]
    assert aliases == {1: 2, 2: 3}


@pytest.mark.slow
def test_export_variant_matches_the_graph_step(tmp_path):
    """The tiny float32 export: the batch, every variable and every optimizer slot are parameters
    whose shapes match the module's, the updated variables are aliased outputs, and TensorFlow's
    XLA losses (what the GPU run must reproduce) equal the benchmark's graph step to 1e-5."""
    config = benchmark_config(tiny=True)
    batch = make_batch(config, case_shape("train", tiny=True))
    tensors = {k: tf.constant(batch[k]) for k in TRAIN_KEYS}
    tf.keras.utils.set_random_seed(1)
    forward, variables = ours_train_forward(config)
    forward(tensors)
    weights = {v.name: exporter.bfloat16_bits(v.numpy()) for v in variables}
    entry = exporter.export_variant("float32", config, batch, weights, tmp_path)

    sources = [p["source"] for p in entry["params"]]
    assert sources[: len(TRAIN_KEYS)] == ["batch"] * len(TRAIN_KEYS)
    assert sorted(p["name"] for p in entry["params"] if p["source"] == "weight") == sorted(weights)
    # the step counter, the learning rate, and Adam's two slots per variable
    assert sources.count("fill") == 2 + 2 * len(weights)
    assert (tmp_path / entry["hlo"]).stat().st_size > 0
    aliased = {entry["params"][i]["source"] for i in entry["aliases"].values()}
    assert aliased == {"weight", "fill"}
    assert len(entry["aliases"]) == len(entry["params"]) - len(TRAIN_KEYS) - 1  # all but the lr

    forward, variables = ours_train_forward(config)
    forward(tensors)
    for v in variables:
        v.assign(exporter.from_bfloat16_bits(weights[v.name]))
    graph_step = train_function(forward, variables)
    losses = [float(graph_step(tensors).numpy()) for _ in range(2)]
    np.testing.assert_allclose(entry["reference_losses"], losses, rtol=1e-5)
    json.dumps(entry)  # the manifest entry is plain JSON


def test_summary_mfu_over_the_best_matmul_of_the_same_precision_and_table():
    manifest = {
        "matmul": {"m": 2, "k": 3, "n": 4},  # 48 FLOPs a call
        "train_step_flops": 2400.0,
        "shape": {"batch": 16},
    }
    records = [
        {"kind": "meta", "worker": "jax"},
        {"system": "jax_matmul", "precision": "float32", "status": "ok", "per_call_s": 2e-3},
        {"system": "torch_matmul", "precision": "float32", "status": "ok", "per_call_s": 1e-3},
        {"system": "ours", "precision": "float32", "status": "ok", "median_s": 0.5},
        {"system": "hf", "precision": "bfloat16", "status": "ok", "median_s": 2.0},
        {"system": "hf", "precision": "tf32", "status": "skipped", "reason": "time budget"},
    ]
    for r in records[1:5]:
        r.update(best_s=r.get("median_s", 0.05), first_step_s=1.0)
    records[3].update(
        compiler="XLA",
        compile_s=2.0,
        peak_memory_bytes=3 * 2**29,
        losses=[1.0, 2.0],
        reference_losses=[1.0, 2.0],
        loss_rel_error=0.0,
        loss_check="pass",
    )
    arms = runner.summarize(records, manifest)
    assert [a["system"] for a in arms] == ["jax_matmul", "torch_matmul", "ours", "hf", "hf"]
    assert arms[1]["flops_per_s"] == pytest.approx(48_000.0)
    assert arms[2]["examples_per_s"] == pytest.approx(32.0)
    assert arms[2]["mfu"] == pytest.approx(4800.0 / 48_000.0)
    assert "mfu" not in arms[3]  # no bfloat16 matmul measured
    assert "examples_per_s" not in arms[4]
    text = runner.table(arms)
    assert "| ours | float32 | XLA | 32.0 | 500.000, 500.000 | 0.0 | 10% | 3.0 | 1.50 |" in text
    assert "| hf | tf32 | - | skipped: time budget |" in text
    assert "ours float32: first losses [1.0, 2.0]" in text
