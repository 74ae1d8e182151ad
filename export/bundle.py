"""`albert-tf export`: a checkpoint directory -> `encoder/`, `preprocess/` and the formats asked
for; a fine-tuned model directory -> its formats beside it.

The whole output directory is written under a temporary name beside it and renamed into place
only when every part is complete, so a failure leaves nothing behind. TensorFlow is imported
by the functions that write: `albert-tf export`'s parser imports this module.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from albert_tf.config import SP_MODEL_FILE
from albert_tf.errors import ExportError
from albert_tf.export.writers import (
    CHECKPOINT_WRITERS,
    FINETUNED_WRITERS,
    ExportSource,
    Writer,
    asked_writers,
    write_each,
)
from albert_tf.io_utils import atomic_dir, check_output_path
from albert_tf.preprocess.tokenizer import as_tokenizer
from albert_tf.pretrained import resolve
from albert_tf.progress import bar as progress_bar


@dataclasses.dataclass
class ExportedBundle:
    """What `export_bundle` wrote: by writer name (`albert_tf.export.writers.CHECKPOINT_WRITERS`),
    the paths and the reports; `bundle.onnx` is the path of `onnx/` (None when not exported),
    `bundle.onnx_report` its report."""

    output_dir: Path
    paths: dict[str, Path] = dataclasses.field(default_factory=dict)
    reports: dict[str, dict[str, Any] | None] = dataclasses.field(default_factory=dict)

    @property
    def has_mlm(self) -> bool:
        """Whether the encoder SavedModel has `.mlm` (the checkpoint had an MLM head)."""
        return bool((self.reports.get("encoder") or {}).get("has_mlm"))

    def __getattr__(self, name: str) -> Any:
        names = {w.name for w in CHECKPOINT_WRITERS}
        if name in names:
            return self.paths.get(name)
        if name.endswith("_report") and name.removesuffix("_report") in names:
            return self.reports.get(name.removesuffix("_report"))
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def lines(self) -> list[str]:
        """What `albert-tf export` prints: each part's lines (`Writer.lines`), in order."""
        return [
            line
            for w in CHECKPOINT_WRITERS
            if w.name in self.paths
            for line in w.lines(self.paths[w.name], self.reports[w.name])
        ]


def _check_arguments(
    checkpoint_dir: str | os.PathLike | None,
    sp_model: str | os.PathLike | None,
    seq_length: int,
    requested: list[Writer],
    do_lower_case: bool = True,
) -> ExportSource:
    """Every check that needs no model, before any work; returns the source with the config and
    the SentencePiece model, loaded once here for every writer.

    `seq_length` is checked only where it is used: preprocess/ needs room for three segments,
    and preprocess/ beside an encoder and the TFLite encoders must fit the encoder's
    `max_position_embeddings`; an encoder alone has no sequence length.
    """
    if checkpoint_dir is None and sp_model is None:
        raise ExportError(
            "nothing to export: give a checkpoint directory and/or a SentencePiece model"
        )
    for writer in requested:
        if checkpoint_dir is None:
            raise ExportError(f"{writer.title} export needs a checkpoint directory")
    if seq_length < 1:
        raise ExportError(f"--max-seq-length must be positive, got {seq_length}")
    if sp_model is not None and not Path(sp_model).is_file():
        raise ExportError(f"SentencePiece model {sp_model} does not exist")
    config = None
    if checkpoint_dir is not None:
        from albert_tf.checkpoint import read_checkpoint_dir_config

        config = read_checkpoint_dir_config(checkpoint_dir)
        if sp_model is None and (Path(checkpoint_dir) / SP_MODEL_FILE).is_file():
            sp_model = Path(checkpoint_dir) / SP_MODEL_FILE
    tokenizer = None
    if sp_model is not None:
        from albert_tf.preprocess.preprocess_model import check_seq_length

        check_seq_length(seq_length)
        vocab_size = None if config is None else config.vocab_size
        tokenizer = as_tokenizer(sp_model, do_lower_case, vocab_size)
    users = [w.title for w in requested if w.name in ("tflite", "onnx")]
    if sp_model is not None:
        users.insert(0, "preprocess/")
    if config is not None and users and seq_length > config.max_position_embeddings:
        raise ExportError(
            f"seq_length {seq_length} (of {' and '.join(users)}) exceeds the model's "
            f"max_position_embeddings {config.max_position_embeddings}; lower --max-seq-length"
        )
    return ExportSource(config, None, tokenizer, seq_length, do_lower_case)


def export_bundle(
    checkpoint_dir: str | os.PathLike | None,
    output_dir: str | os.PathLike,
    sp_model: str | os.PathLike | None = None,
    seq_length: int = 128,
    overwrite: bool = False,
    do_lower_case: bool = True,
    **formats: bool,
) -> ExportedBundle:
    """Exports TF-Hub SavedModels (and the other formats asked for) into `output_dir`,
    atomically: the writers of `albert_tf.export.writers.CHECKPOINT_WRITERS`, in order.

    - `encoder/` from `checkpoint_dir` (our checkpoint directory, or a shipped model's name such
      as `albert_en_mini`), see `albert_tf.export.encoder`.
    - `preprocess/` when a SentencePiece model is given as `sp_model` or found as `spm.model` in
      `checkpoint_dir`: strings -> the encoder inputs at `seq_length` (see
      `albert_tf.preprocess.preprocess_model`). Without `checkpoint_dir`, only this part is written.
    - `tflite/` with `tflite`: float32 and int8 encoders at `seq_length` and `report.json`
      (sizes, `pooled_output` cosine similarity to the SavedModel), see `albert_tf.export.tflite`.
    - `onnx/` with `onnx`: float32 and int8 ONNX encoders, raw-string models when there is a
      SentencePiece model, and `report.json`, see `albert_tf.export.onnx` (needs the `onnx` extra).
    - `keras_hub/` with `keras_hub`: a keras-hub preset (`AlbertMaskedLM` with the MLM head,
      else `AlbertBackbone`; the tokenizer with a SentencePiece model) and its `report.json`,
      see `albert_tf.export.keras_hub` (needs the `keras-hub` extra).
    - `hf/` with `hf`: a Hugging Face transformers folder (config, safetensors weights and, with
      a SentencePiece model, the tokenizer), see `albert_tf.export.hf`.

    `formats` names the optional writers (`tflite=True`, ...); a name with no checkpoint writer
    is an ExportError.

    Raises ExportError (nothing to export, SentencePiece vocabulary size != vocab_size,
    seq_length beyond max_position_embeddings, a model transformers or keras-hub cannot
    compute with `hf` or `keras_hub`), CheckpointError (missing config or checkpoint),
    TokenizerError (unusable SentencePiece model), InstallError (a writer's extra is missing),
    OutputError (exists and not `overwrite`, unwritable). Nothing is left at `output_dir` on
    failure.
    """
    if checkpoint_dir is not None:
        checkpoint_dir = resolve(checkpoint_dir)  # a shipped model's name works as a directory
    requested = asked_writers(CHECKPOINT_WRITERS, formats, "export --checkpoint")
    source = _check_arguments(checkpoint_dir, sp_model, seq_length, requested, do_lower_case)
    parts = {"encoder": checkpoint_dir is not None, "preprocess": source.tokenizer is not None}
    writers = [w for w in CHECKPOINT_WRITERS if parts.get(w.name) or w in requested]
    for writer in writers:
        if writer.check is not None:
            writer.run("check", source)
    output_dir = Path(output_dir)
    check_output_path(output_dir, overwrite)
    if checkpoint_dir is not None:
        from albert_tf.checkpoint import load_checkpoint_dir

        # Before the progress bar and the output: a bad checkpoint is one line and nothing else.
        source = dataclasses.replace(source, checkpoint=load_checkpoint_dir(checkpoint_dir))
    with (
        atomic_dir(output_dir, overwrite=overwrite) as tmp,
        progress_bar(total=len(writers), desc="export", unit="step") as progress,
    ):
        if parts["encoder"]:
            source = dataclasses.replace(source, encoder_dir=tmp / "encoder")
        reports = write_each(writers, source, tmp, progress)
    paths = {w.name: output_dir / w.directory for w in writers}
    return ExportedBundle(output_dir, paths, reports)


def export_finetuned(
    finetuned_dir: str | os.PathLike, overwrite: bool = True, **formats: bool
) -> dict[str, dict[str, Any] | None]:
    """`export --finetuned DIR`: the writers of `albert_tf.export.writers.FINETUNED_WRITERS`
    that `formats` asks for (`onnx=True`, ...), each into its directory in `finetuned_dir`
    (`onnx/`, `hf/`, ...), replacing an earlier one atomically (with `overwrite`, else an
    existing one is an OutputError); returns the reports by writer name.

    Every refusal comes before anything is written: the formats asked for, the outputs, and
    every writer's check (which reads finetune.json), then the model is loaded once for all of
    them. Raises CheckpointError (not a fine-tuned model directory), ExportError (what a
    format cannot take, or a format with no fine-tuned writer), InstallError (a missing extra),
    OutputError.
    """
    from albert_tf.finetune.predict import load_finetuned

    writers = asked_writers(FINETUNED_WRITERS, formats, "export --finetuned DIR")
    if not writers:
        flags = ", ".join("--" + w.name.replace("_", "-") for w in FINETUNED_WRITERS)
        raise ExportError(f"export --finetuned DIR needs at least one of {flags}")
    finetuned_dir = Path(finetuned_dir)
    for writer in writers:
        check_output_path(finetuned_dir / writer.directory, overwrite)
    source = ExportSource(finetuned_dir=finetuned_dir)
    for writer in writers:
        if writer.check is not None:
            writer.run("check", source)
    source = dataclasses.replace(source, finetuned=load_finetuned(finetuned_dir))
    return write_each(writers, source, finetuned_dir)
