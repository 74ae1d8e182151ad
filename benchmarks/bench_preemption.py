"""Seconds from SIGTERM to exit of `albert-tf pretrain`, for the tiny and base presets (issue 26).

Each run is the real command in a process of its own, on random well-formed shards written here
(tests/helpers.write_pretraining_records), with --save-every equal to --steps-per-loop so the
first checkpoint marks the end of the first loop. The signal goes out --delay seconds after that
checkpoint appears, early in the second loop: close to the worst case, a whole loop still to
run, then the checkpoint of the step reached, then the process's exit. Runs alternate between
the presets (--rounds), so drift on shared cores reaches both alike. The figures: SIGTERM to
exit, the step saved, and the exit code (75 = preempted, rerun to resume).

    python benchmarks/bench_preemption.py [--rounds 2] [--base-seq-length 64]
        [--json benchmarks/results/preemption.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from albert_tf.io_utils import atomic_file

REPO = Path(__file__).resolve().parents[1]
EXIT_PREEMPTED = 75


def run_once(root: Path, preset: dict, name: str, grace: float, delay: float) -> dict:
    """One preempted run of `albert-tf pretrain`; returns its figures."""
    import tensorflow as tf

    output = root / f"{name}-{time.monotonic_ns()}"
    loop = preset["steps_per_loop"]
    args = [sys.executable, "-m", "albert_tf.cli", "pretrain", "--data", preset["data"]]
    args += ["--config", name, "--output", str(output), "--train-steps", "100000"]
    args += ["--batch-size", str(preset["batch"]), "--save-every", str(loop)]
    args += ["--steps-per-loop", str(loop), "--log-every", str(loop), "--dtype", "float32"]
    args += ["--preemption-grace", str(grace), "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    with tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=err)
        while tf.train.latest_checkpoint(str(output)) is None:
            if process.poll() is not None:
                err.seek(0)
                raise RuntimeError(f"{name}: pretrain ended early:\n{err.read()[-2000:]}")
            time.sleep(0.05)
        time.sleep(delay)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=600)
        seconds = time.monotonic() - sent
        err.seek(0)
        stderr = err.read()
    saved = re.search(r"preempted by SIGTERM at step (\d+)", stderr)
    return {
        "preset": name,
        "sigterm_to_exit_seconds": round(seconds, 2),
        "exit_code": code,
        "step_saved": int(saved.group(1)) if saved else None,
        "steps_per_loop": loop,
        "batch": preset["batch"],
        "seq_length": preset["seq_length"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--grace", type=float, default=30.0, help="--preemption-grace")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds after checkpoint 1")
    parser.add_argument("--tiny-seq-length", type=int, default=128)
    parser.add_argument("--base-seq-length", type=int, default=64)
    parser.add_argument("--json", default=str(REPO / "benchmarks/results/preemption.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(REPO))
    import tensorflow as tf

    from albert_tf.benchmarking.machine import cpu_description
    from albert_tf.config import resolve_config
    from tests.helpers import write_pretraining_records

    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-preemption-") as tmp:
        root = Path(tmp)
        presets = {
            "tiny": dict(seq_length=args.tiny_seq_length, batch=32, steps_per_loop=10),
            "base": dict(seq_length=args.base_seq_length, batch=8, steps_per_loop=10),
        }
        for name, preset in presets.items():
            (root / name).mkdir()
            shard = root / name / "a.tfrecord"
            vocab = resolve_config(name).vocab_size
            write_pretraining_records(shard, 256, preset["seq_length"], 20, vocab, seed=1)
            preset["data"] = str(shard)
        for round_index in range(args.rounds):
            for name, preset in presets.items():
                rows.append(run_once(root, preset, name, args.grace, args.delay))
                print(json.dumps(rows[-1]), flush=True)
            print(f"round {round_index + 1}/{args.rounds} done", flush=True)

    print("\n| preset | seq x batch | SIGTERM to exit, s | step saved | exit code |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['preset']} | {row['seq_length']} x {row['batch']} | "
            f"{row['sigterm_to_exit_seconds']:.1f} | {row['step_saved']} | {row['exit_code']} |"
        )
    result = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_description(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "tensorflow": tf.__version__,
        "grace_seconds": args.grace,
        "delay_seconds": args.delay,
        "rows": rows,
    }
    with atomic_file(args.json) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{result['cpu']['model']}, load {os.getloadavg()}; wrote {args.json}")
    return 0 if all(r["exit_code"] == EXIT_PREEMPTED for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
