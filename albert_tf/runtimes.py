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
# Tokens per call when a runner is given a long batch: at batch 32 x 128 (ALBERT-base, 2 cores,
# AVX-512 VNNI), our int8 encoder ran 9% more tokens/s in ONNX Runtime and about 12% more in
# LiteRT/XNNPACK fed 8 rows per call than 32 at once: the feed-forward's [rows x S, 4H] float
# intermediate (50 MB at 32 rows) then stays within the CPU's cache between operators. (HF's
# graph in ORT, the benchmark's peer, ran 7% slower so fed, and gets whole batches.)
CHUNK_TOKENS = 1024
ONNX_INSTALL = 'pip install -e ".[onnx]" (onnx and onnxruntime)'


def require_onnxruntime() -> None:
    """InstallError naming the extra if onnxruntime is not installed (looked up, not imported)."""
    if importlib.util.find_spec("onnxruntime") is None:
        raise InstallError(f"ONNX Runtime is not installed: {ONNX_INSTALL}")


def onnx_session(model: Any, threads: int | None = None, custom_ops: bool = False) -> Any:
    """An `onnxruntime.InferenceSession` on the CPU of `model` (a path or an `onnx.ModelProto`)
    with every graph optimization on, `threads` intra-op threads (None: ORT's default, one per
    core) and one inter-op thread. `custom_ops` registers onnxruntime-extensions' operators
    (the raw-string models' tokenizer needs them)."""
    require_onnxruntime()
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if custom_ops:
        from onnxruntime_extensions import get_library_path

        options.register_custom_ops_library(get_library_path())
    source = str(model) if isinstance(model, str | os.PathLike) else model.SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def session_runner(session: Any) -> Runner:
    """Runs an ONNX Runtime session: each input it declares is cast to the declared dtype
    (int32 ids from Python feed int64 inputs unchanged in value; strings stay objects); every
    output is returned by name."""
    dtypes = {i.name: _ONNX_DTYPES.get(i.type, np.float32) for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feed = {name: np.asarray(inputs[name], dtype) for name, dtype in dtypes.items()}
        return dict(zip(names, session.run(names, feed), strict=True))

    return run


def onnx_runner(
    path: str | os.PathLike, threads: int | None = None, chunk_tokens: int | None = CHUNK_TOKENS
) -> Runner:
    """`session_runner` of a session on the ONNX file at `path` (see `onnx_session`), fed
    `chunk_tokens` tokens per call (`in_chunks`)."""
    return in_chunks(session_runner(onnx_session(path, threads)), chunk_tokens)


def in_chunks(run: Runner, chunk_tokens: int | None = CHUNK_TOKENS) -> Runner:
    """`run` called on consecutive row slices of at most `chunk_tokens` tokens (rows x the
    second dimension of the first input; at least one row), outputs concatenated along rows.
    None: one call per batch. Every output must have the batch as its first dimension."""
    if chunk_tokens is None:
        return run

    def chunked(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        first = np.asarray(next(iter(inputs.values())))
        rows = len(first)
        step = max(1, chunk_tokens // (first.shape[1] if first.ndim > 1 else 1))
        if rows <= step:
            return run(inputs)
        parts = [
            run({name: np.asarray(value)[start : start + step] for name, value in inputs.items()})
            for start in range(0, rows, step)
        ]
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    return chunked


_ONNX_DTYPES = {
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(float)": np.float32,
    "tensor(string)": object,
}


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
    path: str | os.PathLike,
    threads: int | None = None,
    xnnpack: bool = True,
    chunk_tokens: int | None = CHUNK_TOKENS,
) -> Runner:
    """Runs a TFLite file's `serving_default` signature; inputs are cast to int32 (the export's
    input dtype) and the batch size may change from call to call (the runner resizes); long
    batches are fed `chunk_tokens` tokens per call (`in_chunks`)."""
    runner = tflite_interpreter(path, threads, xnnpack).get_signature_runner("serving_default")
    names = list(runner.get_input_details())

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return runner(**{name: np.asarray(inputs[name], np.int32) for name in names})

    return in_chunks(run, chunk_tokens)
