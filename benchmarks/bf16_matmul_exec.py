"""TensorFlow's and torch's bfloat16 matmul at the FFN shape, call by call, with oneDNN's own time.

Both libraries run a oneDNN primitive of the same name on AMX machines (from different oneDNN
versions, which the script records); this script says how much of the gap between their matmul
figures in `albert-tf benchmark` is the kernel and how much the call around it. Each library runs
the benchmark's own matmul step (tf_systems.build_tf_matmul, torch_systems.build_torch_matmul;
each library's default threads, one per core) in its own process, 25 calls, the first 5 untimed,
with ONEDNN_VERBOSE=1; per call it records the wall time and the primitive's exec time, and which
implementation oneDNN picked. Rounds alternate the two libraries.

    python benchmarks/bf16_matmul_exec.py --rounds 3 --json benchmarks/results/bf16-matmul-exec.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from albert_tf.benchmarking.cases import benchmark_config, case_shape, matmul_dims  # noqa: E402
from albert_tf.benchmarking.machine import cpu_description  # noqa: E402
from albert_tf.io_utils import write_json  # noqa: E402

CALLS, WARMUP = 25, 5
# Each library's step is the one `albert-tf benchmark`'s matmul case times (FFN shape, bfloat16).
PROGRAM = """
import sys, time
from albert_tf.benchmarking import {module}
from albert_tf.benchmarking.cases import benchmark_config, case_shape
step, _ = {module}.{builder}(benchmark_config(False), "bfloat16", case_shape("matmul", False))
for _ in range({calls}):
    start = time.perf_counter()
    step()
    print("WALL", (time.perf_counter() - start) * 1e3, file=sys.stderr, flush=True)
"""
BUILDERS = {
    "tensorflow": ("tf_systems", "build_tf_matmul"),
    "torch": ("torch_systems", "build_torch_matmul"),
}


def measure(library: str) -> dict:
    """One process: per-call wall and oneDNN exec times (ms) after the warm-up calls."""
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": repo}
    module, builder = BUILDERS[library]
    program = PROGRAM.format(module=module, builder=builder, calls=CALLS)
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True)
    lines = (done.stdout + done.stderr).splitlines()
    executions = [line.split(",") for line in lines if ",exec,cpu,matmul," in line]
    wall = [float(line.split()[1]) for line in lines if line.startswith("WALL")]
    if done.returncode or len(wall) != CALLS or len(executions) < CALLS:
        raise SystemExit(
            f"{library}: the run failed or oneDNN was not used:\n{done.stderr[-2000:]}"
        )
    versions = [
        line.split(",info,")[1].split(" (")[0] for line in lines if ",info,oneDNN v" in line
    ]
    return dict(
        library=library,
        onednn=versions[0] if versions else None,
        implementation=sorted({fields[6] for fields in executions}),
        wall_ms=wall[WARMUP:],
        onednn_exec_ms=[float(fields[-1]) for fields in executions[-CALLS:]][WARMUP:],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    m, k, n = matmul_dims(benchmark_config(False), case_shape("matmul", False))
    gflop = 2 * m * k * n / 1e9
    runs = []
    print(
        "| round | library | wall median, GFLOP/s | oneDNN exec median, GFLOP/s | fastest exec, GFLOP/s |"
    )
    print("|---|---|---|---|---|")
    for round_index in range(args.rounds):
        for library in ("tensorflow", "torch") if round_index % 2 == 0 else ("torch", "tensorflow"):
            run = measure(library)
            runs.append(dict(run, round=round_index + 1))
            wall = statistics.median(run["wall_ms"])
            exec_ = statistics.median(run["onednn_exec_ms"])
            fastest = min(run["onednn_exec_ms"])
            print(
                f"| {round_index + 1} | {library} ({run['onednn']}: {', '.join(run['implementation'])}) | "
                f"{gflop / wall * 1e3:.0f} | {gflop / exec_ * 1e3:.0f} | {gflop / fastest * 1e3:.0f} |",
                flush=True,
            )
    if args.json:
        record = dict(cpu=cpu_description(), shape=[m, k, n], runs=runs)
        write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
