"""`albert-tf export`: TF-Hub SavedModels (encoder with .mlm, preprocessing), TFLite and ONNX
files, keras-hub presets."""

from __future__ import annotations

import argparse
from pathlib import Path

from albert_tf.errors import ExportError
from albert_tf.export.bundle import export_bundle, export_finetuned
from albert_tf.export.writers import EXTRAS, FINETUNED_WRITERS, flag_help, flag_names
from albert_tf.io_utils import check_output_path

HELP = (
    "Export a checkpoint as TF-Hub SavedModels (encoder/, preprocess/) and optionally TFLite, "
    "ONNX, Hugging Face transformers and a keras-hub preset."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", metavar="DIR", help="checkpoint directory to export")
    parser.add_argument(
        "--sp-model",
        metavar="FILE",
        help="SentencePiece model for preprocess/ (default: spm.model in --checkpoint); "
        "without --checkpoint only preprocess/ is written",
    )
    parser.add_argument("--output", metavar="DIR", help="directory to write (not with --finetuned)")
    parser.add_argument(
        "--max-seq-length",
        "--seq-length",
        type=int,
        default=128,
        metavar="N",
        help="sequence length of preprocess/ outputs, of the TFLite encoders and of the "
        "keras-hub preset's preprocessor (default 128)",
    )
    for name in flag_names():
        parser.add_argument(
            "--" + name.replace("_", "-"), action="store_true", help=flag_help(name)
        )
    parser.add_argument(
        "--no-lower-case",
        dest="do_lower_case",
        action="store_false",
        help="do not lowercase text in preprocess/ and the hf/ and keras-hub tokenizers (for "
        "cased models)",
    )
    parser.add_argument(
        "--finetuned",
        metavar="DIR",
        help="instead: export a `finetune` output beside DIR/serving/, in the formats asked for "
        "(each flag says what it writes with --finetuned)",
    )
    parser.add_argument(
        "--from-hub",
        metavar="DIR",
        help="instead: turn an exported encoder/ back into a checkpoint directory at --output",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --output (with --finetuned: the formats' folders in DIR)",
    )


def run(args: argparse.Namespace) -> int:
    formats = {name: getattr(args, name) for name in flag_names()}
    if any(formats[name] for name, extra in EXTRAS.items() if extra == "onnx"):
        # First: the missing extra is one line, and onnxruntime-extensions must load before
        # TensorFlow (see albert_tf.export.onnx).
        import albert_tf.export.onnx  # noqa: F401

    if args.finetuned:
        if args.output or args.checkpoint or args.from_hub:
            raise ExportError(
                "--finetuned DIR writes the formats asked for beside DIR/serving/: no --output, "
                "--checkpoint or --from-hub"
            )
        reports = export_finetuned(args.finetuned, overwrite=args.overwrite, **formats)
        for writer in FINETUNED_WRITERS:
            if writer.name in reports:
                path = Path(args.finetuned) / writer.directory
                print("\n".join(writer.lines(path, reports[writer.name])))
        return 0
    if not args.output:
        raise ExportError("--output is required")
    check_output_path(args.output, args.overwrite)
    if args.from_hub:
        given = [name for name, asked in formats.items() if asked]
        if args.checkpoint or args.sp_model or given:
            raise ExportError(
                "--from-hub cannot be combined with --checkpoint, --sp-model or a format flag "
                "(it turns encoder/ back into a checkpoint)"
            )
        from albert_tf.export.load import hub_to_checkpoint_dir

        print(f"wrote {hub_to_checkpoint_dir(args.from_hub, args.output, args.overwrite)}")
        return 0

    bundle = export_bundle(
        args.checkpoint,
        args.output,
        sp_model=args.sp_model,
        seq_length=args.max_seq_length,
        overwrite=args.overwrite,
        do_lower_case=args.do_lower_case,
        **formats,
    )
    print("\n".join(bundle.lines()))
    return 0
