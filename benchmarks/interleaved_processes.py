"""Steps in several processes, timed in turn: environment settings A/B'd on a drifting machine.

On a shared VM the machine's speed changes by up to 2x from one ten-second stretch to the next
(the same process, the same kernel), so processes timed one after the other compare different
machines. Settings that only take effect at start-up (TensorFlow's thread pools, oneDNN's
caller thread) need a process each; this script starts one process per variant and then hands
out turns: each turn, every process times one block of `--calls` steps while the others wait
on a pipe, the order rotating every turn. Each turn gives every variant a ratio to the first
variant's block of that turn (time per step, variant / first); the table shows the mean ratio
with its standard error over the turns. With matmul and train variants together, a second table
gives each train variant's MFU against the fastest matmul block of the same turn.

A variant is `NAME:SYSTEM:CASE[:VAR=VALUE,...]`, built exactly as `albert-tf benchmark` builds
that job (`benchmarking.worker`), in the environment and threads the benchmark gives it
(`--onednn-off-path` as there), plus the variant's own environment: SYSTEM is `tensorflow` or
`torch` with CASE `matmul` (the FFN-shaped matmul), or `ours`, `tfm` or `hf` with CASE `train`.
Where a variant sets TF_NUM_INTRAOP_THREADS or TF_NUM_INTEROP_THREADS, its TensorFlow thread
pools are left to those.

    python benchmarks/interleaved_processes.py --dtype bfloat16 --turns 30 \\
        --variant tf:tensorflow:matmul --variant torch:torch:matmul \\
        --variant tf-3-intra:tensorflow:matmul:TF_NUM_INTRAOP_THREADS=3 \\
        --json benchmarks/results/interleaved-matmul-bfloat16.json
    python benchmarks/interleaved_processes.py --dtype bfloat16 --turns 12 --calls 2 \\
        --variant ours:ours:train --variant hf:hf:train --variant tfm:tfm:train
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from albert_tf.benchmarking.cases import benchmark_config, case_shape, step_flops  # noqa: E402
from albert_tf.benchmarking.machine import cpu_description  # noqa: E402
from albert_tf.benchmarking.runner import BenchmarkOptions, worker_environment  # noqa: E402
from albert_tf.io_utils import write_json  # noqa: E402

STEPS = {
    ("tensorflow", "matmul"),
    ("torch", "matmul"),
    ("ours", "train"),
    ("tfm", "train"),
    ("hf", "train"),
}
# One process: builds its job as the benchmark's worker does, warms it up, then times one block
# per "go" on stdin.
WORKER = """
import json, os, statistics, sys
from albert_tf.benchmarking import worker

job, spec = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if job["system"] in worker.TORCH_SYSTEMS:
    from albert_tf.benchmarking import torch_systems as backend
else:
    from albert_tf.benchmarking import tf_systems as backend
if not any(name in os.environ for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")):
    backend.configure_threads(spec["intra_threads"], spec["inter_threads"])
step, _ = worker.build_step(job, spec)
worker.time_steps(step, job["warmup"], 0)
print("READY", flush=True)
for line in sys.stdin:
    if line.strip() != "go":
        break
    print("BLOCK", statistics.median(worker.time_steps(step, 0, job["iters"])), flush=True)
"""


def parse_variant(text: str) -> dict:
    name, system, case, assignments = (text.split(":", 3) + [""] * 4)[:4]
    if not name or (system, case) not in STEPS:
        raise SystemExit(
            f"--variant {text!r}: expected NAME:SYSTEM:CASE[:VAR=VALUE,...] with SYSTEM:CASE "
            f"one of {', '.join(sorted(':'.join(step) for step in STEPS))}"
        )
    pairs = [item.split("=", 1) for item in assignments.split(",") if item]
    if any(len(pair) != 2 for pair in pairs):
        raise SystemExit(f"--variant {text!r}: environment items must read VAR=VALUE")
    return dict(name=name, system=system, case=case, environment=dict(pairs))


def start(variant: dict, args: argparse.Namespace, spec: dict) -> subprocess.Popen:
    """The variant's process, once it has built and warmed up its step."""
    env = {
        **worker_environment({variant["system"]}, args.onednn_off_path),
        **variant["environment"],
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": str(REPO),
    }
    job = dict(system=variant["system"], case=variant["case"], dtype=args.dtype)
    job.update(warmup=2 if variant["case"] == "train" else 5, iters=args.calls)
    argv = [sys.executable, "-c", WORKER, json.dumps(job), json.dumps(spec)]
    process = subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    if process.stdout.readline().strip() != "READY":
        raise SystemExit(f"variant {variant['name']} did not start")
    return process


def block(process: subprocess.Popen, name: str) -> float:
    """One timed block of `process`'s steps: the median seconds per step."""
    process.stdin.write("go\n")
    process.stdin.flush()
    fields = process.stdout.readline().split()
    if len(fields) != 2 or fields[0] != "BLOCK":
        raise SystemExit(f"variant {name}: its process stopped (exit code {process.wait()})")
    return float(fields[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--calls", type=int, default=5, help="steps per block (median taken)")
    parser.add_argument(
        "--variant", action="append", required=True, help="NAME:SYSTEM:CASE[:VAR=VALUE,...]"
    )
    parser.add_argument("--onednn-off-path", action="store_true", help="as albert-tf benchmark's")
    parser.add_argument("--tiny", action="store_true", help="tiny config: a smoke test")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    variants = [parse_variant(text) for text in args.variant]
    if len(variants) < 2 or args.turns < 2 or args.calls < 1:
        parser.error("need two variants or more, --turns of 2 or more and --calls of 1 or more")
    # The benchmark's own thread settings (one intra-op thread per core, one inter-op thread).
    options = BenchmarkOptions()
    spec = dict(
        tiny=args.tiny,
        intra_threads=options.intra_threads,
        inter_threads=options.inter_threads,
        files="",
    )
    processes = [start(variant, args, spec) for variant in variants]
    seconds: list[list[float]] = [[] for _ in variants]
    try:
        for turn in range(args.turns):
            shift = turn % len(variants)
            order = list(range(shift, len(variants))) + list(range(shift))
            for index in order if turn % 2 == 0 else reversed(order):
                seconds[index].append(block(processes[index], variants[index]["name"]))
    finally:
        for process in processes:
            process.stdin.close()
            process.wait()
    print(
        "| variant | job | environment | time / first variant's, mean +- s.e. | median block, ms |"
    )
    print("|---|---|---|---|---|")
    for variant, times in zip(variants, seconds, strict=True):
        ratios = [a / b for a, b in zip(times, seconds[0], strict=True)]
        variant.update(
            block_seconds=times,
            ratio_mean=statistics.mean(ratios),
            ratio_se=statistics.stdev(ratios) / len(ratios) ** 0.5,
        )
        environment = " ".join(f"{k}={v}" for k, v in variant["environment"].items()) or "-"
        print(
            f"| {variant['name']} | {variant['system']} {variant['case']} | {environment} | "
            f"{variant['ratio_mean']:.3f} +- {variant['ratio_se']:.3f} | "
            f"{statistics.median(times) * 1e3:.1f} |"
        )
    report_mfu(variants, args.tiny)
    if args.json:
        record = dict(
            cpu=cpu_description(),
            dtype=args.dtype,
            calls=args.calls,
            onednn_off_path=args.onednn_off_path,
            variants=variants,
        )
        write_json(args.json, record)
    return 0


def report_mfu(variants: list[dict], tiny: bool) -> None:
    """With matmul and train variants together: each train variant's MFU per turn, against the
    fastest matmul variant's block of the same turn (`albert-tf benchmark` takes its fastest
    matmul call of the whole run instead, and the median step)."""
    matmuls = [v for v in variants if v["case"] == "matmul"]
    trains = [v for v in variants if v["case"] == "train"]
    if not matmuls or not trains:
        return
    config = benchmark_config(tiny)
    matmul_flops = step_flops(config, "matmul", case_shape("matmul", tiny))
    train_flops = step_flops(config, "train", case_shape("train", tiny))
    peaks = [
        max(matmul_flops / v["block_seconds"][turn] for v in matmuls)
        for turn in range(len(trains[0]["block_seconds"]))
    ]
    print("\n| train variant | MFU against the same turn's fastest matmul, mean +- s.e. |")
    print("|---|---|")
    for variant in trains:
        mfu = [
            100 * train_flops / seconds / peak
            for seconds, peak in zip(variant["block_seconds"], peaks, strict=True)
        ]
        variant.update(
            mfu_mean=statistics.mean(mfu), mfu_se=statistics.stdev(mfu) / len(mfu) ** 0.5
        )
        print(f"| {variant['name']} | {variant['mfu_mean']:.1f}% +- {variant['mfu_se']:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
