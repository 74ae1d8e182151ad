"""`albert-tf finetune`: fine-tune an encoder on a classification, regression, SQuAD,
multiple-choice or tagging task; keeps the best epoch by the task's metric."""

from __future__ import annotations

import argparse

HELP = "Fine-tune ALBERT on classify, regress, squad, multiple-choice (RACE) or tag (CoNLL) data."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_tf.dtypes import DTYPES
    from albert_tf.finetune.data import QUOTINGS
    from albert_tf.finetune.tasks import TASK_NAMES
    from albert_tf.finetune.tasks.base import WINDOW_PLACEMENTS, WINDOW_POOLINGS

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
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--warmup-proportion", type=float, default=0.1)
    parser.add_argument("--optimizer", choices=("adamw", "lamb"), default="adamw")
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--max-steps", type=int, help="stop after this many training steps")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument(
        "--dtype", default="auto", choices=DTYPES, help="compute dtype (auto: the machine's best)"
    )
    text = parser.add_argument_group("classify/regress columns (name or 0-based index)")
    text.add_argument("--text-column")
    text.add_argument("--text-pair-column")
    text.add_argument("--label-column")
    text.add_argument("--no-header", action="store_true", help="the TSV/CSV has no header row")
    text.add_argument(
        "--quoting",
        choices=QUOTINGS,
        default="auto",
        help="TSV/CSV field quoting: csv (as Python's csv module and pandas write: a field with "
        "a tab, quote or line break is quoted), none (GLUE: a quote is text), auto (default: csv "
        "for .csv files; for a TSV, csv exactly when a csv writer gives the file back)",
    )
    text.add_argument("--labels", help="comma-separated class names (default: those in --train)")
    long = parser.add_argument_group("classify/regress/tag long texts (windows)")
    long.add_argument(
        "--max-windows",
        type=int,
        default=1,
        help="read up to K windows of --max-seq-length per text and pool the window logits "
        "(default 1: one window, the text's start)",
    )
    long.add_argument(
        "--window-stride",
        type=int,
        help="tokens between window starts (default: half a window, so windows overlap by half)",
    )
    long.add_argument(
        "--window-placement",
        choices=WINDOW_PLACEMENTS,
        default="head",
        help="where the K windows go on a text that needs more: head (the first K), spread (evenly "
        "from the first token to the last) or head-tail (half at each end); a text that fits in "
        "K windows keeps them all",
    )
    long.add_argument(
        "--window-pooling",
        choices=WINDOW_POOLINGS,
        default="mean",
        help="how window logits make the text's (default mean); training pools the same way",
    )
    long.add_argument(
        "--max-first-segment-length",
        type=int,
        help="text pairs: tokens of the first text kept whole in every window of the second "
        "(default: half the window)",
    )
    squad = parser.add_argument_group("squad")
    squad.add_argument("--doc-stride", type=int, default=128)
    squad.add_argument("--max-query-length", type=int, default=64)
    squad.add_argument("--n-best-size", type=int, default=20)
    squad.add_argument("--max-answer-length", type=int, default=30)
    squad.add_argument("--null-score-diff-threshold", type=float, default=0.0)
    parser.add_argument("--no-serving", action="store_true", help="skip the serving SavedModel")


def task_settings(args: argparse.Namespace):
    """The TaskSettings the flags describe."""
    from albert_tf.finetune.tasks import TaskSettings

    return TaskSettings(
        task=args.task,
        max_seq_length=args.max_seq_length,
        labels=args.labels.split(",") if args.labels else None,
        text_column=args.text_column,
        text_pair_column=args.text_pair_column,
        label_column=args.label_column,
        has_header=not args.no_header,
        quoting=args.quoting,
        doc_stride=args.doc_stride,
        max_query_length=args.max_query_length,
        n_best_size=args.n_best_size,
        max_answer_length=args.max_answer_length,
        null_score_diff_threshold=args.null_score_diff_threshold,
        max_windows=args.max_windows,
        window_stride=args.window_stride,
        window_pooling=args.window_pooling,
        window_placement=args.window_placement,
        max_first_segment_length=args.max_first_segment_length,
    )


def run(args: argparse.Namespace) -> int:
    import sys

    from albert_tf.finetune.trainer import FinetuneSettings, TrainSettings, finetune
    from albert_tf.io_utils import check_output_path

    check_output_path(args.output, args.overwrite)
    train = TrainSettings(
        epochs=args.epochs,
        batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size,
        learning_rate=args.learning_rate,
        warmup_proportion=args.warmup_proportion,
        optimizer=args.optimizer,
        weight_decay=args.weight_decay,
        seed=args.seed,
        dtype=args.dtype,
        max_steps=args.max_steps,
    )
    settings = FinetuneSettings(
        train_path=args.train,
        output_dir=args.output,
        init=args.init,
        task=task_settings(args),
        train=train,
        eval_path=args.eval,
        config=args.config,
        sp_model=args.sp_model,
        do_lower_case=not args.no_lower_case,
        overwrite=args.overwrite,
        export_serving=not args.no_serving,
    )
    finetune(settings, log=lambda line: print(line, file=sys.stderr))
    return 0
