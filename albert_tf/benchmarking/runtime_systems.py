"""Systems served by ONNX Runtime and LiteRT: our exported encoder and the ORT peer (HF's ALBERT).

Exported files are made once per benchmark run by `prepare` (in a worker process of their own,
before the round robin) into a directory the parent owns, then every timed job loads them:
exporting is not what is timed, and each job's process imports only its runtime.

- `ours_tflite`: `export.tflite` files of a random-init `AlbertEncoder` (float32; int8 =
  dynamic-range quantization), LiteRT with its default XNNPACK delegate.
- `ort`: what a user of Hugging Face builds: `transformers.AlbertModel` (random init, same
  config) exported with `torch.onnx.export` (TorchScript exporter, opset 17, dynamic batch and
  sequence), ORT's transformer optimizer (`model_type="bert"`), and for int8
  `onnxruntime.quantization.quantize_dynamic` (int8 weights).

Each `build` returns `(step, note)` like `tf_systems`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from albert_tf.benchmarking.cases import Shape, make_batch
from albert_tf.config import AlbertConfig

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
# HF's input names for the same three tensors.
HF_INPUTS = dict(
    input_word_ids="input_ids", input_mask="attention_mask", input_type_ids="token_type_ids"
)
INFO_FILE = "info.json"
OPSET = 17


def _files(directory: Path, system: str) -> dict[str, Path]:
    suffix = ".tflite" if system == "ours_tflite" else ".onnx"
    return {dtype: directory / system / f"{dtype}{suffix}" for dtype in ("float32", "int8")}


def prepare(system: str, config: AlbertConfig, seq_length: int, directory: Path) -> dict[str, Any]:
    """Writes `system`'s float32 and int8 files under `directory/system/` and returns (and saves
    as info.json there) what the table notes: how the files were made, and the smallest
    pooled-output cosine similarity of int8 to float32 on the benchmark's inputs."""
    out = directory / system
    out.mkdir(parents=True, exist_ok=True)
    files = _files(directory, system)
    if system == "ours_tflite":
        info = _prepare_tflite(config, seq_length, files)
    elif system == "ort":
        info = _prepare_hf_onnx(config, seq_length, files)
    else:
        raise ValueError(f"no files to prepare for {system!r}")
    probe = make_batch(config, Shape(4, seq_length), seed=1)
    pooled = {
        dtype: _runner(system, path, threads=None)(probe)["pooled"] for dtype, path in files.items()
    }
    from export.tflite import cosine_similarity

    info["int8_pooled_cosine"] = float(cosine_similarity(pooled["int8"], pooled["float32"]).min())
    (out / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def _prepare_tflite(config: AlbertConfig, seq_length: int, files: dict[str, Path]) -> dict:
    import tf_keras as keras

    from albert_tf.encoder import AlbertEncoder
    from export.tflite import tflite_converters

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(config)
    encoder({k: np.zeros((1, seq_length), np.int32) for k in ENCODER_INPUTS}, training=False)
    for dtype, converter in tflite_converters(encoder, seq_length).items():
        files[dtype].write_bytes(converter.convert())
    return {"made_by": "albert-tf export --tflite (dynamic-range int8)"}


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
    from albert_tf.runtimes import onnx_runner, tflite_runner

    if system == "ours_tflite":
        run = tflite_runner(path, threads)
        return lambda batch: {"pooled": run(batch)["pooled_output"]}
    run = onnx_runner(path, threads)
    if system == "ort":
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
