"""Wall times a contributor or a new user waits for: the fast test tier, the whole suite, the
quickstart, each run once as a user runs it, with the machine it ran on.

    python benchmarks/wall_times.py [--only fast-tier quickstart ...]
        [--json benchmarks/results/wall-times.json]

Each job is a subprocess from the repository root, timed from start to exit. The record names the
CPU (model, the instruction sets that decide bfloat16 kernels), the load average just before each
job (a figure taken with the machine busy is kept, and says so), and the job's exit status; a
failed job's time is recorded but is not a time to quote. The quickstart is timed twice: as it
runs (bfloat16 where the CPU has AMX or AVX-512 BF16) and in float32, the way a CPU without them
trains (`--dtype float32`).

Pages quote these records with `<!-- figures: benchmarks/results/wall-times.json#... -->`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from albert_tf.benchmarking.machine import cpu_description

ROOT = Path(__file__).resolve().parent.parent

JOBS = {
    "fast-tier": (
        [sys.executable, "-m", "pytest", "-m", "not slow", "-n", "2", "--dist", "loadfile", "-q",
         "-p", "no:cacheprovider"],
        {},
    ),
    "suite": (
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-q",
         "-p", "no:cacheprovider"],
        {},
    ),
    "quickstart": ([sys.executable, "-m", "albert_tf.cli", "quickstart", "--output", "{tmp}"], {}),
    "quickstart-float32": (
        [sys.executable, "-m", "albert_tf.cli", "quickstart", "--output", "{tmp}", "--dtype",
         "float32"],
        {},
    ),
}  # fmt: skip


def run_job(name: str) -> dict:
    """Run one job in a fresh temporary folder; its wall time, status and the load before it."""
    command, env = JOBS[name]
    with tempfile.TemporaryDirectory() as tmp:
        argv = [part.format(tmp=str(Path(tmp) / "out")) for part in command]
        load = os.getloadavg()[0]
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                              text=True, check=False)  # fmt: skip
        seconds = time.perf_counter() - start
    # pytest's summary and the quickstart's last line are on stdout; stderr holds warnings.
    tail = (done.stdout.strip() or done.stderr.strip()).splitlines()[-1:] or [""]
    return {
        "command": " ".join(argv[1:]) if argv[0] == sys.executable else " ".join(argv),
        "env": env,
        "seconds": round(seconds, 1),
        "minutes": round(seconds / 60, 1),
        "returncode": done.returncode,
        "load_average_before": round(load, 2),
        "last_line": tail[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(JOBS), default=list(JOBS))
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/wall-times.json")
    args = parser.parse_args(argv)
    record = json.loads(args.json.read_text()) if args.json.exists() else {"jobs": {}}
    record["machine"] = cpu_description()
    print(f"{'job':<20} {'minutes':>8} {'load before':>12} {'status':>7}")
    for name in args.only:
        result = run_job(name)
        record["jobs"][name] = result
        print(f"{name:<20} {result['minutes']:>8} {result['load_average_before']:>12} "
              f"{result['returncode']:>7}")  # fmt: skip
        partial = args.json.with_suffix(".partial")
        partial.write_text(json.dumps(record, indent=2) + "\n")
        partial.replace(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
