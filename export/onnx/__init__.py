"""ONNX export: the encoder (float32 and int8) and raw-string models with the tokenizer inside.

Needs the `onnx` extra (`pip install -e ".[onnx]"`: onnx, onnxruntime, onnxruntime-extensions);
importing this package without it raises InstallError with that line.

One process, two runtimes: the raw-string models run onnxruntime-extensions' SentencePiece
operator, which crashes the process (SIGSEGV at session creation) when onnxruntime-extensions
was loaded plainly after TensorFlow: TensorFlow's protobuf symbols then serve the operator's
calls. This package loads it through `albert_tf.runtimes.onnxruntime_extensions_library`, which
works in either order (and says what to do when another import came first).
"""

from albert_tf.errors import InstallError
from albert_tf.runtimes import onnxruntime_extensions_library

try:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    onnxruntime_extensions_library()
except ImportError as error:
    raise InstallError(
        f'ONNX export needs the onnx extra ({error.name} is missing): pip install -e ".[onnx]"'
    ) from None

from albert_tf.export.onnx.classifier import export_classifier_onnx  # noqa: E402
from albert_tf.export.onnx.writer import export_onnx  # noqa: E402

__all__ = ["export_classifier_onnx", "export_onnx"]
