"""TensorFlow's and torch's bfloat16 matmul at the FFN shape, call by call, with oneDNN's own time.

Both libraries run the same oneDNN primitive on AMX machines; this script says how much of the
gap between their matmul figures in `albert-tf benchmark` is the kernel and how much the call
around it. Each library runs in its own process (2 threads, 25 calls, the first 5 untimed) with
ONEDNN_VERBOSE=1; per call it records the wall time and the primitive's exec time, and which
implementation oneDNN picked. Rounds alternate the two libraries.

    python benchmarks/bf16_matmul_exec.py --rounds 3 --json benchmarks/results/bf16-matmul-exec.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from albert_tf.benchmarking.machine import cpu_description  # noqa: E402
from albert_tf.io_utils import atomic_file  # noqa: E402

M, K, N = 4096, 768, 3072  # ALBERT-base's FFN matmul at batch 32 x 128
CALLS, WARMUP = 25, 5
PROGRAMS = {
    "tensorflow": f"""
import sys, time
import tensorflow as tf
a = tf.cast(tf.random.normal([{M}, {K}]), tf.bfloat16)
b = tf.cast(tf.random.normal([{K}, {N}]), tf.bfloat16)
matmul = tf.function(tf.matmul)
for _ in range({CALLS}):
    start = time.perf_counter()
    matmul(a, b)[:1, :1].numpy()
    print("WALL", (time.perf_counter() - start) * 1e3, file=sys.stderr, flush=True)
""",
    "torch": f"""
import sys, time
import torch
torch.set_num_threads(2)
a = torch.randn({M}, {K}).bfloat16()
b = torch.randn({K}, {N}).bfloat16()
for _ in range({CALLS}):
    start = time.perf_counter()
    a @ b
    print("WALL", (time.perf_counter() - start) * 1e3, file=sys.stderr, flush=True)
""",
}


def measure(library: str) -> dict:
    """One process: per-call wall and oneDNN exec times (ms) after the warm-up calls."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAMS[library]], env=env, capture_output=True, text=True
    )
    lines = (done.stdout + done.stderr).splitlines()
    executions = [line.split(",") for line in lines if ",exec,cpu,matmul," in line]
    wall = [float(line.split()[1]) for line in lines if line.startswith("WALL")]
    if done.returncode or len(wall) != CALLS or len(executions) < CALLS:
        raise SystemExit(
            f"{library}: the run failed or oneDNN was not used:\n{done.stderr[-2000:]}"
        )
    return dict(
        library=library,
        implementation=sorted({fields[6] for fields in executions}),
        wall_ms=wall[WARMUP:],
        onednn_exec_ms=[float(fields[-1]) for fields in executions[-CALLS:]][WARMUP:],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    gflop = 2 * M * K * N / 1e9
    runs = []
    print(
        "| round | library | wall median, GFLOP/s | oneDNN exec median, GFLOP/s | fastest exec, GFLOP/s |"
    )
    print("|---|---|---|---|---|")
    for round_index in range(args.rounds):
        for library in ("tensorflow", "torch") if round_index % 2 == 0 else ("torch", "tensorflow"):
            run = measure(library)
            runs.append(dict(run, round=round_index + 1))
            wall, exec_ = (
                statistics.median(run["wall_ms"]),
                statistics.median(run["onednn_exec_ms"]),
            )
            fastest = min(run["onednn_exec_ms"])
            print(
                f"| {round_index + 1} | {library} ({', '.join(run['implementation'])}) | "
                f"{gflop / wall * 1e3:.0f} | {gflop / exec_ * 1e3:.0f} | {gflop / fastest * 1e3:.0f} |",
                flush=True,
            )
    if args.json:
        record = dict(cpu=cpu_description(), shape=[M, K, N], runs=runs)
        with atomic_file(args.json) as temporary:
            temporary.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
