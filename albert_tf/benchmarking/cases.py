"""What is measured: systems, cases, their shapes, inputs and analytic model FLOPs.

Shared by the parent process and the per-job workers; imports neither TensorFlow nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from albert_tf.config import PRESETS, AlbertConfig

OURS = "ours"
# Our encoder served by the other runtimes of `albert-tf predict --runtime` (the key), from the
# files `albert-tf export` writes: ONNX Runtime on the ONNX export (int8: dynamic quantization;
# the static system: int8 with calibrated activation scales) and LiteRT/XNNPACK on the TFLite
# export (int8: int8 weights, activations quantized per call).
RUNTIME_SYSTEMS = {"onnx": ("ours_onnx", "ours_onnx_static"), "tflite": ("ours_tflite",)}
OUR_RUNTIMES = tuple(s for systems in RUNTIME_SYSTEMS.values() for s in systems)
# The system whose export writes another's files (static int8 comes with the ONNX export).
EXPORTED_BY = {"ours_onnx_static": "ours_onnx"}
PEERS = ("tfm", "hf", "kerashub", "ort")
SYSTEMS = (OURS, *OUR_RUNTIMES, *PEERS)
# Backends whose raw matmul throughput at the FFN shape is measured (the MFU denominator).
MATMUL_BACKENDS = ("tensorflow", "torch")
CASES = ("inference", "latency", "train", "matmul")
BENCH_DTYPES = ("float32", "bfloat16", "int8")
# What each system can run in; frameworks without an entry run float32 and bfloat16.
SYSTEM_DTYPES = {
    "ours_onnx": ("float32", "int8"),
    "ours_onnx_static": ("int8",),
    "ours_tflite": ("float32", "int8"),
    "ort": ("float32", "int8"),
}

TITLES = {
    "ours": "albert-tf (ours)",
    "tfm": "tf-models-official",
    "hf": "HF transformers (torch)",
    "kerashub": "keras-hub",
    "ours_onnx": "albert-tf ONNX (ORT)",
    "ours_onnx_static": "albert-tf ONNX static int8 (ORT)",
    "ours_tflite": "albert-tf TFLite (XNNPACK)",
    "ort": "HF ONNX (ORT optimizer)",
    "tensorflow": "TensorFlow matmul",
    "torch": "torch matmul",
}

# Systems that can run a case (keras-hub has no pretraining-heads model to compare here; the
# runtimes serve inference only).
SUPPORTED = {
    "inference": SYSTEMS,
    "latency": SYSTEMS,
    "train": (OURS, "tfm", "hf"),
    "matmul": MATMUL_BACKENDS,
}


def system_dtypes(system: str) -> tuple[str, ...]:
    """The dtypes `system` runs in (see SYSTEM_DTYPES)."""
    return SYSTEM_DTYPES.get(system, ("float32", "bfloat16"))


@dataclass(frozen=True)
class Shape:
    """One case's input shape: `batch` x `seq` tokens, `predictions` masked positions (train)."""

    batch: int
    seq: int
    predictions: int = 0


def benchmark_config(tiny: bool) -> AlbertConfig:
    """ALBERT-base, or a tiny config (E != H, 2 layers) for smoke tests."""
    if tiny:
        return AlbertConfig(
            vocab_size=128,
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    return PRESETS["base"]


def case_shape(case: str, tiny: bool) -> Shape:
    """Batch 32 x seq 128 (inference, matmul), 1 x 128 (latency), 16 x 128 with 20 masked
    positions (train); tiny mode shrinks all of them."""
    if tiny:
        return {
            "inference": Shape(4, 16),
            "latency": Shape(1, 16),
            "train": Shape(2, 16, 4),
            "matmul": Shape(4, 16),
        }[case]
    return {
        "inference": Shape(32, 128),
        "latency": Shape(1, 128),
        "train": Shape(16, 128, 20),
        "matmul": Shape(32, 128),
    }[case]


def make_batch(config: AlbertConfig, shape: Shape, seed: int = 0) -> dict[str, np.ndarray]:
    """Numpy inputs every system receives: full-length int32 sequences, two segments.

    Keys: input_word_ids, input_mask, input_type_ids [B, S]; with `shape.predictions` also
    masked_lm_positions, masked_lm_ids [B, P] int32, masked_lm_weights [B, P] float32,
    sentence_order_label [B] int32 and example_weight [B] float32.
    """
    rng = np.random.default_rng(seed)
    b, s, p = shape.batch, shape.seq, shape.predictions
    batch = dict(
        input_word_ids=rng.integers(5, config.vocab_size, size=(b, s)).astype(np.int32),
        input_mask=np.ones((b, s), np.int32),
        input_type_ids=np.broadcast_to(np.arange(s) >= s // 2, (b, s)).astype(np.int32),
    )
    if p:
        positions = np.stack(
            [np.sort(rng.choice(np.arange(1, s), p, replace=False)) for _ in range(b)]
        )
        batch.update(
            masked_lm_positions=positions.astype(np.int32),
            masked_lm_ids=rng.integers(5, config.vocab_size, size=(b, p)).astype(np.int32),
            masked_lm_weights=np.ones((b, p), np.float32),
            sentence_order_label=rng.integers(0, 2, size=(b,)).astype(np.int32),
            example_weight=np.ones((b,), np.float32),
        )
    return batch


# === Model FLOPs (2 per multiply-add, matmuls only) ===


def forward_flops(config: AlbertConfig, shape: Shape) -> float:
    """Forward FLOPs of one batch: embedding projection, every applied block (QKV, output and
    FFN projections plus 4*S*H of attention scores and context per token), pooler, and, with
    masked positions, the MLM and SOP heads."""
    h, e, i, s = config.hidden_size, config.embedding_size, config.intermediate_size, shape.seq
    per_token = 0.0 if e == h else 2.0 * e * h
    blocks = config.num_hidden_layers * config.inner_group_num
    per_token += blocks * (2.0 * (4 * h * h + 2 * h * i) + 4.0 * s * h)
    flops = shape.batch * (s * per_token + 2.0 * h * h)
    if shape.predictions:
        flops += shape.batch * shape.predictions * (2.0 * h * e + 2.0 * e * config.vocab_size)
        flops += shape.batch * 2.0 * h * 2
    return flops


def step_flops(config: AlbertConfig, case: str, shape: Shape) -> float:
    """Model FLOPs of one step of `case`: the forward pass, times 3 for a training step
    (backward ~ 2x forward)."""
    if case == "matmul":
        return matmul_flops(config, shape)
    return forward_flops(config, shape) * (3.0 if case == "train" else 1.0)


def matmul_dims(config: AlbertConfig, shape: Shape) -> tuple[int, int, int]:
    """(M, K, N) of the FFN matmul [B*S, H] x [H, F]."""
    return shape.batch * shape.seq, config.hidden_size, config.intermediate_size


def matmul_flops(config: AlbertConfig, shape: Shape) -> float:
    m, k, n = matmul_dims(config, shape)
    return 2.0 * m * k * n
