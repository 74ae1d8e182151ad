"""Runtimes that serve exported models outside TensorFlow: ONNX Runtime and TFLite (LiteRT).

A runner is a function from a dict of numpy inputs (by input name) to a dict of numpy outputs
(by output name); `albert-tf predict --runtime` and the benchmark's runtime systems both use
these. Neither runtime is imported here until a runner is made, so TensorFlow-only installs
never touch them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import queue
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from albert_tf.errors import DataError, InstallError

Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]

# `albert-tf predict --runtime`: TensorFlow (the checkpoint, oneDNN fused kernels), ONNX
# Runtime on the int8 ONNX export, or LiteRT/XNNPACK on the int8 TFLite export.
RUNTIMES = ("tf", "onnx", "tflite")
# Tokens per call when a runner is given a long batch (`in_chunks`, `across_cores`). At batch
# 32 x 128 (ALBERT-base int8, 2 cores, AVX-512 VNNI), one call at a time on both cores ran 9%
# more tokens/s in ONNX Runtime and about 12% more in LiteRT/XNNPACK fed 8 rows per call than
# 32 at once (the feed-forward's [rows x S, 4H] float intermediate, 50 MB at 32 rows, then
# stays in cache). With one single-threaded call per core, 2 rows per call ran as fast as 4
# and 8 or faster (within the machine's noise: 128 to 1,024 tokens were tried).
CHUNK_TOKENS = 256
ONNX_INSTALL = 'pip install -e ".[onnx]" (onnx and onnxruntime)'


def require_onnxruntime() -> None:
    """InstallError naming the extra if onnxruntime is not installed (looked up, not imported)."""
    if importlib.util.find_spec("onnxruntime") is None:
        raise InstallError(f"ONNX Runtime is not installed: {ONNX_INSTALL}")


# Why TensorFlow and onnxruntime-extensions clash (issue 45): both libraries carry their own,
# different protobuf (and abseil), with the symbols exported. TensorFlow loads its framework
# library with RTLD_GLOBAL (tensorflow/python/pywrap_dlopen_global_flags.py), so a library
# loaded after it binds its protobuf calls to TensorFlow's copy: the SentencePiece operator's
# `MessageLite::ParseFromArray` then runs TensorFlow's protobuf on the extensions' message
# classes and dies in `ThreadSafeArena::AllocateAlignedFallback` (SIGSEGV at session creation,
# exit 139). Loaded before TensorFlow, or after it with RTLD_DEEPBIND (its own symbols first),
# the extensions' library keeps its own protobuf.
_TENSORFLOW_LIBRARY = "libtensorflow_framework.so"
_EXTENSIONS_MODULE = "onnxruntime_extensions"
_DEEPBOUND = False  # whether this module loaded the extensions with RTLD_DEEPBIND


def _load_order() -> list[str]:
    """The file names of the shared objects in this process, in the order they were loaded
    (glibc's link map); empty where `dl_iterate_phdr` is not available."""

    class Info(ctypes.Structure):
        _fields_ = [("addr", ctypes.c_void_p), ("name", ctypes.c_char_p)]

    visit_type = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.POINTER(Info), ctypes.c_size_t, ctypes.c_void_p
    )
    names = []

    def visit(info, size, data):
        names.append(os.path.basename((info.contents.name or b"").decode(errors="replace")))
        return 0

    try:
        ctypes.CDLL(None).dl_iterate_phdr(visit_type(visit), None)
    except (AttributeError, OSError):
        return []
    return names


def _loaded_before(first: str, second: str, order: list[str]) -> bool:
    """Whether a library whose name starts with `first` was loaded before one with `second`."""
    index = {}
    for i, name in enumerate(order):
        for prefix in (first, second):
            if name.startswith(prefix):
                index.setdefault(prefix, i)
    return first in index and second in index and index[first] < index[second]


def onnxruntime_extensions_library() -> str:
    """The path of onnxruntime-extensions' operator library, for
    `SessionOptions.register_custom_ops_library`, loaded so that its SentencePiece operator works
    in a process that also runs TensorFlow: after TensorFlow, it is imported with RTLD_DEEPBIND
    (see above). InstallError, instead of a crash at session creation, when something else
    imported onnxruntime_extensions after TensorFlow."""
    global _DEEPBOUND
    tensorflow_loaded = any(name.startswith(_TENSORFLOW_LIBRARY) for name in _load_order())
    if _EXTENSIONS_MODULE not in sys.modules and tensorflow_loaded and hasattr(os, "RTLD_DEEPBIND"):
        flags = sys.getdlopenflags()
        sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
        try:
            importlib.import_module(_EXTENSIONS_MODULE)
        finally:
            sys.setdlopenflags(flags)
        _DEEPBOUND = True
    extensions = importlib.import_module(_EXTENSIONS_MODULE)
    library = extensions.get_library_path()
    if not _DEEPBOUND and _loaded_before(
        _TENSORFLOW_LIBRARY, os.path.basename(library).split(".")[0], _load_order()
    ):
        raise InstallError(
            "this process imported onnxruntime_extensions after tensorflow, which crashes its "
            "SentencePiece operator (the two carry different protobufs): import "
            "onnxruntime_extensions before tensorflow, or leave its import to "
            "albert_tf.runtimes.onnxruntime_extensions_library()"
        )
    return library


def onnx_session(model: Any, threads: int | None = None, custom_ops: bool = False) -> Any:
    """An `onnxruntime.InferenceSession` on the CPU of `model` (a path or an `onnx.ModelProto`)
    with every graph optimization on, `threads` intra-op threads (None: ORT's default, one per
    core) and one inter-op thread. `custom_ops` registers onnxruntime-extensions' operators
    (the raw-string models' tokenizer needs them; `onnxruntime_extensions_library`)."""
    require_onnxruntime()
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if custom_ops:
        options.register_custom_ops_library(onnxruntime_extensions_library())
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
    """A runner of the ONNX file at `path` on `threads` cores (None: every core this process
    may use), `across_cores`: one session with `threads` intra-op threads for single rows, and
    one single-threaded session, which ONNX Runtime lets several threads run at once, for
    longer batches."""
    threads = threads or available_cores()
    whole = session_runner(onnx_session(path, threads))
    if threads == 1:
        return in_chunks(whole, chunk_tokens)
    single = session_runner(onnx_session(path, 1))
    return across_cores(whole, [single] * threads, chunk_tokens)


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity where the OS keeps one (Linux, where
    containers and taskset limit it), else every core (macOS and Windows have no affinity call)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _row_count(inputs: dict[str, np.ndarray]) -> int:
    """Rows of the batch `inputs`; DataError for none (ONNX Runtime's int8 attention kernel
    stops the process, SIGFPE, on a batch of zero rows)."""
    rows = len(next(iter(inputs.values())))
    if rows == 0:
        raise DataError("an empty batch: the int8 encoder runtimes take at least one row")
    return rows


def _row_slices(inputs: dict[str, np.ndarray], rows_per_call: int) -> list[dict[str, np.ndarray]]:
    """`inputs` cut into consecutive slices of `rows_per_call` rows (the last may be shorter)."""
    rows = len(next(iter(inputs.values())))
    return [
        {name: np.asarray(value)[start : start + rows_per_call] for name, value in inputs.items()}
        for start in range(0, rows, rows_per_call)
    ]


def _rows_per_call(inputs: dict[str, np.ndarray], chunk_tokens: int) -> int:
    """Rows in `chunk_tokens` tokens (rows x the second dimension of the first input), >= 1."""
    first = np.asarray(next(iter(inputs.values())))
    return max(1, chunk_tokens // (first.shape[1] if first.ndim > 1 else 1))


def _concatenate(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def in_chunks(run: Runner, chunk_tokens: int | None = CHUNK_TOKENS) -> Runner:
    """`run` called on consecutive row slices of at most `chunk_tokens` tokens (rows x the
    second dimension of the first input; at least one row), outputs concatenated along rows.
    None: one call per batch. Every output must have the batch as its first dimension."""
    if chunk_tokens is None:
        return run

    def chunked(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        step = _rows_per_call(inputs, chunk_tokens)
        if _row_count(inputs) <= step:
            return run(inputs)
        return _concatenate([run(part) for part in _row_slices(inputs, step)])

    return chunked


def across_cores(
    whole: Runner, per_core: list[Runner], chunk_tokens: int | None = CHUNK_TOKENS
) -> Runner:
    """A batch of one row goes to `whole` (a runner that spreads one call over every core: the
    latency path). A longer batch is cut into slices of at most `chunk_tokens` tokens and at
    least one slice per core, and `len(per_core)` threads each take slices with a runner of
    their own (single-threaded) until none is left; outputs concatenated in order.

    Each core then runs whole operators alone instead of every operator split over the cores
    with a barrier after it: at batch 32 x 128 (ALBERT-base int8, 2 cores, AVX-512 VNNI) 1.12x
    the tokens/s of one call at a time on both cores, in ONNX Runtime and in LiteRT."""
    idle: queue.SimpleQueue = queue.SimpleQueue()
    for runner in per_core:
        idle.put(runner)
    pool = ThreadPoolExecutor(len(per_core), thread_name_prefix="albert-tf-core")

    def one_slice(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        runner = idle.get()
        try:
            return runner(inputs)
        finally:
            idle.put(runner)

    def spread(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = _row_count(inputs)
        if rows < 2:
            return whole(inputs)
        step = -(-rows // len(per_core))  # at least one slice per core
        if chunk_tokens is not None:
            step = min(step, _rows_per_call(inputs, chunk_tokens))
        return _concatenate(list(pool.map(one_slice, _row_slices(inputs, step))))

    return spread


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
    """Runs a TFLite file's `serving_default` signature on `threads` cores (None: every core
    this process may use); inputs are cast to int32 (the export's input dtype) and the batch
    size may change from call to call (the runner resizes). `across_cores`: one interpreter
    with `threads` threads for single rows, one single-threaded interpreter per core (an
    interpreter serves one call at a time) for longer batches."""
    threads = threads or available_cores()

    def interpreter_runner(interpreter_threads: int) -> Runner:
        interpreter = tflite_interpreter(path, interpreter_threads, xnnpack)
        runner = interpreter.get_signature_runner("serving_default")
        names = list(runner.get_input_details())

        def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return runner(**{name: np.asarray(inputs[name], np.int32) for name in names})

        return run

    whole = interpreter_runner(threads)
    if threads == 1:
        return in_chunks(whole, chunk_tokens)
    return across_cores(whole, [interpreter_runner(1) for _ in range(threads)], chunk_tokens)
