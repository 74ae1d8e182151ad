"""`albert-tf export`: TF-Hub SavedModels (encoder with .mlm, preprocessing), TFLite and ONNX
files, keras-hub presets."""

from __future__ import annotations

import argparse
from typing import Any

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
    parser.add_argument(
        "--tflite",
        action="store_true",
        help="also write tflite/encoder_float32.tflite and tflite/encoder_int8.tflite; with "
        "--finetuned, DIR/tflite/ (classifier_float32.tflite, classifier_int8.tflite, "
        "labels.txt, spm.model)",
    )
    parser.add_argument(
        "--onnx",
        action="store_true",
        help="also write onnx/: encoder.onnx (float32), encoder_int8.onnx, "
        "encoder_int8_static.onnx and, with a SentencePiece model, raw-string models; "
        'needs pip install -e ".[onnx]"',
    )
    parser.add_argument(
        "--keras-hub",
        action="store_true",
        help="also write keras_hub/, a keras-hub preset (AlbertMaskedLM with an MLM head, else "
        "AlbertBackbone; AlbertTokenizer with a SentencePiece model); with --finetuned, "
        'DIR/keras_hub/ (AlbertTextClassifier); needs pip install -e ".[keras-hub]"',
    )
    parser.add_argument(
        "--hf",
        action="store_true",
        help="also write hf/: a Hugging Face transformers folder (config.json, "
        "model.safetensors, spiece.model, tokenizer.json); with --finetuned, DIR/hf/ with the "
        "task's transformers class",
    )
    parser.add_argument(
        "--no-lower-case",
        dest="do_lower_case",
        action="store_false",
        help="do not lowercase text in preprocess/ and the hf/ and keras-hub tokenizers (for "
        "cased models)",
    )
    parser.add_argument(
        "--triton",
        action="store_true",
        help="with --finetuned: also write DIR/triton/, a Triton model repository of the int8 "
        "raw-string classifier (config.pbtxt with dynamic batching, model.py, model.onnx, "
        'report.json), which `albert-tf serve DIR` serves; needs pip install -e ".[onnx]"',
    )
    parser.add_argument(
        "--finetuned",
        metavar="DIR",
        help="instead: export a `finetune` output beside DIR/serving/: with --onnx, the "
        "raw-string classifier to DIR/onnx/ (classifier.onnx, classifier_int8.onnx); with "
        "--hf, DIR/hf/; with --keras-hub, its keras-hub preset to DIR/keras_hub/; with "
        "--tflite, the token-ids classifier to DIR/tflite/",
    )
    parser.add_argument(
        "--from-hub",
        metavar="DIR",
        help="instead: turn an exported encoder/ back into a checkpoint directory at --output",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --output (with --finetuned: DIR/onnx/, DIR/hf/, DIR/keras_hub/, "
        "DIR/tflite/, DIR/triton/)",
    )


def run(args: argparse.Namespace) -> int:
    if args.onnx or args.triton:
        # First: the missing extra is one line, and onnxruntime-extensions must load before
        # TensorFlow (see export.onnx).
        import albert_tf.export.onnx  # noqa: F401
    from pathlib import Path

    from albert_tf.errors import ExportError
    from albert_tf.io_utils import check_output_path

    if args.finetuned:
        formats = {
            name: getattr(args, name) for name in ("onnx", "hf", "keras_hub", "tflite", "triton")
        }
        if not any(formats.values()) or args.output or args.checkpoint or args.from_hub:
            raise ExportError(
                "--finetuned DIR takes --onnx, --hf, --keras-hub, --tflite and/or --triton and "
                "writes DIR/onnx/, DIR/hf/, DIR/keras_hub/, DIR/tflite/, DIR/triton/: no "
                "--output, --checkpoint or --from-hub"
            )
        # Every check before any folder is written.
        for folder, wanted in formats.items():
            if wanted:
                check_output_path(Path(args.finetuned) / folder, args.overwrite)
        from albert_tf.export.bundle import export_finetuned

        reports = export_finetuned(args.finetuned, **formats)
        if "onnx" in reports:
            _print_finetuned_onnx_report(args.finetuned, reports["onnx"])
        if "hf" in reports:
            print(f"wrote {Path(args.finetuned) / 'hf'}: {reports['hf']['architecture']}")
            if reports["hf"]["note"]:
                print(f"  {reports['hf']['note']}")
        if "keras_hub" in reports:
            print(f"wrote {args.finetuned}/keras_hub")
            _print_keras_hub_report(reports["keras_hub"])
        if "tflite" in reports:
            print(f"wrote {args.finetuned}/tflite")
            _print_agreement(reports["tflite"])
        if "triton" in reports:
            from albert_tf.export.triton.repository import describe_triton

            print("\n".join(describe_triton(Path(args.finetuned) / "triton", reports["triton"])))
        return 0
    if args.triton:
        raise ExportError("--triton serves a fine-tuned classifier: use it with --finetuned DIR")
    if not args.output:
        raise ExportError("--output is required")
    check_output_path(args.output, args.overwrite)
    if args.from_hub:
        if (
            args.checkpoint
            or args.sp_model
            or args.tflite
            or args.onnx
            or args.keras_hub
            or args.hf
        ):
            raise ExportError(
                "--from-hub cannot be combined with --checkpoint, --sp-model, --tflite, --onnx, "
                "--keras-hub, --hf"
            )
        from albert_tf.export.load import hub_to_checkpoint_dir

        print(f"wrote {hub_to_checkpoint_dir(args.from_hub, args.output, args.overwrite)}")
        return 0

    from albert_tf.export.bundle import export_bundle

    formats = {name: getattr(args, name) for name in ("tflite", "onnx", "keras_hub", "hf")}
    bundle = export_bundle(
        args.checkpoint,
        args.output,
        sp_model=args.sp_model,
        seq_length=args.max_seq_length,
        overwrite=args.overwrite,
        do_lower_case=args.do_lower_case,
        **formats,
    )
    _print_bundle(bundle)
    return 0


def _print_bundle(bundle: Any) -> None:
    """What `export_bundle` wrote, a line per part, and the reports' figures."""
    if bundle.encoder:
        mlm = "with .mlm" if bundle.has_mlm else "without .mlm (no MLM head in the checkpoint)"
        print(f"wrote {bundle.encoder} ({mlm})")
    if bundle.preprocess:
        print(f"wrote {bundle.preprocess}")
    if bundle.tflite_report:
        report = bundle.tflite_report
        print(
            f"wrote {bundle.tflite}: SavedModel variables {report['saved_model_variable_bytes']:,} B"
        )
        for kind in ("float32", "int8"):
            print(
                f"  {kind}: {report[f'{kind}_bytes']:,} B, pooled_output cosine similarity "
                f"to the SavedModel >= {report[f'{kind}_pooled_cosine']:.6f}"
            )
    if bundle.onnx_report:
        print(f"wrote {bundle.onnx}: fused {bundle.onnx_report['fused_ops']}")
        for kind, accuracy in bundle.onnx_report["accuracy"].items():
            print(
                f"  {kind}: pooled_output cosine similarity to the SavedModel >= "
                f"{accuracy['pooled_min_cosine']:.6f}, max |diff| "
                f"{accuracy['sequence_max_abs_diff']:.2e}"
            )
    if bundle.hf:
        print(f"wrote {bundle.hf}: {bundle.hf_architecture}")
    if bundle.keras_hub_report:
        print(f"wrote {bundle.keras_hub}")
        _print_keras_hub_report(bundle.keras_hub_report)


def _print_finetuned_onnx_report(finetuned: str, report: dict) -> None:
    print(f"wrote {finetuned}/onnx: fused {report['fused_ops']}")
    _print_agreement(report)


def _print_agreement(report: dict) -> None:
    """How each file of a fine-tuned export agrees with serving/ on the probe texts."""
    if report["serving_dtype"] != "float32":
        print(
            f"  serving/ computes in {report['serving_dtype']} (fine-tuned so), the exported "
            "classifiers in float32 and int8: their probabilities differ by its rounding too"
        )
    for name, agreement in report["against_serving"].items():
        print(
            f"  {name}: labels equal to serving/ on {agreement['label_agreement']:.1%} of "
            f"the probe texts, probabilities within {agreement['probabilities_max_abs_diff']:.1e}"
        )


def _print_keras_hub_report(report: dict) -> None:
    """One line per note, one for the outputs' agreement, one for the tokenizer."""
    for note in report["notes"]:
        print(f"  note: {note}")
    differences = ", ".join(f"{k} {v:.1e}" for k, v in report["max_abs_diff"].items())
    print(f"  {report['task']}: largest difference from ours on probe inputs: {differences}")
    if report["tokenizer"] is not None:
        print(
            "  AlbertTokenizer: our ids except on "
            + "; ".join(report["tokenizer"]["differs_from_albert_on"])
        )
