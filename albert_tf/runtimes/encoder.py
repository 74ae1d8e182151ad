"""An int8 encoder file on another runtime, called like the Keras encoder: what `albert-tf
predict --runtime` runs a fine-tuned model's encoder in.

The encoder is where nearly all the time goes, so only it moves: `albert_tf.export.int8_encoder`
exports the restored weights in float32 to an int8 file (ONNX Runtime: `albert_tf.export.onnx`'s
graph with ORT's BERT fusions and dynamic int8 quantization; TFLite: `albert_tf.export.tflite`'s
dynamic-range int8 file, run by LiteRT's XNNPACK int8 kernels) and `load_encoder` loads it, while
the task's own forward pass (windows, choices, the head) runs around it unchanged. So every task
predicts through every runtime, tokenization stays in Python (the TFLite file takes token ids),
and the records are decoded exactly as with `tf`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.errors import ConfigError
from albert_tf.runtimes.cores import Runner
from albert_tf.runtimes.litert import tflite_runner
from albert_tf.runtimes.ort import onnx_runner, require_onnxruntime

# `albert-tf predict --runtime`: TensorFlow (the checkpoint, oneDNN fused kernels), ONNX
# Runtime on the int8 ONNX export, or LiteRT/XNNPACK on the int8 TFLite export.
RUNTIMES = ("tf", "onnx", "tflite")
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


def load_encoder(
    path: str | os.PathLike, runtime: str, threads: int | None = None
) -> RuntimeEncoder:
    """The encoder file at `path` (int8, from `albert_tf.export.int8_encoder`) loaded in
    `runtime` ("onnx" or "tflite") with `threads` threads (None: one per core the process may
    use, `albert_tf.runtimes.available_cores`). The file may be removed once it is loaded."""
    run = tflite_runner(path, threads) if runtime == "tflite" else onnx_runner(path, threads)
    return RuntimeEncoder(run, runtime)
