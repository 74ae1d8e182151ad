"""`albert-tf create-pretraining-data`: text corpus -> sharded n-gram MLM + SOP/NSP TFRecords."""

from __future__ import annotations

import argparse
import json
import os

from albert_tf.commands import keyword_arguments
from albert_tf.preprocess.pretraining_data import create_pretraining_data
from albert_tf.preprocess.pretraining_data.format import SENTENCE_TASKS
from albert_tf.preprocess.pretraining_data.pipeline import RUNNERS

HELP = "Create n-gram masked-LM + sentence-order (or next-sentence) pretraining TFRecords."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="GLOB",
        help="text file or glob (repeatable; ** recurses; .gz is read); blank lines separate "
        "documents",
    )
    parser.add_argument("--sp-model", required=True, help="SentencePiece .model file")
    parser.add_argument("--output", required=True, help="output directory (created atomically)")
    parser.add_argument(
        "--max-seq-length", type=int, default=512, help="tokens per example, [CLS] and [SEP]s in"
    )
    parser.add_argument(
        "--max-predictions-per-seq", type=int, default=20, help="most masked tokens per example"
    )
    parser.add_argument(
        "--masked-lm-prob", type=float, default=0.15, help="fraction of the tokens masked"
    )
    parser.add_argument(
        "--dupe-factor", type=int, default=10, help="times each document is used (default 10)"
    )
    parser.add_argument(
        "--short-seq-prob",
        type=float,
        default=0.1,
        help="probability of an example shorter than --max-seq-length (as in fine-tuning)",
    )
    parser.add_argument("--ngram", type=int, default=3, help="longest masked n-gram (words)")
    parser.add_argument(
        "--sentence-task",
        choices=SENTENCE_TASKS,
        default="sop",
        help="sop: ALBERT's sentence order (default); nsp: BERT's next sentence (B is random "
        "text from another document half the time); none: one segment, masked LM only",
    )
    parser.add_argument(
        "--seed", type=int, default=12345, help="seed of the masking, pairing and shuffling"
    )
    parser.add_argument("--num-shards", type=int, default=1, help="output files (default 1)")
    parser.add_argument(
        "--workers",
        type=int,
        help="worker processes, or DirectRunner workers with --runner beam (default: the CPU "
        "count, at most 4; the output does not depend on it)",
    )
    parser.add_argument(
        "--runner",
        choices=RUNNERS,
        default="local",
        help="local: this machine's process pool (default); beam: an Apache Beam pipeline with "
        'the same records (pip install -e ".[beam]"), on the DirectRunner unless Beam options '
        "after -- say otherwise",
    )
    parser.add_argument(
        "pipeline_args",
        nargs="*",
        metavar="-- BEAM_PIPELINE_OPTIONS",
        help="with --runner beam, Beam pipeline options after --, e.g. -- --runner=DataflowRunner "
        "--project=P --region=R --temp_location=gs://B/tmp",
    )
    parser.add_argument(
        "--shuffle-buffer", type=int, default=10000, help="records held for shuffling"
    )
    parser.add_argument(
        "--no-mask",
        action="store_true",
        help="write unmasked input_ids + token_boundary for dynamic masking in the input pipeline",
    )
    parser.add_argument("--no-lower-case", action="store_true", help="keep case (cased models)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    workers = min(4, os.cpu_count() or 1) if args.workers is None else args.workers
    stats = create_pretraining_data(
        **keyword_arguments(
            args,
            create_pretraining_data,
            input_patterns=args.input,
            sp_model_path=args.sp_model,
            output_dir=args.output,
            num_workers=workers,
            do_lower_case=not args.no_lower_case,
            mask=not args.no_mask,
            progress=not args.quiet,
        )
    )
    keys = ["num_documents", "num_instances", "masked_fraction", "sentence_task"]
    keys += [k for k in ("sop_swapped_fraction", "nsp_random_next_fraction") if k in stats]
    summary = {k: stats[k] for k in keys}
    summary["mb_per_second"] = round(stats["mb_per_second"], 3)
    summary["output"] = args.output
    print(json.dumps(summary))
    return 0
