"""A fine-tuned model's encoder on another runtime, for `albert-tf predict --runtime`.

The encoder is where nearly all the time goes, so only it moves: the restored weights are
exported in float32 to int8 (ONNX Runtime: `albert_tf.export.onnx`'s graph with ORT's BERT fusions and
dynamic int8 quantization; TFLite: `albert_tf.export.tflite`'s dynamic-range int8 file, run by LiteRT's
XNNPACK int8 kernels), and the task's own forward pass (windows, choices, the head) runs
around it unchanged. So every task predicts through every runtime, tokenization stays in
Python (the TFLite file takes token ids), and the records are decoded exactly as with `tf`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.errors import ConfigError
from albert_tf.export.encoder import float32_copy
from albert_tf.runtimes.ort import RUNTIMES, Runner, onnx_runner, require_onnxruntime, tflite_runner

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
ENCODER_OUTPUTS = ("pooled_output", "sequence_output")


class RuntimeEncoder:
    """Calls an exported encoder like the Keras one (dict of int32 [B, S] tensors in, dict
    with `pooled_output` [B, H] and `sequence_output` [B, S, H] float32 tensors out), eagerly."""

    def __init__(self, run: Runner, runtime: str):
        self.run = run
        self.runtime = runtime

    def __call__(self, inputs: dict[str, Any], training: bool | None = None) -> dict:
        del training  # inference only: the exports have no dropout
        outputs = self.run({name: np.asarray(inputs[name]) for name in ENCODER_INPUTS})
        return {name: tf.constant(outputs[name]) for name in ENCODER_OUTPUTS}


def check_runtime(runtime: str) -> None:
    """ConfigError for an unknown runtime, InstallError if its package is missing."""
    if runtime not in RUNTIMES:
        raise ConfigError(f"--runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")
    if runtime == "onnx":
        require_onnxruntime()


def runtime_encoder(
    encoder: Any, runtime: str, seq_length: int, threads: int | None = None
) -> RuntimeEncoder:
    """`encoder` (an `AlbertEncoder`) exported to int8 for `runtime` ("onnx" or "tflite") and
    loaded with `threads` threads (None: one per core the process may use, as TensorFlow
    does; the runners' own default, `albert_tf.runtimes.available_cores`). Both files take any
    sequence length up to `seq_length`, the model's (predict pads each batch to its longest
    text). Prints the export's duration on stderr."""
    from albert_tf.encoder import AlbertEncoder

    check_runtime(runtime)
    if not isinstance(encoder, AlbertEncoder):
        raise ConfigError(
            f"--runtime {runtime} needs a model fine-tuned from an albert-tf checkpoint; this "
            "one wraps a TF-Hub encoder, which runs with --runtime tf"
        )
    start = time.perf_counter()
    encoder = float32_copy(encoder)
    with tempfile.TemporaryDirectory(prefix="albert-tf-runtime-") as tmp:
        path = Path(tmp) / f"encoder_int8.{runtime}"
        if runtime == "tflite":
            from albert_tf.export.tflite import tflite_converters

            # Any length up to seq_length: predict pads each batch to its longest text.
            path.write_bytes(tflite_converters(encoder, None)["int8"].convert())
            run = tflite_runner(path, threads)
        else:
            import onnx

            from albert_tf.export.onnx import optimize
            from albert_tf.export.onnx.encoder import encoder_graph

            config = encoder.config
            fused = optimize.fuse(
                encoder_graph(encoder), config.num_attention_heads, config.hidden_size
            )
            onnx.save(optimize.quantize_dynamic_int8(fused), str(path))
            run = onnx_runner(path, threads)
        # Both runtimes hold the model in memory (LiteRT maps the file: the mapping outlives
        # the name), so the directory can go.
    seconds = time.perf_counter() - start
    print(f"exported the encoder to int8 {runtime} in {seconds:.1f}s", file=sys.stderr)
    return RuntimeEncoder(run, runtime)
