"""ONNX export: the encoder (float32 and int8) and raw-string models with the tokenizer inside.

Needs the `onnx` extra (`pip install -e ".[onnx]"`: onnx, onnxruntime, onnxruntime-extensions);
importing this package without it raises InstallError with that line.

One process, two runtimes: the raw-string models run onnxruntime-extensions' SentencePiece
operator, which crashes the process (SIGSEGV at session creation) when TensorFlow was imported
before onnxruntime-extensions: TensorFlow's shared libraries then provide the protobuf symbols
the operator binds to. Import `onnxruntime_extensions` (or this package) first;
`export.onnx.writer.session` raises InstallError instead of crashing when the order was wrong.
"""

import sys

from albert_tf.errors import InstallError

# Whether TensorFlow came first (see the module docstring); read by `writer.session`.
TENSORFLOW_LOADED_FIRST = (
    "tensorflow" in sys.modules and "onnxruntime_extensions" not in sys.modules
)

try:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
    import onnxruntime_extensions  # noqa: F401
except ImportError as error:
    raise InstallError(
        f'ONNX export needs the onnx extra ({error.name} is missing): pip install -e ".[onnx]"'
    ) from None

from export.onnx.classifier import export_classifier_onnx  # noqa: E402
from export.onnx.writer import export_onnx  # noqa: E402

__all__ = ["export_classifier_onnx", "export_onnx"]
