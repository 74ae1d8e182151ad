"""`albert-tf evaluate`: MLM and sentence-task loss and accuracy of a checkpoint on prepared data."""

from __future__ import annotations

import argparse
import json

from albert_tf.io_utils import atomic_file, check_output_file
from albert_tf.pretraining.settings import DTYPE_CHOICES

HELP = "Evaluate a checkpoint's masked-LM and sentence-task heads on pretraining TFRecords."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="checkpoint directory (pretrain or convert output; its latest checkpoint) or a "
        "ckpt-N prefix in one",
    )
    parser.add_argument(
        "--eval",
        "--data",
        required=True,
        metavar="GLOB",
        help="glob(s) of create-pretraining-data TFRecords, comma-separated; their "
        "metadata.json names the sentence task (sop, nsp or none)",
    )
    parser.add_argument("--json", help="also write the result to this JSON file (atomically)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json")
    parser.add_argument("--batch-size", type=int, default=32, help="evaluation batch (default 32)")
    parser.add_argument(
        "--max-eval-examples",
        "--max-examples",
        type=int,
        metavar="N",
        help="evaluate the first N examples of --eval only",
    )
    parser.add_argument(
        "--dtype", default="float32", choices=DTYPE_CHOICES, help="compute dtype of the model"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from albert_tf.pretraining.evaluate import evaluate

    if args.json:  # before the evaluation, not after
        check_output_file(args.json, args.overwrite, "--json")
    result = evaluate(
        args.checkpoint,
        args.eval,
        batch_size=args.batch_size,
        max_examples=args.max_eval_examples,
        dtype=args.dtype,
        progress=not args.quiet,
    )
    line = json.dumps(result)
    print(line)
    if args.json:
        with atomic_file(args.json, overwrite=args.overwrite) as tmp:
            tmp.write_text(line + "\n", encoding="utf-8")
    return 0
