"""`albert-tf convert`: an original TF1 or Hugging Face ALBERT checkpoint, or a keras-hub ALBERT
preset -> our checkpoint dir."""

from __future__ import annotations

import argparse

from albert_tf.errors import ConfigError
from albert_tf.io_utils import check_output_path

HELP = (
    "Convert a TF1 (google-research/albert) or Hugging Face ALBERT checkpoint, or a keras-hub "
    "ALBERT preset."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--tf1-checkpoint", metavar="CKPT", help="TF1 checkpoint prefix (model.ckpt) or directory"
    )
    source.add_argument(
        "--hf-checkpoint",
        metavar="DIR",
        help="Hugging Face directory with config.json and model.safetensors",
    )
    source.add_argument(
        "--keras-hub-preset",
        metavar="DIR",
        help="keras-hub ALBERT preset directory (save_to_preset's layout); a classifier preset "
        'becomes a fine-tuned model directory; needs pip install -e ".[keras-hub]"',
    )
    parser.add_argument(
        "--config", metavar="JSON", help="albert_config.json (required with --tf1-checkpoint)"
    )
    parser.add_argument(
        "--sp-model",
        metavar="FILE",
        help="SentencePiece model to store as spm.model (default for HF: its spiece.model; "
        "for keras-hub: the preset's)",
    )
    parser.add_argument("--output", required=True, metavar="DIR", help="checkpoint dir to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    squad = parser.add_argument_group(
        "a TF1 checkpoint of run_squad_v2.py (ALBERT's SQuAD 2.0 head) becomes a fine-tuned squad "
        "model directory (needs --sp-model); the settings of the run it came from"
    )
    squad.add_argument("--max-seq-length", type=int, default=384, help="the run's sequence length")
    squad.add_argument("--doc-stride", type=int, default=128, help="the run's doc stride")
    squad.add_argument("--max-query-length", type=int, default=64, help="question tokens kept")
    squad.add_argument("--max-answer-length", type=int, default=30, help="longest answer in tokens")
    squad.add_argument(
        "--null-score-diff-threshold",
        type=float,
        help="the null threshold the run picked on dev (see finetune --help; default: none, so "
        "evaluating the model picks one on the evaluated file)",
    )


def run(args: argparse.Namespace) -> int:
    check_output_path(args.output, args.overwrite)
    if args.tf1_checkpoint:
        if not args.config:
            raise ConfigError("--tf1-checkpoint needs --config albert_config.json")
        from albert_tf.convert.tf1 import (
            convert_tf1_checkpoint,
            convert_tf1_squad,
            has_squad_v2_head,
        )

        if has_squad_v2_head(args.tf1_checkpoint):
            if not args.sp_model:
                raise ConfigError("a run_squad_v2.py checkpoint needs --sp-model (its tokenizer)")
            names = (
                "max_seq_length",
                "doc_stride",
                "max_query_length",
                "max_answer_length",
                "null_score_diff_threshold",
            )
            path = convert_tf1_squad(
                args.tf1_checkpoint,
                args.config,
                args.output,
                sp_model=args.sp_model,
                settings={name: getattr(args, name) for name in names},
                overwrite=args.overwrite,
            )
        else:
            path = convert_tf1_checkpoint(
                args.tf1_checkpoint,
                args.config,
                args.output,
                sp_model=args.sp_model,
                overwrite=args.overwrite,
            )
    elif args.keras_hub_preset:
        if args.config:
            raise ConfigError("--config is read from the keras-hub preset's config.json")
        from albert_tf.convert.keras_hub import convert_keras_hub_preset, import_keras_hub

        import_keras_hub()  # a missing extra is one line before any work
        path = convert_keras_hub_preset(
            args.keras_hub_preset, args.output, sp_model=args.sp_model, overwrite=args.overwrite
        )
    else:
        if args.config:
            raise ConfigError("--config is read from the Hugging Face directory's config.json")
        from albert_tf.convert.hf import convert_hf_checkpoint

        path = convert_hf_checkpoint(
            args.hf_checkpoint, args.output, sp_model=args.sp_model, overwrite=args.overwrite
        )
    print(f"wrote {path}")
    return 0
