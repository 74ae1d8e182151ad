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
    """One exported format.

    Attributes:
        name: its `export` flag and `ExportedBundle` field ("onnx").
        directory: the directory it writes, under the output or the fine-tuned directory.
        title: its name in messages and on the progress bar ("keras-hub").
        reads: what of the `ExportSource` it needs: "checkpoint", "sp_model" or "finetuned".
        extra: the pip extra it needs (`pip install -e ".[extra]"`), None for the core install.
        write: "module:function", `function(source, target) -> report or None`.
        check: "module:function", `function(source)`: raises before any work what cannot be
            written (a missing extra, a model the format cannot compute); None if nothing.
        report: whether the report is written as `target/report.json`.
    """

    name: str
    directory: str
    title: str
    reads: str
    extra: str | None
    write: str
    check: str | None = None
    report: bool = False

    def run(self, kind: str, source: ExportSource, *args: Any) -> Any:
        """Calls this writer's `kind` ("write" or "check") function on `source`."""
        module, function = getattr(self, kind).split(":")
        call: Callable[..., Any] = getattr(importlib.import_module(module), function)
        return call(source, *args)


# The checkpoint writers, in the order they run (TFLite and ONNX compare with encoder/).
CHECKPOINT_WRITERS = (
    Writer("encoder", "encoder", "encoder SavedModel", "checkpoint", None,
           "albert_tf.export.encoder:write_encoder"),
    Writer("preprocess", "preprocess", "preprocess SavedModel", "sp_model", None,
           "albert_tf.export.encoder:write_preprocess"),
    Writer("tflite", "tflite", "TFLite", "checkpoint", None,
           "albert_tf.export.tflite:write_tflite", report=True),
    Writer("onnx", "onnx", "ONNX", "checkpoint", "onnx",
           "albert_tf.export.onnx.writer:write_onnx", "albert_tf.export.onnx.writer:check_onnx", report=True),
    Writer("keras_hub", "keras_hub", "keras-hub", "checkpoint", "keras-hub",
           "albert_tf.export.keras_hub:write_keras_hub", "albert_tf.export.keras_hub:check_keras_hub", report=True),
    Writer("hf", "hf", "Hugging Face", "checkpoint", None,
           "albert_tf.export.hf:write_hf", "albert_tf.export.hf:check_hf"),
)  # fmt: skip

# The writers of a fine-tuned model (`export --finetuned DIR`), each beside it in DIR.
FINETUNED_WRITERS = (
    Writer("onnx", "onnx", "ONNX classifier", "finetuned", "onnx",
           "albert_tf.export.onnx.classifier:write_onnx_classifier", "albert_tf.export.onnx.writer:check_onnx",
           report=True),
    Writer("hf", "hf", "Hugging Face", "finetuned", None,
           "albert_tf.export.hf:write_hf_finetuned", "albert_tf.export.hf:check_hf_finetuned"),
    Writer("keras_hub", "keras_hub", "keras-hub", "finetuned", "keras-hub",
           "albert_tf.export.keras_hub:write_keras_hub_finetuned", "albert_tf.export.keras_hub:check_keras_hub",
           report=True),
    Writer("tflite", "tflite", "TFLite classifier", "finetuned", None,
           "albert_tf.export.tflite:write_tflite_classifier", "albert_tf.export.tflite:check_tflite_classifier",
           report=True),
    Writer("triton", "triton", "Triton model repository", "finetuned", "onnx",
           "albert_tf.export.triton.repository:write_triton", "albert_tf.export.onnx.writer:check_onnx",
           report=True),
)  # fmt: skip


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
