"""The writers of `albert-tf export`: one record per exported format, one signature.

A writer reads an `ExportSource` (a checkpoint and a SentencePiece model, each loaded once, or a
fine-tuned model) and writes one new directory: `write(source, target) -> report`, where the
report (a dict, or None) is written as `target/report.json` when the record says so, here and
nowhere else. `export_bundle` runs the checkpoint writers under one output directory,
`export_finetuned` the fine-tuned ones beside a fine-tuned model; both go through `write_each`.

A record names its functions as "module:function", imported only when that writer runs: the
writers of the extras (ONNX, keras-hub) import packages a core install does not have.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from albert_tf.errors import ExportError
from albert_tf.io_utils import atomic_dir

REPORT_FILE = "report.json"


@dataclasses.dataclass(frozen=True)
class ExportSource:
    """What the writers read, loaded once per export.

    Attributes:
        config: the model's `AlbertConfig` (known before the checkpoint is loaded, for checks).
        checkpoint: the loaded `CheckpointDir`, None before loading or without one.
        tokenizer: the loaded `AlbertTokenizer` of the SentencePiece model, None without one.
        seq_length: the sequence length of the fixed-length exports (preprocess/, TFLite, ONNX
            probes, the keras-hub preprocessor).
        do_lower_case: whether the exported tokenizers lowercase.
        encoder_dir: where this export writes the encoder SavedModel (TFLite and ONNX compare
            with its outputs), None without one.
        finetuned_dir: a fine-tuned model directory (`export --finetuned DIR`).
        finetuned: its loaded `FinetunedModel`, None before loading.
    """

    config: Any = None
    checkpoint: Any = None
    tokenizer: Any = None
    seq_length: int = 128
    do_lower_case: bool = True
    encoder_dir: Path | None = None
    finetuned_dir: Path | None = None
    finetuned: Any = None


@dataclasses.dataclass(frozen=True)
class Writer:
    """One exported format; `albert-tf export`'s flags, `ExportedBundle`'s attributes and the
    refusals of formats a kind of export has not are all derived from these records.

    Attributes:
        name: its `export` flag (`--keras-hub` for "keras_hub") and `ExportedBundle` attribute.
        directory: the directory it writes, under the output or the fine-tuned directory.
        title: its name in messages and on the progress bar ("keras-hub").
        help: what its flag adds, for the flag's help text.
        write: "module:function", `function(source, target) -> report or None`.
        check: "module:function", `function(source)`: raises before any work what cannot be
            written (a missing extra, a model the format cannot compute); None if nothing.
        describe: "module:function", `function(path, report) -> lines` the command prints once
            written; None: one line "wrote PATH".
        report: whether the report is written as `target/report.json`.
        flag: whether a flag asks for it (False: written whenever its input is there, as
            `encoder/` with a checkpoint and `preprocess/` with a SentencePiece model).
    """

    name: str
    directory: str
    title: str
    help: str
    write: str
    check: str | None = None
    describe: str | None = None
    report: bool = False
    flag: bool = True

    def run(self, kind: str, *args: Any) -> Any:
        """Calls this writer's `kind` ("write", "check" or "describe") function with `args`."""
        module, function = getattr(self, kind).split(":")
        call: Callable[..., Any] = getattr(importlib.import_module(module), function)
        return call(*args)

    def lines(self, path: Path, report: dict[str, Any] | None) -> list[str]:
        """What the command prints for this part once written at `path`."""
        return self.run("describe", path, report) if self.describe else [f"wrote {path}"]


_M = "albert_tf.export."  # the writers' modules

# The checkpoint writers, in the order they run (TFLite and ONNX compare with encoder/).
CHECKPOINT_WRITERS = (
    Writer("encoder", "encoder", "encoder SavedModel", "the TF-Hub encoder SavedModel",
           _M + "encoder:write_encoder", describe=_M + "encoder:describe_encoder", flag=False),
    Writer("preprocess", "preprocess", "preprocess SavedModel",
           "the TF-Hub preprocessing SavedModel", _M + "encoder:write_preprocess", flag=False),
    Writer("tflite", "tflite", "TFLite",
           "tflite/encoder_float32.tflite and tflite/encoder_int8.tflite",
           _M + "tflite:write_tflite", describe=_M + "tflite:describe_tflite", report=True),
    Writer("onnx", "onnx", "ONNX",
           "onnx/: encoder.onnx (float32), encoder_int8.onnx, encoder_int8_static.onnx and, with "
           "a SentencePiece model, raw-string models",
           _M + "onnx.writer:write_onnx", _M + "onnx.writer:check_onnx",
           _M + "onnx.writer:describe_onnx", report=True),
    Writer("keras_hub", "keras_hub", "keras-hub",
           "keras_hub/, a keras-hub preset (AlbertMaskedLM with an MLM head, else "
           "AlbertBackbone; AlbertTokenizer with a SentencePiece model)",
           _M + "keras_hub:write_keras_hub", _M + "keras_hub:check_keras_hub",
           _M + "keras_hub:describe_keras_hub", report=True),
    Writer("hf", "hf", "Hugging Face",
           "hf/: a Hugging Face transformers folder (config.json, model.safetensors, "
           "spiece.model, tokenizer.json)",
           _M + "hf:write_hf", _M + "hf:check_hf", _M + "hf:describe_hf"),
)  # fmt: skip

# The writers of a fine-tuned model (`export --finetuned DIR`), each beside it in DIR.
FINETUNED_WRITERS = (
    Writer("onnx", "onnx", "ONNX",
           "DIR/onnx/, the raw-string classifier (classifier.onnx, classifier_int8.onnx), "
           "regression (regression.onnx, regression_int8.onnx) or SQuAD model (squad.onnx, "
           "squad_int8.onnx)",
           _M + "onnx.classifier:write_onnx_classifier", _M + "onnx.writer:check_onnx",
           _M + "onnx.classifier:describe_onnx_classifier", report=True),
    Writer("hf", "hf", "Hugging Face", "DIR/hf/ with the task's transformers class",
           _M + "hf:write_hf_finetuned", _M + "hf:check_hf_finetuned", _M + "hf:describe_hf"),
    Writer("keras_hub", "keras_hub", "keras-hub",
           "DIR/keras_hub/, an AlbertTextClassifier preset",
           _M + "keras_hub:write_keras_hub_finetuned", _M + "keras_hub:check_keras_hub_finetuned",
           _M + "keras_hub:describe_keras_hub", report=True),
    Writer("tflite", "tflite", "TFLite classifier",
           "DIR/tflite/, the token-ids classifier (classifier_float32.tflite, "
           "classifier_int8.tflite, labels.txt, spm.model)",
           _M + "tflite:write_tflite_classifier", _M + "tflite:check_tflite_classifier",
           _M + "tflite:describe_tflite_classifier", report=True),
    Writer("triton", "triton", "Triton model repository",
           "DIR/triton/, a Triton model repository of the int8 raw-string classifier, "
           "regression or SQuAD model (config.pbtxt with dynamic batching, model.py, model.onnx, "
           "report.json), which `albert-tf serve DIR` serves",
           _M + "triton.repository:write_triton", _M + "onnx.writer:check_onnx",
           _M + "triton.repository:describe_triton", report=True),
)  # fmt: skip

# The extra each format needs beyond the core install (`pip install -e ".[extra]"`).
EXTRAS = {"onnx": "onnx", "keras_hub": "keras-hub", "triton": "onnx"}


def flag_names() -> list[str]:
    """The formats a flag asks for, in the records' order (checkpoint writers first)."""
    names = [w.name for w in (*CHECKPOINT_WRITERS, *FINETUNED_WRITERS) if w.flag]
    return list(dict.fromkeys(names))


def flag_help(name: str) -> str:
    """The help text of the flag of format `name`, from its records."""
    parts = ["also write " + w.help for w in CHECKPOINT_WRITERS if w.name == name]
    parts += ["with --finetuned, " + w.help for w in FINETUNED_WRITERS if w.name == name]
    extra = EXTRAS.get(name)
    if extra:
        parts.append(f'needs pip install -e ".[{extra}]"')
    return "; ".join(parts)


def asked_writers(writers: Iterable[Writer], formats: dict[str, bool], kind: str) -> list[Writer]:
    """The records of `writers` that `formats` (name -> asked) asks for, in order; ExportError
    naming what this kind of export writes for a format it has no writer for."""
    writers = [w for w in writers if w.flag]
    known = {w.name for w in writers}
    unknown = [name for name, asked in formats.items() if asked and name not in known]
    if unknown:
        flags = ", ".join("--" + w.name.replace("_", "-") for w in writers)
        raise ExportError(f"{kind} takes {flags}, not --{unknown[0].replace('_', '-')}")
    return [w for w in writers if formats.get(w.name)]


def writers_named(writers: Iterable[Writer], names: Iterable[str]) -> list[Writer]:
    """The records of `writers` whose name is in `names`, in the records' order."""
    wanted = set(names)
    return [writer for writer in writers if writer.name in wanted]


def write_report(directory: Path, report: dict[str, Any]) -> None:
    """`directory/report.json`: the report as indented JSON."""
    (directory / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def write_one(writer: Writer, source: ExportSource, target: Path) -> dict[str, Any] | None:
    """Writes `writer`'s directory as `target`, replacing an earlier one, whole or not at all;
    returns its report."""
    with atomic_dir(target, overwrite=True) as tmp:
        report = writer.run("write", source, tmp)
        if writer.report:
            write_report(tmp, report)
    return report


def write_each(
    writers: Iterable[Writer],
    source: ExportSource,
    root: Path,
    progress: Any = None,
) -> dict[str, dict[str, Any] | None]:
    """Runs each writer into `root/writer.directory`, in order; returns the reports by name.

    `progress`: a tqdm bar advanced once per writer, or None.
    """
    reports = {}
    for writer in writers:
        if progress is not None:
            progress.set_postfix_str(writer.title)
        reports[writer.name] = write_one(writer, source, root / writer.directory)
        if progress is not None:
            progress.update()
    return reports


def agreement_lines(report: dict[str, Any]) -> list[str]:
    """How each file of a fine-tuned export agrees with serving/ on the probe texts: labels and
    probabilities, or a regression's values."""
    lines = []
    if report["serving_dtype"] != "float32":
        lines.append(
            f"  serving/ computes in {report['serving_dtype']} (fine-tuned so), the exported "
            "models in float32 and int8: their outputs differ by its rounding too"
        )
    for name, agreement in report["against_serving"].items():
        if "values_max_abs_diff" in agreement:
            lines.append(
                f"  {name}: values within {agreement['values_max_abs_diff']:.1e} of serving/'s "
                "on the probe texts"
            )
            continue
        lines.append(
            f"  {name}: labels equal to serving/ on {agreement['label_agreement']:.1%} of "
            f"the probe texts, probabilities within {agreement['probabilities_max_abs_diff']:.1e}"
        )
    return lines
