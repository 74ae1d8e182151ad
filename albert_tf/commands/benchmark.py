"""`albert-tf benchmark`: speed, memory and MFU of albert-tf next to its peers, in one run."""

from __future__ import annotations

import argparse
import json
import sys

from albert_tf import progress as progress_bars
from albert_tf.benchmarking import BenchmarkOptions, render_table, run_benchmark
from albert_tf.benchmarking.cases import BENCH_DTYPES
from albert_tf.dtypes import resolve_dtype
from albert_tf.io_utils import atomic_file, check_output_file

HELP = (
    "Benchmark inference, latency and training against tf-models-official, HF, keras-hub "
    "and ONNX Runtime on HF's model."
)


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cases",
        type=_csv,
        default=("inference", "latency", "train", "matmul"),
        help="comma-separated subset of inference,latency,train,matmul (default: all)",
    )
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16", "int8", "all"),
        help="compute dtype; auto picks the fastest accurate float one for this machine "
        "(default); int8 runs the int8 exports (ONNX, TFLite) and the ORT peer's; all: every one",
    )
    parser.add_argument(
        "--peers",
        type=_csv,
        default=None,
        help="comma-separated subset of tfm,hf,kerashub,ort (default: every installed peer)",
    )
    parser.add_argument(
        "--runtimes",
        type=_csv,
        default=None,
        help="comma-separated subset of tf,onnx,tflite: the runtimes our encoder runs in "
        "(as with `albert-tf predict --runtime`; default: every installed one)",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny config, 1 step: a smoke test")
    parser.add_argument("--json", metavar="PATH", help="also write the records as JSON here")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per job (default 2)")
    parser.add_argument("--iters", type=int, default=5, help="timed steps per job (default 5)")
    parser.add_argument(
        "--latency-iters",
        type=int,
        default=100,
        help="timed steps of the latency case (default 100)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every job this many times, round robin; figures over all rounds' steps (1)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="intra-op threads for every system (all cores)"
    )
    parser.add_argument(
        "--hf-bf16",
        default="best",
        choices=("best", "cast", "autocast"),
        help="how HF runs bf16 inference; best measures both and keeps the faster",
    )
    parser.add_argument(
        "--onednn-off-path",
        action="store_true",
        help="run TensorFlow peers with TF_ENABLE_ONEDNN_OPTS=0, as TensorFlow runs them on CPUs "
        "without AVX-512; albert-tf runs as it does there (oneDNN on where the CPU has AVX2)",
    )
    parser.add_argument(
        "--no-isolate",
        action="store_true",
        help="share one process per backend instead of one per job (faster, less clean memory)",
    )


def run(args: argparse.Namespace) -> int:
    if args.json:  # before minutes of benchmarking, not after
        check_output_file(args.json, args.overwrite, "--json")
    if args.dtype == "all":
        dtypes = BENCH_DTYPES
    else:
        dtypes = (args.dtype if args.dtype == "int8" else resolve_dtype(args.dtype),)
    options = BenchmarkOptions(
        cases=args.cases,
        dtypes=dtypes,
        peers=args.peers,
        tiny=args.tiny,
        warmup=args.warmup,
        iters=args.iters,
        latency_iters=args.latency_iters,
        hf_bf16=args.hf_bf16,
        isolate=not (args.no_isolate or args.tiny),
        rounds=args.rounds,
        onednn_off_path=args.onednn_off_path,
        runtimes=args.runtimes,
    )
    if args.threads is not None:
        options.intra_threads = args.threads
    bars = []

    def progress(done: int, total: int, text: str) -> None:
        if not bars:
            bars.append(progress_bars.bar(total=total, desc="benchmark", unit="process"))
        bars[0].update(done - bars[0].n)
        bars[0].set_postfix_str(text[:60])

    result = run_benchmark(options, progress=progress)
    for bar in bars:
        bar.close()
    print(render_table(result))
    if args.json:
        with atomic_file(args.json, overwrite=args.overwrite) as tmp:
            tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
