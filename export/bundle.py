"""`albert-tf export`: a checkpoint directory -> `encoder/` (+ `preprocess/`, + `tflite/`).

The whole output directory is written under a temporary name beside it and renamed into place
only when every part is complete, so a failure leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from albert_tf.config import SP_MODEL_FILE
from albert_tf.errors import ExportError
from albert_tf.io_utils import atomic_dir, check_output_path
from preprocess.tokenizer import AlbertTokenizer, as_tokenizer

ENCODER_DIR = "encoder"
PREPROCESS_DIR = "preprocess"
TFLITE_DIR = "tflite"
TFLITE_REPORT = "report.json"
KERAS_HUB_DIR = "keras_hub"


@dataclasses.dataclass
class ExportedBundle:
    """Paths written by `export_bundle` (None for parts not exported) and the TFLite report."""

    output_dir: Path
    encoder: Path | None = None
    preprocess: Path | None = None
    tflite: Path | None = None
    tflite_report: dict[str, Any] | None = None
    onnx: Path | None = None
    onnx_report: dict[str, Any] | None = None
    keras_hub: Path | None = None
    keras_hub_report: dict[str, Any] | None = None
    hf: Path | None = None
    hf_architecture: str | None = None
    has_mlm: bool = False


def _check_arguments(
    checkpoint_dir: str | os.PathLike | None,
    sp_model: str | os.PathLike | None,
    seq_length: int,
    tflite: bool,
    onnx: bool = False,
    keras_hub: bool = False,
    hf: bool = False,
    do_lower_case: bool = True,
) -> AlbertTokenizer | None:
    """Every check that needs no model, before any work; returns the SentencePiece model,
    loaded once here for every part of the export.

    `seq_length` is checked only where it is used: preprocess/ needs room for three segments,
    and preprocess/ beside an encoder and the TFLite encoders must fit the encoder's
    `max_position_embeddings`; an encoder alone has no sequence length.
    """
    if checkpoint_dir is None and sp_model is None:
        raise ExportError(
            "nothing to export: give a checkpoint directory and/or a SentencePiece model"
        )
    if tflite and checkpoint_dir is None:
        raise ExportError("TFLite export needs a checkpoint directory")
    if onnx and checkpoint_dir is None:
        raise ExportError("ONNX export needs a checkpoint directory")
    if hf and checkpoint_dir is None:
        raise ExportError("Hugging Face export needs a checkpoint directory")
    if onnx:
        import export.onnx  # noqa: F401  (InstallError naming the extra when it is missing)
    if keras_hub and checkpoint_dir is None:
        raise ExportError("keras-hub export needs a checkpoint directory")
    if seq_length < 1:
        raise ExportError(f"--max-seq-length must be positive, got {seq_length}")
    if sp_model is not None and not Path(sp_model).is_file():
        raise ExportError(f"SentencePiece model {sp_model} does not exist")
    config = None
    if checkpoint_dir is not None:
        from albert_tf.checkpoint import read_checkpoint_dir_config

        config = read_checkpoint_dir_config(checkpoint_dir)
        if keras_hub:
            from albert_tf.convert.keras_hub import check_travels, import_keras_hub

            check_travels(config)  # what keras-hub cannot compute is refused before any work
            import_keras_hub()
        if hf:
            from export.hf import check_hf_exportable

            check_hf_exportable(config)
        if sp_model is None and (Path(checkpoint_dir) / SP_MODEL_FILE).is_file():
            sp_model = Path(checkpoint_dir) / SP_MODEL_FILE
    tokenizer = None
    if sp_model is not None:
        from preprocess.preprocess_model import check_seq_length

        check_seq_length(seq_length)
        vocab_size = None if config is None else config.vocab_size
        tokenizer = as_tokenizer(sp_model, do_lower_case, vocab_size)
    users = [
        name
        for name, used in (("preprocess/", sp_model), ("TFLite", tflite), ("ONNX", onnx))
        if used
    ]
    if hf and sp_model is not None:
        from export.hf_tokenizer import require_tokenizers

        require_tokenizers()
    if config is not None and users and seq_length > config.max_position_embeddings:
        raise ExportError(
            f"seq_length {seq_length} (of {' and '.join(users)}) exceeds the model's "
            f"max_position_embeddings {config.max_position_embeddings}; lower --max-seq-length"
        )
    return tokenizer


def export_bundle(
    checkpoint_dir: str | os.PathLike | None,
    output_dir: str | os.PathLike,
    sp_model: str | os.PathLike | None = None,
    seq_length: int = 128,
    tflite: bool = False,
    overwrite: bool = False,
    do_lower_case: bool = True,
    onnx: bool = False,
    keras_hub: bool = False,
    hf: bool = False,
) -> ExportedBundle:
    """Exports TF-Hub SavedModels (and TFLite files) into `output_dir`, atomically.

    - `encoder/` from `checkpoint_dir` (our checkpoint directory, or a shipped model's name such
      as `albert_en_mini`), see `export.encoder`.
    - `preprocess/` when a SentencePiece model is given as `sp_model` or found as `spm.model` in
      `checkpoint_dir`: strings -> the encoder inputs at `seq_length` (see
      `preprocess.preprocess_model`). Without `checkpoint_dir`, only this part is written.
    - `tflite/` with `tflite`: float32 and int8 encoders at `seq_length` and `report.json`
      (sizes, `pooled_output` cosine similarity to the SavedModel), see `export.tflite`.
    - `onnx/` with `onnx`: float32 and int8 ONNX encoders, raw-string models when there is a
      SentencePiece model, and `report.json`, see `export.onnx` (needs the `onnx` extra).
    - `keras_hub/` with `keras_hub`: a keras-hub preset (`AlbertMaskedLM` with the MLM head,
      else `AlbertBackbone`; the tokenizer with a SentencePiece model) and its `report.json`,
      see `export.keras_hub` (needs the `keras-hub` extra).
    - `hf/` with `hf`: a Hugging Face transformers folder (config, safetensors weights and, with
      a SentencePiece model, the tokenizer), see `export.hf`.

    Raises ExportError (nothing to export, SentencePiece vocabulary size != vocab_size,
    seq_length beyond max_position_embeddings, a model transformers or keras-hub cannot compute
    with `hf` or `keras_hub`), CheckpointError (missing config or checkpoint), TokenizerError (unusable SentencePiece model), OutputError (exists and not `overwrite`,
    unwritable). Nothing is left at `output_dir` on failure.
    """
    if checkpoint_dir is not None:
        from albert_tf.pretrained import resolve

        checkpoint_dir = resolve(checkpoint_dir)  # a shipped model's name works as a directory
    tokenizer = _check_arguments(
        checkpoint_dir, sp_model, seq_length, tflite, onnx, keras_hub, hf, do_lower_case
    )
    output_dir = Path(output_dir)
    check_output_path(output_dir, overwrite)
    checkpoint = None
    if checkpoint_dir is not None:
        from albert_tf.checkpoint import load_checkpoint_dir

        # Before the progress bar and the output: a bad checkpoint is one line and nothing else.
        checkpoint = load_checkpoint_dir(checkpoint_dir)
    steps = (checkpoint is not None) + 1 + tflite + onnx + keras_hub + hf
    result = ExportedBundle(output_dir)
    with (
        atomic_dir(output_dir, overwrite=overwrite) as tmp,
        tqdm(total=steps, desc="export", unit="step") as progress,
    ):
        if checkpoint is not None:
            from export.encoder import save_encoder

            progress.set_postfix_str("encoder SavedModel")
            save_encoder(tmp / ENCODER_DIR, checkpoint.encoder, checkpoint.mlm_head, tokenizer)
            result.encoder = output_dir / ENCODER_DIR
            result.has_mlm = checkpoint.mlm_head is not None
            progress.update()
        if tokenizer is not None:
            from preprocess.preprocess_model import save_preprocess_model

            progress.set_postfix_str("preprocess SavedModel")
            save_preprocess_model(tokenizer, tmp / PREPROCESS_DIR, seq_length, do_lower_case)
            result.preprocess = output_dir / PREPROCESS_DIR
        progress.update()
        if tflite:
            from export.tflite import export_tflite

            progress.set_postfix_str("TFLite")
            (tmp / TFLITE_DIR).mkdir()
            report = export_tflite(
                checkpoint.encoder, tmp / TFLITE_DIR, seq_length, tmp / ENCODER_DIR
            )
            (tmp / TFLITE_DIR / TFLITE_REPORT).write_text(json.dumps(report, indent=2) + "\n")
            result.tflite = output_dir / TFLITE_DIR
            result.tflite_report = report
            progress.update()
        if onnx:
            from export.onnx import export_onnx
            from export.onnx.writer import ONNX_DIR

            progress.set_postfix_str("ONNX")
            result.onnx_report = export_onnx(
                checkpoint_dir,
                tmp,
                seq_length,
                sp_model=tokenizer,
                do_lower_case=do_lower_case,
                saved_model_dir=tmp / ENCODER_DIR,
            )
            result.onnx = output_dir / ONNX_DIR
            progress.update()
        if keras_hub:
            from export.keras_hub import write_checkpoint_preset

            progress.set_postfix_str("keras-hub preset")
            result.keras_hub_report = write_checkpoint_preset(
                checkpoint, tmp / KERAS_HUB_DIR, tokenizer, seq_length, do_lower_case
            )
            result.keras_hub = output_dir / KERAS_HUB_DIR
            progress.update()
        if hf:
            from export.hf import HF_DIR, export_checkpoint_hf

            progress.set_postfix_str("Hugging Face")
            (tmp / HF_DIR).mkdir()
            result.hf_architecture = export_checkpoint_hf(
                checkpoint, tmp / HF_DIR, tokenizer, do_lower_case
            )
            result.hf = output_dir / HF_DIR
            progress.update()
    return result
