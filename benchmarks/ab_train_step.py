"""Interleaved A/B of the training step: the step as it was before a change against today's.

Both steps are `albert-tf benchmark`'s train case (ALBERT-base, batch 16 x 128, 20 masked
positions, MLM + SOP loss, Adam; with `--quickstart` the quickstart's step instead: the tiny
preset, vocab 5,000, batch 32 x 128, LAMB), built by `benchmarking.tf_systems.build_ours` in one process
from the same seed: "before" is traced inside the context that turns the change off, "after"
without it. They then take turns, `--block` steps each, the order alternating every round, so
the other load on a shared machine falls on both alike; each round gives one ratio
(after / before, time per step), and the result is the mean ratio with its standard error
over the rounds. The same is computed from the process's CPU time per step (all threads):
on a machine that other jobs load, wall time also counts the time this process waits for a core,
and CPU time does not. The first step's losses of the two are printed too: equal up to the dtype's
rounding, as the change must leave the arithmetic alone.

    python benchmarks/ab_train_step.py --change compiled --dtype bfloat16 --rounds 12 \\
        --json benchmarks/results/ab-train-compiled-bfloat16.json
    python benchmarks/ab_train_step.py --change compiled --quickstart --block 5 --rounds 12
    python benchmarks/ab_train_step.py --change compiled --tiny --rounds 2   # smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from albert_tf.benchmarking.machine import cpu_description  # noqa: E402
from albert_tf.io_utils import atomic_file  # noqa: E402


def _before_context(change: str):
    """The context under which the "before" step is traced: the change turned off."""
    from albert_tf.layers import compiled

    if change == "compiled":
        return compiled.compiled_training(False)
    raise ValueError(change)


CHANGES = {
    "compiled": "bias + GELU and residual + LayerNorm as XLA-compiled kernels (layers/compiled.py)",
}


def _build(change: str, dtype: str, tiny: bool, before: bool, quickstart: bool):
    import tf_keras as keras

    from albert_tf import quickstart as qs
    from albert_tf.benchmarking import tf_systems
    from albert_tf.benchmarking.cases import Shape, benchmark_config, case_shape
    from albert_tf.config import PRESETS

    keras.utils.set_random_seed(0)
    context = _before_context(change) if before else contextlib.nullcontext()
    with context:
        if quickstart:  # the quickstart's model, batch and optimizer
            config = PRESETS["tiny"].replace(vocab_size=qs.VOCAB_SIZE)
            shape = Shape(qs.BATCH_SIZE, qs.SEQ_LENGTH, qs.MAX_PREDICTIONS)
            step, _ = tf_systems.build_ours(config, dtype, "train", shape, "lamb")
        else:
            step, _ = tf_systems.build_ours(
                benchmark_config(tiny), dtype, "train", case_shape("train", tiny)
            )
        loss = float(step())  # traces inside the context; the first update
    return step, loss


def _mean_se(values: list[float]) -> tuple[float, float]:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return statistics.fmean(values), se


def run(
    change: str, dtype: str, rounds: int, block: int, warmup: int, tiny: bool, quickstart: bool
) -> dict:
    from albert_tf.benchmarking import tf_systems
    from albert_tf.runtimes import available_cores

    tf_systems.configure_threads(available_cores(), 1)
    before, before_loss = _build(change, dtype, tiny, True, quickstart)
    after, after_loss = _build(change, dtype, tiny, False, quickstart)
    for _ in range(warmup):
        before()
        after()
    times: dict[str, list[float]] = {"before": [], "after": []}
    cpu_times: dict[str, list[float]] = {"before": [], "after": []}
    ratios, cpu_ratios = [], []
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        order = [("before", before), ("after", after)]
        if r % 2:
            order.reverse()
        per_round, cpu_round = {}, {}
        for name, step in order:
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(block):
                step()
            per_round[name] = (time.perf_counter() - start) / block
            cpu_round[name] = (time.process_time() - cpu_start) / block
            times[name].append(per_round[name])
            cpu_times[name].append(cpu_round[name])
        ratios.append(per_round["after"] / per_round["before"])
        cpu_ratios.append(cpu_round["after"] / cpu_round["before"])
        loads.append(os.getloadavg()[0])
        print(
            f"round {r + 1}/{rounds}: before {per_round['before']:.3f} s, "
            f"after {per_round['after']:.3f} s, ratio {ratios[-1]:.3f} (CPU time "
            f"{cpu_ratios[-1]:.3f})",
            file=sys.stderr,
            flush=True,
        )
    mean, se = _mean_se(ratios)
    cpu_mean, cpu_se = _mean_se(cpu_ratios)
    return {
        "change": change,
        "description": CHANGES[change],
        "dtype": dtype,
        "tiny": tiny,
        "quickstart": quickstart,
        "block": block,
        "rounds": rounds,
        "first_loss": {"before": before_loss, "after": after_loss},
        "seconds_per_step": {k: statistics.median(v) for k, v in times.items()},
        "ratio_mean": mean,
        "ratio_se": se,
        "speedup": 1.0 / mean,
        "cpu_ratio_mean": cpu_mean,
        "cpu_ratio_se": cpu_se,
        "cpu_seconds_per_step": {k: statistics.median(v) for k, v in cpu_times.items()},
        "ratios": ratios,
        "cpu_ratios": cpu_ratios,
        "times": times,
        "cpu_times": cpu_times,
        "load_average_1min": loads,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--change", choices=sorted(CHANGES), required=True)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--block", type=int, default=2, help="steps per arm per round")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="tiny config: a smoke test")
    parser.add_argument(
        "--quickstart",
        action="store_true",
        help="the quickstart's step instead: tiny preset, vocab 5000, batch 32 x 128, LAMB",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(
        args.change, args.dtype, args.rounds, args.block, args.warmup, args.tiny, args.quickstart
    )
    result["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes")
    result["cpu"] = cpu_description()
    losses = result["first_loss"]
    print(
        f"{args.change} ({args.dtype}): after/before time per step {result['ratio_mean']:.4f} "
        f"+- {result['ratio_se']:.4f} (SE, {args.rounds} rounds), speedup "
        f"{result['speedup']:.3f}x; CPU time {result['cpu_ratio_mean']:.4f} +- "
        f"{result['cpu_ratio_se']:.4f}; median s/step before {result['seconds_per_step']['before']:.3f}"
        f", after {result['seconds_per_step']['after']:.3f}; first loss before "
        f"{losses['before']:.6f}, after {losses['after']:.6f}"
    )
    if args.json:
        with atomic_file(args.json) as path:
            Path(path).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
