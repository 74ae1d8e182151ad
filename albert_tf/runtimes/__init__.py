"""Runtimes that serve exported models outside TensorFlow: ONNX Runtime and TFLite (LiteRT).

The runners live in `ort` for now; the package gives their functions under its own name, as the
module `albert_tf.runtimes` did.
"""

from albert_tf.runtimes.ort import (
    across_cores,
    available_cores,
    in_chunks,
    onnx_runner,
    onnx_session,
    onnxruntime_extensions_library,
    require_onnxruntime,
    session_runner,
    tflite_interpreter,
    tflite_runner,
)

__all__ = [
    "available_cores",
    "in_chunks",
    "across_cores",
    "onnx_session",
    "session_runner",
    "onnx_runner",
    "onnxruntime_extensions_library",
    "require_onnxruntime",
    "tflite_interpreter",
    "tflite_runner",
]
