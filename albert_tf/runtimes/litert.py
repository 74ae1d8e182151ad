"""TFLite files run by LiteRT (`ai_edge_litert`): interpreters and their runners. LiteRT is not
imported until an interpreter is made.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from albert_tf.runtimes.cores import CHUNK_TOKENS, Runner, across_cores, available_cores, in_chunks


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
