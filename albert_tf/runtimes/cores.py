"""A runner, and a runner spread over the cores.

A runner is a function from a dict of numpy inputs (by input name) to a dict of numpy outputs
(by output name); `albert-tf predict --runtime`, the writers' checks of their files and the
benchmark's runtime systems all use them (`albert_tf.runtimes.ort`, `albert_tf.runtimes.litert`
make them). `in_chunks` cuts a long batch into calls of at most `CHUNK_TOKENS` tokens;
`across_cores` gives a single row to one runner on every core and a longer batch to one
single-threaded runner per core.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from albert_tf.errors import DataError

Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]

# Tokens per call when a runner is given a long batch (`in_chunks`, `across_cores`). At batch
# 32 x 128 (ALBERT-base int8, 2 cores, AVX-512 VNNI), one call at a time on both cores ran 9%
# more tokens/s in ONNX Runtime and about 12% more in LiteRT/XNNPACK fed 8 rows per call than
# 32 at once (the feed-forward's [rows x S, 4H] float intermediate, 50 MB at 32 rows, then
# stays in cache). With one single-threaded call per core, 2 rows per call ran as fast as 4
# and 8 or faster (within the machine's noise: 128 to 1,024 tokens were tried).
CHUNK_TOKENS = 256


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
