"""ONNX export: the encoder (float32 and int8) and raw-string models with the tokenizer inside.

Needs the `onnx` extra (`pip install -e ".[onnx]"`: onnx, onnxruntime, onnxruntime-extensions);
importing this package without it raises InstallError with that line.
"""

from albert_tf.errors import InstallError

try:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
    import onnxruntime_extensions  # noqa: F401
except ImportError as error:
    raise InstallError(
        f'ONNX export needs the onnx extra ({error.name} is missing): pip install -e ".[onnx]"'
    ) from None

from export.onnx.writer import export_onnx  # noqa: E402

__all__ = ["export_onnx"]
