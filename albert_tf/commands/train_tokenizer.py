"""`albert-tf train-tokenizer`: a SentencePiece vocabulary with ALBERT's recipe."""

from __future__ import annotations

import argparse

from albert_tf.commands import keyword_arguments
from albert_tf.preprocess.spm_train import train_sentencepiece
from albert_tf.preprocess.tokenizer import AlbertTokenizer

HELP = "Train a SentencePiece vocabulary (ALBERT recipe) on text files; writes PREFIX.model/.vocab."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="GLOB",
        help="text file or glob ('**' recursive, .gz ok), one sentence per line; repeatable",
    )
    parser.add_argument("--vocab-size", type=int, required=True, help="vocabulary size, e.g. 30000")
    parser.add_argument(
        "--output", required=True, metavar="PREFIX", help="writes PREFIX.model and PREFIX.vocab"
    )
    parser.add_argument(
        "--no-lower-case",
        dest="do_lower_case",
        action="store_false",
        help="keep case (cased model; pass the same to the tokenizer)",
    )
    parser.add_argument(
        "--model-type",
        choices=("unigram", "bpe"),
        default="unigram",
        help="SentencePiece's algorithm (ALBERT's vocabularies are unigram)",
    )
    parser.add_argument(
        "--character-coverage",
        type=float,
        default=0.99995,
        help="fraction of the characters the vocabulary covers; the rarest others are `<unk>`",
    )
    parser.add_argument(
        "--input-sentence-size",
        type=int,
        default=10_000_000,
        help="train on a seeded sample of at most this many lines (0: all)",
    )
    parser.add_argument("--seed", type=int, default=12345, help="seed of the sampling")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="trainer threads, and DirectRunner workers with --runner beam (default: all)",
    )
    parser.add_argument(
        "--runner",
        choices=("local", "beam"),
        default="local",
        help="local: sample on this machine (default); beam: sample with an Apache Beam "
        'pipeline, the same sample (pip install -e ".[beam]"), then train here',
    )
    parser.add_argument(
        "pipeline_args",
        nargs="*",
        metavar="-- BEAM_PIPELINE_OPTIONS",
        help="with --runner beam, Beam pipeline options after --",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace existing output files")


def run(args: argparse.Namespace) -> int:
    model = train_sentencepiece(
        **keyword_arguments(
            args,
            train_sentencepiece,
            inputs=args.input,
            output_prefix=args.output,
            num_threads=args.threads,
        )
    )
    tok = AlbertTokenizer(model, do_lower_case=args.do_lower_case)
    print(f"wrote {model} and {model.with_suffix('.vocab')} (vocab {tok.vocab_size})")
    return 0
