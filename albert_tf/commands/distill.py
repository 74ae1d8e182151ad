"""`albert-tf distill`: train an ALBERT student on unlabeled text to match a teacher's outputs
(a BERT sentence encoder's embeddings, or a fine-tuned classifier's logits), with masked-LM
alongside."""

from __future__ import annotations

import argparse
import sys

from albert_tf.distill.settings import (
    MAX_SEQ_LENGTH,
    MIN_TRAIN_STEPS,
    OPTIMIZERS,
    SENTENCE_LEARNING_RATE,
    DistillSettings,
)
from albert_tf.dtypes import DTYPES

HELP = "Distil a teacher (sentence encoder or fine-tuned classifier) into an ALBERT student."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = DistillSettings("", (), "", "")  # the defaults
    parser.add_argument(
        "--teacher",
        required=True,
        help="a BERT sentence encoder in the transformers/sentence-transformers layout "
        "(config.json, model.safetensors, vocab.txt) or a directory `finetune --task classify` "
        "wrote",
    )
    parser.add_argument(
        "--unlabeled",
        nargs="+",
        required=True,
        help="text files or globs: one text a line, or .tsv/.csv with a header and a text column",
    )
    parser.add_argument("--output", required=True, help="run and result directory")
    parser.add_argument(
        "--init",
        required=True,
        help="the student: checkpoint directory, shipped model name, a fine-tuned classifier "
        "(fine-tuned teacher only), or 'random' (with --config)",
    )
    parser.add_argument("--config", help="preset, shipped model name or JSON for --init random")
    parser.add_argument(
        "--sp-model",
        help="the student's SentencePiece model (default: the one with --init or --config, "
        "else a fine-tuned teacher's)",
    )
    parser.add_argument("--text-column", help="the text column of .tsv/.csv files")
    parser.add_argument(
        "--eval",
        help="sentence-encoder teacher: held-out texts (the student's cosine to the teacher is "
        "reported); fine-tuned teacher: a labeled file (student and teacher are scored; "
        "default: the teacher's own --eval file, where it still is)",
    )
    parser.add_argument(
        "--no-teacher-data",
        action="store_true",
        help="fine-tuned teacher: leave out its own labeled --train file (by default its texts "
        "join --unlabeled and are learned with their labels, where the file still is)",
    )
    parser.add_argument(
        "--teacher-cache",
        help="where the teacher's outputs are kept (default OUTPUT/teacher_cache)",
    )
    _add_training_arguments(parser, d)


def _add_training_arguments(parser: argparse.ArgumentParser, d) -> None:
    """How the student trains: lengths, steps, optimizer, losses, checkpoints."""
    parser.add_argument(
        "--max-seq-length",
        type=int,
        help="student tokens per text (default: a fine-tuned teacher's own, else "
        f"{MAX_SEQ_LENGTH}; at most the student's positions)",
    )
    parser.add_argument("--batch-size", type=int, default=d.batch_size, help="texts per step")
    parser.add_argument(
        "--epochs",
        type=int,
        help="passes over the texts (default: one pass and at least "
        f"{MIN_TRAIN_STEPS} steps; see --train-steps)",
    )
    parser.add_argument("--train-steps", type=int, help="steps to train (default: see --epochs)")
    parser.add_argument(
        "--learning-rate",
        type=float,
        help=f"peak rate (default: {SENTENCE_LEARNING_RATE:g} for a sentence-encoder teacher; "
        "for a fine-tuned one, finetune's default by the student's size, see "
        "`albert-tf finetune --help`)",
    )
    parser.add_argument(
        "--warmup-steps", type=int, help="steps of linear warmup (default: 6%% of the steps)"
    )
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default=d.optimizer, help="optimizer")
    parser.add_argument(
        "--weight-decay", type=float, default=d.weight_decay, help="decoupled weight decay"
    )
    parser.add_argument(
        "--mlm-weight",
        type=float,
        default=d.mlm_weight,
        help="weight of the masked-LM loss beside the teacher's (0: none, and the student reads "
        "unmasked text)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=d.temperature,
        help="fine-tuned teacher: soft targets are softmax(logits / T)",
    )
    parser.add_argument(
        "--teacher-batch-size",
        type=int,
        default=d.teacher_batch_size,
        help="teacher texts per batch",
    )
    parser.add_argument(
        "--eval-batch-size", type=int, default=d.eval_batch_size, help="texts per eval batch"
    )
    parser.add_argument(
        "--save-every", type=int, default=d.save_every, help="steps between checkpoints"
    )
    parser.add_argument(
        "--log-every", type=int, default=d.log_every, help="steps between logged means"
    )
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of batches and masks")
    parser.add_argument("--dtype", choices=DTYPES, default=d.dtype, help="compute dtype")
    parser.add_argument(
        "--overwrite", action="store_true", help="start again in an --output that holds a run"
    )


def run(args: argparse.Namespace) -> int:
    from albert_tf.distill.trainer import distill
    from albert_tf.pretraining.preemption import EXIT_PREEMPTED

    settings = DistillSettings.from_args(args)
    result = distill(
        settings, log=lambda line: print(line, file=sys.stderr), progress=not args.quiet
    )
    if result.preempted:
        print(
            f"albert-tf distill: stopped by {result.preempted} at step {result.step}: checkpoint "
            f"saved in {result.output_dir}; run the same command to resume (exit code "
            f"{EXIT_PREEMPTED})",
            file=sys.stderr,
        )
        return EXIT_PREEMPTED
    print(f"done: step {result.step}; model in {result.output_dir}")
    return 0
