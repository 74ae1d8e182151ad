"""`albert-tf quickstart`: pretrain a tiny ALBERT on the embedded corpus and export it."""

from __future__ import annotations

import argparse

from albert_tf.quickstart import DEFAULT_MINUTES, DEFAULT_OUT, run_quickstart

HELP = (
    "Build a corpus from Python's own docs, train a vocabulary, pretrain a tiny ALBERT on the "
    "CPU, export TF-Hub modules and demo them (a few minutes on 2 cores)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output directory (default: ./{DEFAULT_OUT})",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=DEFAULT_MINUTES,
        help=f"pretraining wall time in minutes (default: {DEFAULT_MINUTES:g})",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parser.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="pretraining's compute dtype (default: auto, bfloat16 where the CPU has AMX or "
        "AVX-512 BF16, else float32)",
    )


def run(args: argparse.Namespace) -> int:
    run_quickstart(args.output, minutes=args.minutes, overwrite=args.overwrite, dtype=args.dtype)
    return 0
