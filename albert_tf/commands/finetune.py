"""`albert-tf finetune`: fine-tune an encoder on a classification, regression, SQuAD,
multiple-choice or tagging task; keeps the best epoch by the task's metric."""

from __future__ import annotations

import argparse
import sys

from albert_tf.dtypes import DTYPES
from albert_tf.finetune.defaults import help_text
from albert_tf.finetune.settings import (
    OPTIMIZERS,
    QUOTINGS,
    SQUAD_HEADS,
    TASK_NAMES,
    WINDOW_PLACEMENTS,
    WINDOW_POOLINGS,
    FinetuneSettings,
    cli_defaults,
)
from albert_tf.io_utils import check_output_path, sigterm_interrupts

HELP = "Fine-tune ALBERT on classify, regress, squad, multiple-choice (RACE) or tag (CoNLL) data."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = help_text()
    _add_run_arguments(parser)
    _add_optimization_arguments(parser)
    _add_task_arguments(parser)
    parser.add_argument("--no-serving", action="store_true", help="skip the serving SavedModel")
    parser.set_defaults(**cli_defaults())


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """What a run reads and writes: the task, its files, the model it starts from."""
    parser.add_argument(
        "--task",
        required=True,
        choices=TASK_NAMES,
        help="classify: a label per text (pair); regress: a number per text (pair); squad: "
        "answer spans (with ALBERT's own SQuAD 2.0 head on v2.0 data, see --squad-head); "
        "multiple-choice: RACE; tag: a tag per word (CoNLL)",
    )
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


def _add_optimization_arguments(parser: argparse.ArgumentParser) -> None:
    """How it trains: epochs, batches, the optimizer, steps, seeds, restarts, dtype."""
    parser.add_argument(
        "--epochs", type=int, help="passes over --train (default: by model size, see below)"
    )
    parser.add_argument("--batch-size", type=int, help="training rows per step")
    parser.add_argument("--eval-batch-size", type=int, help="texts per evaluation batch")
    parser.add_argument(
        "--learning-rate",
        type=float,
        help="peak learning rate, reached after warmup and decayed linearly to 0 (default: by "
        "model size, see below)",
    )
    parser.add_argument(
        "--warmup-proportion",
        type=float,
        help="fraction of the training steps over which the learning rate rises from 0 "
        "(default: by model size, see below)",
    )
    parser.add_argument("--optimizer", choices=OPTIMIZERS, help="adamw (BERT's) or lamb")
    parser.add_argument(
        "--weight-decay", type=float, help="decoupled weight decay (not on biases, LayerNorm)"
    )
    parser.add_argument(
        "--reinit-pooler",
        action=argparse.BooleanOptionalAction,
        help="start the pooler (the dense layer over [CLS] that gives pooled_output) from fresh "
        "random weights instead of pretrained ones, which pretraining fitted to sentence order "
        "(default: by model size, see below)",
    )
    parser.add_argument(
        "--max-seq-length", type=int, help="tokens per text (pair) or window, [CLS] and [SEP]s in"
    )
    parser.add_argument(
        "--train-steps",
        "--max-steps",
        dest="train_steps",
        type=int,
        help="train at most this many steps (default: --epochs over --train); 0 evaluates the "
        "start",
    )
    parser.add_argument("--seed", type=int, help="seed of the head's weights and the shuffling")
    parser.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="run N times, with seeds --seed, --seed+1, ...: prints the mean and sd of the best "
        "epochs' metric on --eval (the figure to report; one run is a draw) and keeps the run "
        "best on --eval (the one to deploy; its own dev score is optimistic, so judge it on a "
        "test split)",
    )
    parser.add_argument(
        "--restarts",
        type=int,
        metavar="N",
        help="with --eval, one seed and some training: when a run's best epoch does not beat "
        "the majority class (or the mean) by more than its standard error, start again with the "
        "next seed, up to N more times, and keep the best run; fine-tuning from a small or "
        "briefly pretrained model sometimes learns nothing from one seed and does from another "
        "(0: never)",
    )
    parser.add_argument("--dtype", choices=DTYPES, help="compute dtype (auto: the machine's best)")


def _add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of some tasks only: columns, long-text windows, SQuAD."""
    text = parser.add_argument_group("classify/regress columns (name or 0-based index)")
    text.add_argument(
        "--text-column",
        help="the text (default: a recognised header name, see the fine-tuning guide)",
    )
    text.add_argument("--text-pair-column", help="the second text of a pair, if any")
    text.add_argument(
        "--label-column",
        help="the label (default: a recognised header name; without a header, the one column "
        "that is not text)",
    )
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
    _add_squad_arguments(parser)


def _add_squad_arguments(parser: argparse.ArgumentParser) -> None:
    """The SQuAD options: the head, features, decoding and the null threshold."""
    squad = parser.add_argument_group("squad")
    squad.add_argument(
        "--squad-head",
        choices=SQUAD_HEADS,
        help="albert: ALBERT's own SQuAD 2.0 head, as google-research/albert's run_squad_v2.py "
        "trains and decodes it (a start distribution, end logits conditioned on the start with a "
        "--start-n-top x --end-n-top beam, and an answer-class logit that decides 'no answer'); "
        "bert: independent start and end logits, 'no answer' from the [CLS] span's score "
        "(default: albert on v2.0 data, where some questions have no answer; bert on v1.1)",
    )
    squad.add_argument(
        "--doc-stride", type=int, help="tokens between the starts of a context's windows"
    )
    squad.add_argument("--max-query-length", type=int, help="question tokens kept")
    squad.add_argument(
        "--n-best-size",
        type=int,
        help="answers kept per question (bert: start and end candidates per window)",
    )
    squad.add_argument("--max-answer-length", type=int, help="longest answer in tokens")
    squad.add_argument("--start-n-top", type=int, help="albert head: starts in the beam")
    squad.add_argument("--end-n-top", type=int, help="albert head: ends kept per start")
    squad.add_argument(
        "--null-score-diff-threshold",
        type=float,
        help="v2.0 'no answer' threshold. albert head: 'no answer' when the answer-class logit "
        "(least over the windows) is at least this; by default the threshold that gives the best "
        "F1 on --eval is picked (the official v2.0 search, as run_squad_v2.py does) and kept with "
        "the model, 0.0 without --eval. bert head: 'no answer' when the null score beats the "
        "best span's by more than this (default 0.0)",
    )


def run(args: argparse.Namespace) -> int:
    from albert_tf.finetune.trainer import finetune

    settings = FinetuneSettings.from_args(args)
    check_output_path(settings.output, settings.overwrite)
    # SIGTERM (a preempted VM) unwinds like Ctrl-C: the output, written in a temporary
    # directory renamed into place at the end, is then removed, not left half-written.
    with sigterm_interrupts():
        finetune(settings, log=lambda line: print(line, file=sys.stderr), progress=not args.quiet)
    return 0
