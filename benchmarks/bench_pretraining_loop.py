"""The pretraining step side by side: steps per loop, XLA, gradient accumulation (issue 16).

All jobs live in one process and run round robin (--rounds), so drift on shared cores reaches
every job alike. Each job is a `TrainLoop` (the code `albert-tf pretrain` runs) on synthetic
batches from `data.synthetic_dataset` (no input files, so the figures are the step and its host
loop, not the TFRecord reader):

- `tiny spl=N`: the tiny preset (vocab 8000), batch 32 x 128, N = 1, 10, 100 steps per loop,
  --tiny-steps steps per round;
- `base`: ALBERT-base, batch 16 x 128, one step per loop, --base-steps steps per round, plain,
  with XLA (`jit_compile=True` on the replica step's forward and backward passes), and with
  K = 4 accumulated micro-batches of 4 (the same global batch).

Each job is traced (and compiled) by one untimed loop first; the compile time is reported.
Figures are examples/s over all rounds' timed steps and the ratio to the job's reference
(`tiny spl=1`, `base`).

    python benchmarks/bench_pretraining_loop.py [--rounds 3] [--dtype float32]
        [--tiny-steps 100] [--base-steps 2] [--json benchmarks/results/pretraining_loop.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path

from albert_tf.io_utils import atomic_file

REPO = Path(__file__).resolve().parents[1]


@dataclasses.dataclass
class Job:
    name: str
    reference: str
    preset: str
    batch: int
    steps_per_loop: int
    grad_accum_steps: int = 1
    jit: bool = False
    loop: object = None
    iterator: object = None
    compile_seconds: float = 0.0
    seconds: float = 0.0
    steps: int = 0


def jobs() -> list[Job]:
    tiny = [Job(f"tiny spl={n}", "tiny spl=1", "tiny", 32, n) for n in (1, 10, 100)]
    base = [
        Job("base", "base", "base", 16, 1),
        Job("base XLA", "base", "base", 16, 1, jit=True),
        Job("base K=4", "base", "base", 16, 1, grad_accum_steps=4),
    ]
    return tiny + base


def build(job: Job, dtype: str) -> None:
    import tensorflow as tf

    from albert_tf.config import PRESETS
    from albert_tf.dtypes import keras_policy
    from albert_tf.pretraining import data as data_lib
    from albert_tf.pretraining.loop import TrainLoop
    from albert_tf.pretraining.trainer import distribute

    config = PRESETS[job.preset]
    strategy = tf.distribute.get_strategy()
    with keras_policy(dtype):
        job.loop = TrainLoop(
            strategy,
            config,
            max_seq_length=128,
            max_predictions_per_seq=20,
            dtype=dtype,
            optimizer_args=(1e-4, 10**6, 0),
            steps_per_loop=job.steps_per_loop,
            grad_accum_steps=job.grad_accum_steps,
            jit_compile=job.jit,
        )
        stream = distribute(
            strategy,
            lambda **kw: data_lib.synthetic_dataset(config.vocab_size, 128, 20, job.batch, **kw),
        )
        job.iterator = iter(stream)
        begin = time.monotonic()
        job.loop.run(job.iterator, job.steps_per_loop)
        job.compile_seconds = time.monotonic() - begin


def timed_round(job: Job, steps: int) -> None:
    loops = max(steps // job.steps_per_loop, 1)
    begin = time.monotonic()
    for _ in range(loops):
        job.loop.run(job.iterator, job.steps_per_loop)
    job.seconds += time.monotonic() - begin
    job.steps += loops * job.steps_per_loop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--tiny-steps", type=int, default=100)
    parser.add_argument("--base-steps", type=int, default=2)
    parser.add_argument("--only", help="comma-separated job names (default: all)")
    parser.add_argument("--json", default=str(REPO / "benchmarks/results/pretraining_loop.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(REPO))
    import tensorflow as tf

    from albert_tf.benchmarking.machine import cpu_description, onednn_enabled

    selected = jobs()
    if args.only:
        names = {n.strip() for n in args.only.split(",")}
        selected = [j for j in selected if j.name in names]
    for job in selected:
        print(f"building {job.name} ...", flush=True)
        build(job, args.dtype)
    for round_index in range(args.rounds):
        for job in selected:
            timed_round(job, args.tiny_steps if job.preset == "tiny" else args.base_steps)
        print(f"round {round_index + 1}/{args.rounds} done", flush=True)

    rate = {j.name: j.steps * j.batch / j.seconds for j in selected}
    rows = []
    for job in selected:
        reference = rate.get(job.reference)
        rows.append(
            {
                "job": job.name,
                "examples_per_second": round(rate[job.name], 3),
                "ratio_to_reference": round(rate[job.name] / reference, 3) if reference else None,
                "reference": job.reference,
                "seconds_per_step": round(job.seconds / job.steps, 4),
                "compile_seconds": round(job.compile_seconds, 1),
                "timed_steps": job.steps,
                "batch": job.batch,
                "steps_per_loop": job.steps_per_loop,
                "grad_accum_steps": job.grad_accum_steps,
                "xla": job.jit,
            }
        )
    print()
    print(f"| job | examples/s | vs {'reference'} | s/step | compile s |")
    print("|---|---|---|---|---|")
    for row in rows:
        ratio = row["ratio_to_reference"]
        print(
            f"| {row['job']} | {row['examples_per_second']:.2f} | "
            f"{'' if ratio is None else f'{ratio:.3f}x'} | {row['seconds_per_step']:.3f} | "
            f"{row['compile_seconds']:.1f} |"
        )
    result = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_description(),
        "onednn": onednn_enabled(),
        "tensorflow": tf.__version__,
        "dtype": args.dtype,
        "rounds": args.rounds,
        "rows": rows,
    }
    with atomic_file(args.json) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"\n{result['cpu']['model']} {' '.join(result['cpu']['flags'])}, oneDNN {result['onednn']}"
    )
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
