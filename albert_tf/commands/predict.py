"""`albert-tf predict`: run a fine-tuned model over a task file, one JSON record per example."""

from __future__ import annotations

import argparse
import json
import os
import sys

from albert_tf.errors import ConfigError, DataError
from albert_tf.finetune.settings import QUOTINGS
from albert_tf.io_utils import atomic_file, check_output_file

HELP = "Predict with a fine-tuned model (from `albert-tf finetune`) on a task file."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        "--model",
        dest="checkpoint",
        required=True,
        metavar="DIR",
        help="the fine-tuned model: a directory written by `albert-tf finetune`",
    )
    parser.add_argument(
        "--input", required=True, help="file in the training format; labels optional"
    )
    parser.add_argument(
        "--output",
        help="JSONL output, one record per example (default: stdout). Records start with id: the "
        "input's id column (id, idx, index, guid, pairID; SQuAD and RACE ids) as the string "
        "given, else the number of its line in --input. Then classify {label, probabilities}; regress {prediction}; squad {answer, "
        "char_start, char_end, null_score_diff; on v2.0 data also best_span: the answer if the "
        "question is answered}; multiple-choice {label, probabilities}; tag "
        "{words, tags}",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    columns = parser.add_argument_group(
        "classify/regress columns of --input, where they differ from the training file's "
        "(name or 0-based index)"
    )
    columns.add_argument("--text-column", help="the text (default: as in training)")
    columns.add_argument("--text-pair-column", help="the second text of a pair")
    columns.add_argument(
        "--label-column", help="the gold label, if any (scored when every row has one)"
    )
    columns.add_argument("--no-header", action="store_true", help="--input has no header row")
    columns.add_argument(
        "--quoting",
        choices=QUOTINGS,
        help="TSV/CSV field quoting, as finetune's --quoting (default: as in training)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="texts per batch")
    parser.add_argument(
        "--runtime",
        default="tf",
        choices=("tf", "onnx", "tflite"),
        help="tf: the checkpoint in TensorFlow (default); onnx: the encoder exported to int8 "
        "ONNX, run by ONNX Runtime (needs the onnx extra); tflite: the encoder exported to "
        "int8 TFLite, run by LiteRT's XNNPACK kernels. The encoder is exported at start-up; "
        "tokenization, windows and the task head are the same for all three",
    )


def run(args: argparse.Namespace) -> int:
    from albert_tf.export.int8_encoder import runtime_encoder
    from albert_tf.finetune.predict import load_examples, load_finetuned, predict_examples
    from albert_tf.runtimes.encoder import check_runtime

    # Every argument is checked before the model loads (and long before anything is written).
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be positive, got {args.batch_size}")
    if not os.path.exists(args.input):
        raise DataError(f"--input {args.input} does not exist")
    if args.output:
        check_output_file(args.output, args.overwrite, "--output")
    if args.runtime != "tf":
        check_runtime(args.runtime)  # a missing extra is named before the model loads
    finetuned = load_finetuned(args.checkpoint)
    # The file is read before an int8 runtime's export (up to a minute for base), so a bad
    # file is refused at once.
    columns = {
        name: getattr(args, name)
        for name in ("text_column", "text_pair_column", "label_column", "quoting")
        if getattr(args, name) is not None
    }
    if args.no_header:
        columns["has_header"] = False
    task_data = load_examples(finetuned, args.input, **columns)
    encoder = None
    if args.runtime != "tf":
        seq_length = finetuned.settings.max_seq_length
        encoder = runtime_encoder(finetuned.model.encoder, args.runtime, seq_length)
    records, scores = predict_examples(finetuned, task_data, args.batch_size, encoder)
    for what, count in task_data.skipped.items():
        print(f"{args.input}: {count} {what}", file=sys.stderr)
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if args.output:
        with atomic_file(args.output, overwrite=args.overwrite) as tmp:
            tmp.write_text(lines, encoding="utf-8")
    else:
        sys.stdout.write(lines)
    if scores is not None:
        print(json.dumps({"metrics": scores}), file=sys.stderr)
    print(f"wrote {len(records)} rows to {args.output or 'stdout'}", file=sys.stderr)
    return 0
