"""albert-tf's inference on each CPU path TensorFlow offers: oneDNN off or on, with or without XLA.

The candidates for CPUs where TensorFlow leaves oneDNN off (issue 19), measured side by side:

- `eigen`: TF_ENABLE_ONEDNN_OPTS=0, the encoder's `tf.function` (TensorFlow's Eigen kernels);
- `eigen+xla`: the same function with `jit_compile=True` (XLA's CPU compiler);
- `onednn`: TF_ENABLE_ONEDNN_OPTS=1, traced inside `fused_cpu_inference()` as `albert-tf
  predict` and the benchmark trace it (what albert-tf runs on such a CPU);
- `onednn+xla`: TF_ENABLE_ONEDNN_OPTS=1 with `jit_compile=True` (XLA replaces the fused kernels).

ALBERT-base, float32, batch 32 x 128 (tokens/s) and 1 x 128 (ms per call). Each path runs in its
own process (TensorFlow reads TF_ENABLE_ONEDNN_OPTS once), --rounds times round robin; figures
are medians over all rounds' steps.

    python benchmarks/bench_inference_paths.py [--rounds 2] [--iters 5] [--tiny]
        [--json benchmarks/results/inference_paths.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
from pathlib import Path

from albert_tf.benchmarking.worker import RESULT_MARKER, run_marked
from albert_tf.runtimes import available_cores

# path: (TF_ENABLE_ONEDNN_OPTS, jit_compile)
PATHS = {
    "eigen": ("0", False),
    "eigen+xla": ("0", True),
    "onednn": ("1", False),
    "onednn+xla": ("1", True),
}


def run_child(path: str, iters: int, tiny: bool) -> dict:
    import tensorflow as tf

    from albert_tf.benchmarking import tf_systems
    from albert_tf.benchmarking.cases import benchmark_config, case_shape, make_batch
    from albert_tf.benchmarking.worker import time_steps
    from albert_tf.encoder import AlbertEncoder
    from albert_tf.layers.fused import fused_cpu_inference

    tf_systems.configure_threads(available_cores(), 1)
    config = benchmark_config(tiny)
    encoder = AlbertEncoder(config)
    _, xla = PATHS[path]
    result = {"path": path, "onednn": tf_systems.onednn_in_use()}
    for case in ("inference", "latency"):
        shape = case_shape(case, tiny)
        arrays = make_batch(config, shape)
        inputs = {k: tf.constant(arrays[k]) for k in tf_systems.ENCODER_KEYS}

        @tf.function(jit_compile=xla)
        def infer(inputs):
            return encoder(inputs, training=False)["pooled_output"]

        with fused_cpu_inference(not xla):
            infer(inputs).numpy()  # traced (and compiled) here
        steps = iters * (4 if case == "latency" else 1)
        times = time_steps(lambda x=inputs: infer(x).numpy(), warmup=1, iters=steps)
        result[case] = {"times": times, "tokens": shape.batch * shape.seq}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="tiny config: a smoke test")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(RESULT_MARKER + json.dumps(run_child(args.child, args.iters, args.tiny)), flush=True)
        return 0
    runs: dict[str, list[dict]] = {path: [] for path in PATHS}
    for round_ in range(args.rounds):
        for path, (onednn, _) in PATHS.items():
            print(f"round {round_ + 1}/{args.rounds}: {path}", file=sys.stderr, flush=True)
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS=onednn)
            argv = [sys.executable, __file__, "--child", path, "--iters", str(args.iters)]
            argv += ["--tiny"] if args.tiny else []
            try:
                runs[path].append(run_marked(argv, env))
            except RuntimeError as e:
                sys.exit(f"{path} failed: {e}")
    rows = []
    for path, results in runs.items():
        row = {"path": path, "onednn": results[0]["onednn"]}
        for case in ("inference", "latency"):
            times = [t for r in results for t in r[case]["times"]]
            row[case] = statistics.median(times)
            row[f"{case}_tokens_per_s"] = results[0][case]["tokens"] / row[case]
        rows.append(row)
    base = rows[0]
    print("| path | oneDNN | inference tokens/s | vs eigen | latency ms | vs eigen |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['path']} | {'on' if row['onednn'] else 'off'} "
            f"| {row['inference_tokens_per_s']:,.0f} | {base['inference'] / row['inference']:.2f}x "
            f"| {1e3 * row['latency']:.1f} | {base['latency'] / row['latency']:.2f}x |"
        )
    from albert_tf.benchmarking.machine import cpu_description

    cpu = cpu_description()
    print(f"\nCPU: {cpu['model']}, {cpu['cores']} cores; {' '.join(cpu['flags']).upper()}")
    if args.json:
        payload = {"date": datetime.date.today().isoformat(), "cpu": cpu, "rows": rows}
        payload["options"] = {"rounds": args.rounds, "iters": args.iters, "tiny": args.tiny}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
