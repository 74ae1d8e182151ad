"""Int8 serving, interleaved step by step: our int8 runtimes against ONNX Runtime on HF's ALBERT.

`albert-tf benchmark` runs each job in a fresh process, a few seconds at a time, round robin.
On a shared virtual machine whose speed moves in phases of seconds, a job can land wholly in a
slow phase, and one run's ratios then move by several percent. Here every system keeps one
process for the whole run, holding its session, and the systems take one step each in turn
(the order rotated every round, with a pause before each step so that the last system's
spinning thread pool is idle), so a slow phase falls on all of them alike. The systems and
their files are the benchmark's own (`albert_tf.benchmarking.runtime_systems`: the same
exports, runners, inputs and threads); only the schedule differs. One more system,
`ort_across_cores`, runs the peer's files through our runner (one single-threaded session per
core, 2 rows per call, `albert_tf.runtimes.across_cores`), so the table also says how much of
our lead at batch 32 is the feeding and how much the graph.

    python benchmarks/bench_int8_interleaved.py --steps 30 --json benchmarks/results/serving-int8-interleaved.json
    python benchmarks/bench_int8_interleaved.py --tiny --steps 2   # smoke test

Needs `pip install -e ".[hf,onnx]"`. Prints a table and, with --json, writes every step time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from albert_tf.benchmarking.runtime_systems import PEER_ACROSS_CORES  # noqa: E402
from albert_tf.environment import cpu_flags  # noqa: E402
from albert_tf.io_utils import atomic_file  # noqa: E402

PEER = "ort"
OURS = ("ours_onnx", "ours_tflite")
SYSTEMS = (*OURS, PEER, PEER_ACROSS_CORES)
CASES = ("inference", "latency")


def _prepare(system: str, tiny: bool, directory: str) -> None:
    from albert_tf.benchmarking import runtime_systems
    from albert_tf.benchmarking.cases import benchmark_config

    config = benchmark_config(tiny)
    seq = 16 if tiny else 128
    runtime_systems.prepare(system, config, seq, Path(directory))


def _serve(conn, system: str, case: str, tiny: bool, directory: str, threads: int) -> None:
    """Child process: builds the system's step, warms it up, then times one step per request."""
    from albert_tf.benchmarking import runtime_systems
    from albert_tf.benchmarking.cases import benchmark_config, case_shape

    config = benchmark_config(tiny)
    shape = case_shape(case, tiny)
    step, _ = runtime_systems.build(system, config, "int8", shape, Path(directory), threads)
    for _ in range(2):
        step()
    conn.send("ready")
    while conn.recv() == "step":
        start = time.perf_counter()
        step()
        conn.send(time.perf_counter() - start)


def interleave(case: str, args: argparse.Namespace, directory: str) -> dict[str, list[float]]:
    """Step times per system for `case`, the systems taking turns."""
    context = multiprocessing.get_context("spawn")
    pipes, processes = {}, []
    for system in SYSTEMS:
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve, args=(child, system, case, args.tiny, directory, args.threads)
        )
        process.start()
        pipes[system] = parent
        processes.append(process)
    for pipe in pipes.values():
        if pipe.recv() != "ready":
            raise RuntimeError("a system failed to start")
    times: dict[str, list[float]] = {system: [] for system in SYSTEMS}
    for i in range(args.steps):
        order = SYSTEMS[i % len(SYSTEMS) :] + SYSTEMS[: i % len(SYSTEMS)]
        for system in order:
            # Thread pools (ORT's, XNNPACK's) spin for a while after a call: let the last
            # system's go idle before the next system's step starts.
            time.sleep(args.pause)
            pipes[system].send("step")
            times[system].append(pipes[system].recv())
        print(f"\r{case}: round {i + 1}/{args.steps}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    for pipe in pipes.values():
        pipe.send("stop")
    for process in processes:
        process.join()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="steps per system and case")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads per system")
    parser.add_argument(
        "--pause", type=float, default=0.2, help="seconds of idle before each step (0.2)"
    )
    parser.add_argument("--tiny", action="store_true", help="tiny config: a smoke test")
    parser.add_argument("--json", type=Path, help="also write every step time here")
    args = parser.parse_args()
    from albert_tf.benchmarking.cases import case_shape

    with tempfile.TemporaryDirectory(prefix="albert-int8-") as directory:
        context = multiprocessing.get_context("spawn")
        for system in (*OURS, PEER):  # each export in a process of its own
            process = context.Process(target=_prepare, args=(system, args.tiny, directory))
            process.start()
            process.join()
            if process.exitcode:
                print(f"exporting {system} failed", file=sys.stderr)
                return 1
        results = {case: interleave(case, args, directory) for case in CASES}

    flags = sorted(f for f in cpu_flags() if f in ("avx512_vnni", "avx_vnni", "amx_int8"))
    print(f"int8, interleaved, {args.steps} steps per system; int8 instructions: {flags}")
    print(
        "| case | " + " | ".join(SYSTEMS) + f" | best of ours vs {PEER} | vs {PEER_ACROSS_CORES} |"
    )
    print("|---|" + "---|" * (len(SYSTEMS) + 2))
    summary = {}
    for case, times in results.items():
        shape = case_shape(case, args.tiny)
        medians = {s: statistics.median(t) for s, t in times.items()}
        ours = min(medians[s] for s in OURS)
        if case == "inference":
            cells = [f"{shape.batch * shape.seq / m:,.0f} tokens/s" for m in medians.values()]
            ratios = [f"{medians[peer] / ours:.3f}x throughput" for peer in SYSTEMS[len(OURS) :]]
        else:
            cells = [f"{m * 1e3:.1f} ms" for m in medians.values()]
            ratios = [f"{ours / medians[peer]:.3f}x latency" for peer in SYSTEMS[len(OURS) :]]
        print(f"| {case} {shape.batch}x{shape.seq} | " + " | ".join(cells + ratios) + " |")
        summary[case] = dict(
            median_seconds=medians,
            step_seconds=times,
            ratio=ratios[0],
            ratio_across_cores=ratios[1],
        )
    if args.json:
        with atomic_file(args.json) as tmp:
            tmp.write_text(json.dumps(dict(steps=args.steps, results=summary), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
