"""ONNX Runtime: CPU sessions, their runners, and onnxruntime-extensions' operator library (the
raw-string models' tokenizer). onnxruntime is not imported until a session is made, so
TensorFlow-only installs never touch it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from typing import Any

import numpy as np

from albert_tf.errors import InstallError
from albert_tf.runtimes.cores import CHUNK_TOKENS, Runner, across_cores, available_cores, in_chunks

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


_ONNX_DTYPES = {
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(float)": np.float32,
    "tensor(string)": object,
}
