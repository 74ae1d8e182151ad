"""Runtimes that serve exported models outside TensorFlow: ONNX Runtime and TFLite (LiteRT).

A runner is a function from a dict of numpy inputs (by input name) to a dict of numpy outputs
(by output name); `albert-tf predict --runtime` and the benchmark's runtime systems both use
these. Neither runtime is imported here until a runner is made, so TensorFlow-only installs
never touch them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from albert_tf.errors import InstallError

Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]

# `albert-tf predict --runtime`: TensorFlow (the checkpoint, oneDNN fused kernels), ONNX
# Runtime on the int8 ONNX export, or LiteRT/XNNPACK on the int8 TFLite export.
RUNTIMES = ("tf", "onnx", "tflite")
ONNX_INSTALL = 'pip install -e ".[onnx]" (onnx and onnxruntime)'


def require_onnxruntime() -> None:
    """InstallError naming the extra if onnxruntime is not installed (looked up, not imported)."""
    if importlib.util.find_spec("onnxruntime") is None:
        raise InstallError(f"ONNX Runtime is not installed: {ONNX_INSTALL}")


def onnx_session(path: str | os.PathLike, threads: int | None = None) -> Any:
    """An `onnxruntime.InferenceSession` on the CPU with every graph optimization on, `threads`
    intra-op threads (None: ORT's default, one per core) and one inter-op thread."""
    require_onnxruntime()
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def onnx_runner(path: str | os.PathLike, threads: int | None = None) -> Runner:
    """Runs an ONNX model: each input cast to the dtype its graph input declares (int32 ids
    from Python feed int64 inputs unchanged in value); every output returned by name."""
    session = onnx_session(path, threads)
    dtypes = {i.name: _ONNX_DTYPES.get(i.type, np.float32) for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feed = {name: np.asarray(inputs[name], dtype) for name, dtype in dtypes.items()}
        return dict(zip(names, session.run(names, feed), strict=True))

    return run


_ONNX_DTYPES = {"tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(float)": np.float32}


def tflite_interpreter(
    path: str | os.PathLike, threads: int | None = None, xnnpack: bool = True
) -> Any:
    """A LiteRT interpreter (`ai_edge_litert`, which tf-models-official requires) with `threads`
    threads. `xnnpack=True` keeps the default XNNPACK delegate, whose kernels run the int8
    weight matrices with int8 arithmetic (activations quantized per call); False runs TFLite's
    builtin kernels only (the comparison that shows XNNPACK is in use)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    return Interpreter(
        model_path=str(path), num_threads=threads, experimental_op_resolver_type=kind
    )


def tflite_runner(
    path: str | os.PathLike, threads: int | None = None, xnnpack: bool = True
) -> Runner:
    """Runs a TFLite file's `serving_default` signature; inputs are cast to int32 (the export's
    input dtype) and the batch size may change from call to call (the runner resizes)."""
    runner = tflite_interpreter(path, threads, xnnpack).get_signature_runner("serving_default")
    names = list(runner.get_input_details())

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return runner(**{name: np.asarray(inputs[name], np.int32) for name in names})

    return run
