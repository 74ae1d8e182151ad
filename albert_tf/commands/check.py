"""`albert-tf check`: run the pretraining step on this machine's devices, stage by stage."""

from __future__ import annotations

import argparse
import dataclasses
import json

from albert_tf.errors import ConfigError
from albert_tf.io_utils import atomic_file, check_output_file, check_output_path, is_remote
from albert_tf.pretraining.settings import (
    DEFAULT_STEPS_PER_LOOP,
    DTYPE_CHOICES,
    JIT_CHOICES,
    STRATEGY_CHOICES,
)

HELP = (
    "Check that pretraining works here (strategy, dtype, XLA compile, a few loops, checkpoint "
    "save/restore) on synthetic batches; prints examples/s and the host time per step."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="base", help="preset or albert_config.json")
    parser.add_argument(
        "--strategy",
        default="default",
        choices=STRATEGY_CHOICES,
        help="tf.distribute strategy to check (as pretrain's)",
    )
    parser.add_argument("--tpu", help="TPU name or grpc:// address (with --strategy tpu)")
    parser.add_argument(
        "--dtype", default="auto", choices=DTYPE_CHOICES, help="compute dtype (as pretrain's)"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="global batch size")
    parser.add_argument(
        "--max-seq-length",
        "--seq-length",
        dest="seq_length",
        type=int,
        default=128,
        help="tokens per example of the synthetic batches",
    )
    parser.add_argument(
        "--max-predictions-per-seq", type=int, default=20, help="masked tokens per example"
    )
    parser.add_argument(
        "--steps-per-loop",
        type=int,
        help="training steps per host loop (as pretrain's); default "
        + ", ".join(f"{n} on {kind}" for kind, n in DEFAULT_STEPS_PER_LOOP.items()),
    )
    parser.add_argument(
        "--grad-accum-steps", type=int, default=1, help="micro-batches per update (as pretrain's)"
    )
    parser.add_argument(
        "--jit-compile", default="auto", choices=JIT_CHOICES, help="XLA (as pretrain's)"
    )
    parser.add_argument("--loops", type=int, default=3, help="timed loops after the first")
    parser.add_argument(
        "--output", help="checkpoint directory for the save/restore stage (default: temporary)"
    )
    parser.add_argument("--json", help="also write the stages and figures to this JSON file")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs")


def run(args: argparse.Namespace) -> int:
    from albert_tf.pretraining.check import CheckSettings, run_check

    if args.loops <= 0:
        raise ConfigError("--loops must be positive")
    for flag, value in (
        ("--max-seq-length", args.seq_length),
        ("--max-predictions-per-seq", args.max_predictions_per_seq),
    ):
        if value <= 0:
            raise ConfigError(f"{flag} must be positive")
    if args.json:
        check_output_file(args.json, args.overwrite, "--json")
    if args.output and not is_remote(args.output):
        check_output_path(args.output, overwrite=args.overwrite)
    fields = {f.name for f in dataclasses.fields(CheckSettings)}
    settings = CheckSettings(**{k: v for k, v in vars(args).items() if k in fields})
    report = run_check(settings)
    if args.json:
        with atomic_file(args.json) as tmp:
            tmp.write_text(
                json.dumps(
                    {
                        "ok": report.ok,
                        "stages": [dataclasses.asdict(s) for s in report.stages],
                        "figures": report.figures,
                    },
                    indent=2,
                )
                + "\n"
            )
    return 0 if report.ok else 1
