"""`albert-tf finetune`: fine-tune an encoder on a classification, regression, SQuAD,
multiple-choice or tagging task; keeps the best epoch by the task's metric."""

from __future__ import annotations

import argparse

HELP = "Fine-tune ALBERT on classify, regress, squad, multiple-choice (RACE) or tag (CoNLL) data."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_tf.dtypes import DTYPES
    from albert_tf.finetune.settings import (
        OPTIMIZERS,
        QUOTINGS,
        TASK_NAMES,
        WINDOW_PLACEMENTS,
        WINDOW_POOLINGS,
        cli_defaults,
    )

    parser.add_argument("--task", required=True, choices=TASK_NAMES)
    parser.add_argument(
        "--train",
        required=True,
        help="training file: GLUE .tsv, .csv or .jsonl (classify/regress), SQuAD v1.1/v2.0 JSON, "
        "RACE file or directory, CoNLL file",
    )
    parser.add_argument("--eval", help="evaluation file (same format); evaluated after each epoch")
    parser.add_argument(
        "--init",
        required=True,
        help="checkpoint directory, original TF1 checkpoint (with --config), TF-Hub encoder "
        "directory, or 'random' (with --config)",
    )
    parser.add_argument("--output", required=True, help="output directory (must not exist)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parser.add_argument(
        "--config", help="albert_config.json or preset for TF1 checkpoints and 'random'"
    )
    parser.add_argument("--sp-model", help="SentencePiece model (default: the one with --init)")
    parser.add_argument("--no-lower-case", action="store_true", help="the model is cased")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--eval-batch-size", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--warmup-proportion", type=float)
    parser.add_argument("--optimizer", choices=OPTIMIZERS)
    parser.add_argument("--weight-decay", type=float)
    parser.add_argument("--max-seq-length", type=int)
    parser.add_argument("--max-steps", type=int, help="stop after this many training steps")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--dtype", choices=DTYPES, help="compute dtype (auto: the machine's best)")
    text = parser.add_argument_group("classify/regress columns (name or 0-based index)")
    text.add_argument("--text-column")
    text.add_argument("--text-pair-column")
    text.add_argument("--label-column")
    text.add_argument("--no-header", action="store_true", help="the TSV/CSV has no header row")
    text.add_argument(
        "--quoting",
        choices=QUOTINGS,
        help="TSV/CSV field quoting: csv (as Python's csv module and pandas write: a field with "
        "a tab, quote or line break is quoted), none (GLUE: a quote is text), auto (default: csv "
        "for .csv files; for a TSV, csv exactly when a csv writer gives the file back)",
    )
    text.add_argument("--labels", help="comma-separated class names (default: those in --train)")
    long = parser.add_argument_group("classify/regress/tag long texts (windows)")
    long.add_argument(
        "--max-windows",
        type=int,
        help="read up to K windows of --max-seq-length per text and pool the window logits "
        "(default %(default)s; 1 reads one window, the text's start)",
    )
    long.add_argument(
        "--window-stride",
        type=int,
        help="tokens between window starts (default: half a window, so windows overlap by half)",
    )
    long.add_argument(
        "--window-placement",
        choices=WINDOW_PLACEMENTS,
        help="where the K windows go on a text that needs more: head (the first K), spread (evenly "
        "from the first token to the last) or head-tail (half at each end); a text that fits in "
        "K windows keeps them all (default %(default)s)",
    )
    long.add_argument(
        "--window-pooling",
        choices=WINDOW_POOLINGS,
        help="how window logits make the text's (default %(default)s); training pools the same way",
    )
    long.add_argument(
        "--max-first-segment-length",
        type=int,
        help="text pairs: tokens of the first text kept whole in every window of the second "
        "(default: half the window)",
    )
    squad = parser.add_argument_group("squad")
    squad.add_argument("--doc-stride", type=int)
    squad.add_argument("--max-query-length", type=int)
    squad.add_argument("--n-best-size", type=int)
    squad.add_argument("--max-answer-length", type=int)
    squad.add_argument("--null-score-diff-threshold", type=float)
    parser.add_argument("--no-serving", action="store_true", help="skip the serving SavedModel")
    parser.set_defaults(**cli_defaults())


def run(args: argparse.Namespace) -> int:
    import sys

    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.trainer import finetune
    from albert_tf.io_utils import check_output_path, sigterm_interrupts

    settings = FinetuneSettings.from_args(args)
    check_output_path(settings.output_dir, settings.overwrite)
    # SIGTERM (a preempted VM) unwinds like Ctrl-C: the output, written in a temporary
    # directory renamed into place at the end, is then removed, not left half-written.
    with sigterm_interrupts():
        finetune(settings, log=lambda line: print(line, file=sys.stderr))
    return 0
