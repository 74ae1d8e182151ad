"""Systems served by ONNX Runtime and LiteRT: our exported encoder and the ORT peer (HF's ALBERT).

Exported files are made once per benchmark run by `prepare` (in a worker process of their own,
before the round robin) into a directory the parent owns, then every timed job loads them:
exporting is not what is timed, and each job's process imports only its runtime.

- `ours_tflite`: `albert_tf.export.tflite` files of a random-init `AlbertEncoder` (float32; int8 =
  dynamic-range quantization), LiteRT with its default XNNPACK delegate.
- `ours_onnx`, `ours_onnx_static`: `albert_tf.export.onnx`'s encoder graph of the same encoder after ORT's
  BERT fusions, as float32, dynamic int8 and static int8 (calibrated on seeded ids); ORT.
- `ort`: what a user of Hugging Face builds: `transformers.AlbertModel` (random init, same
  config) exported with `torch.onnx.export` (TorchScript exporter, opset 17, dynamic batch and
  sequence), ORT's transformer optimizer (`model_type="bert"`), and for int8
  `onnxruntime.quantization.quantize_dynamic` (int8 weights), run one `session.run` per batch.
- `ort_across_cores` (`PEER_ACROSS_CORES`): the same files fed as ours are.

Each `build` returns `(step, note)` like `tf_systems`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from albert_tf.benchmarking.cases import Shape, make_batch
from albert_tf.config import AlbertConfig
from albert_tf.runtimes import onnx_runner, onnx_session, session_runner, tflite_runner

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
# HF's input names for the same three tensors.
HF_INPUTS = dict(
    input_word_ids="input_ids", input_mask="attention_mask", input_type_ids="token_type_ids"
)
INFO_FILE = "info.json"
# The peer's files fed by our runner (`albert_tf.runtimes.across_cores`), not by one `run` per
# batch: how much of our lead is the feeding (benchmarks/bench_int8_interleaved.py only).
PEER_ACROSS_CORES = "ort_across_cores"
OPSET = 17


def _files(directory: Path, system: str) -> dict[str, Path]:
    """{dtype: file} that `system` runs."""
    if system == "ours_onnx_static":
        return {"int8": directory / "ours_onnx" / "int8_static.onnx"}
    if system == PEER_ACROSS_CORES:
        return _files(directory, "ort")
    suffix = ".tflite" if system == "ours_tflite" else ".onnx"
    return {dtype: directory / system / f"{dtype}{suffix}" for dtype in ("float32", "int8")}


def prepare(system: str, config: AlbertConfig, seq_length: int, directory: Path) -> dict[str, Any]:
    """Writes `system`'s float32 and int8 files under `directory/system/` and returns (and saves
    as info.json there) what the table notes: how the files were made, and the smallest
    pooled-output cosine similarity of each int8 file to float32 on seeded inputs."""
    out = directory / system
    out.mkdir(parents=True, exist_ok=True)
    files = _files(directory, system)
    if system == "ours_tflite":
        info = _prepare_tflite(config, seq_length, files)
    elif system == "ours_onnx":
        files["int8_static"] = _files(directory, "ours_onnx_static")["int8"]
        info = _prepare_onnx(config, seq_length, files)
    elif system == "ort":
        info = _prepare_hf_onnx(config, seq_length, files)
    else:
        raise ValueError(f"no files to prepare for {system!r}")
    probe = make_batch(config, Shape(4, seq_length), seed=1)
    pooled = {
        dtype: _runner(system, path, threads=None)(probe)["pooled"] for dtype, path in files.items()
    }
    from albert_tf.export.tflite import cosine_similarity

    for kind in pooled:
        if kind != "float32":
            cosine = cosine_similarity(pooled[kind], pooled["float32"]).min()
            info[f"{kind}_pooled_cosine"] = float(cosine)
    (out / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def _random_encoder(config: AlbertConfig, seq_length: int):
    """Our `AlbertEncoder`, seeded random init, built at `seq_length`."""
    import tf_keras as keras

    from albert_tf.encoder import AlbertEncoder

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(config)
    encoder({k: np.zeros((1, seq_length), np.int32) for k in ENCODER_INPUTS}, training=False)
    return encoder


def _prepare_tflite(config: AlbertConfig, seq_length: int, files: dict[str, Path]) -> dict:
    from albert_tf.export.tflite import tflite_converters

    encoder = _random_encoder(config, seq_length)
    for dtype, converter in tflite_converters(encoder, seq_length).items():
        files[dtype].write_bytes(converter.convert())
    return {"made_by": "albert-tf export --tflite (dynamic-range int8)"}


def _prepare_onnx(config: AlbertConfig, seq_length: int, files: dict[str, Path]) -> dict:
    import onnx

    from albert_tf.export.onnx import optimize
    from albert_tf.export.onnx.encoder import encoder_graph
    from albert_tf.export.tflite import probe_inputs

    fused = optimize.fuse(
        encoder_graph(_random_encoder(config, seq_length)),
        config.num_attention_heads,
        config.hidden_size,
    )
    calibration = [probe_inputs(config.vocab_size, seq_length, 8, seed) for seed in (1, 2)]
    onnx.save(fused, str(files["float32"]))
    onnx.save(optimize.quantize_dynamic_int8(fused), str(files["int8"]))
    onnx.save(optimize.quantize_static_int8(fused, calibration), str(files["int8_static"]))
    counts = optimize.op_counts(fused)
    return {
        "made_by": "albert-tf export --onnx (ORT's BERT fusions; int8: quantize_dynamic, "
        "static QDQ calibrated on 16 seeded rows)",
        "fused_ops": {op: n for op, n in counts.items() if op in optimize.FUSED_OPS},
    }


def _prepare_hf_onnx(config: AlbertConfig, seq_length: int, files: dict[str, Path]) -> dict:
    import onnx
    import torch
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    from albert_tf.benchmarking.torch_systems import hf_config

    torch.manual_seed(0)
    model = transformers.AlbertModel(hf_config(config)).eval()
    raw = files["float32"].with_name("exported.onnx")
    names = list(HF_INPUTS.values())
    example = make_batch(config, Shape(1, seq_length))
    args = tuple(torch.from_numpy(example[k]).long() for k in ENCODER_INPUTS)
    with torch.inference_mode():
        torch.onnx.export(
            model,
            args,
            str(raw),
            input_names=names,
            output_names=["last_hidden_state", "pooler_output"],
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in names},
            opset_version=OPSET,
            dynamo=False,
        )
    optimized = optimizer.optimize_model(
        str(raw),
        model_type="bert",
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
    )
    fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    optimized.save_model_to_file(str(files["float32"]))
    raw.unlink()
    # The optimizer's fused ops (com.microsoft domain) have no types for ONNX's shape inference;
    # quantize_dynamic's own error message names this option, which a user would then pass.
    quantize_dynamic(
        str(files["float32"]),
        str(files["int8"]),
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    attention = model.config._attn_implementation
    return {
        "made_by": f"torch.onnx.export (TorchScript, opset {OPSET}, attn={attention}), "
        "onnxruntime.transformers.optimizer model_type=bert, quantize_dynamic QInt8",
        "fused_ops": fused,
    }


def _runner(system: str, path: Path, threads: int | None):
    """A function: our benchmark batch (numpy) -> {"pooled": [B, H] float32}."""
    if system == "ours_tflite":
        run = tflite_runner(path, threads)
        return lambda batch: {"pooled": run(batch)["pooled_output"]}
    if system == "ort":  # what a user of ONNX Runtime writes: one `run` per batch
        run = session_runner(onnx_session(path, threads))
    else:
        run = onnx_runner(path, threads)
    if system in ("ort", PEER_ACROSS_CORES):
        return lambda batch: {
            "pooled": run({HF_INPUTS[k]: batch[k] for k in ENCODER_INPUTS})["pooler_output"]
        }
    return lambda batch: {"pooled": run(batch)["pooled_output"]}


def build(
    system: str, config: AlbertConfig, dtype: str, shape: Shape, directory: Path, threads: int
) -> tuple[Any, str]:
    """One timed step of `system` in `dtype` on the prepared file: every output computed and
    returned as numpy, as a serving process would."""
    path = _files(directory, system)[dtype]
    run = _runner(system, path, threads)
    batch = make_batch(config, shape)
    note = json.loads((path.parent / INFO_FILE).read_text(encoding="utf-8"))["made_by"]

    def step():
        return run(batch)

    return step, note
