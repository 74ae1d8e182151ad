"""The `onnx` writer: a checkpoint -> `onnx/` beside the TF-Hub modules, with its report.

Files (docs/guides/serving.md shows how to run them):

- `encoder.onnx`: float32, standard ONNX operators only (opset 17), the Hub contract's names;
- `encoder_int8.onnx`: ONNX Runtime's fusions, then dynamic int8 quantization (an empty batch
  gets empty outputs: `albert_tf.export.onnx.text.guard_empty_batch`);
- `encoder_int8_static.onnx`: the fusions, then static int8 (QDQ, calibrated on text);
- with a SentencePiece model, `text_encoder.onnx` / `text_encoder_int8.onnx`: the same
  encoders behind the tokenizer and packing (`albert_tf.export.onnx.text`), input `text` strings [B]
  (an empty batch gets empty outputs: `albert_tf.export.onnx.text.guard_empty_batch`);
- `report.json`: file sizes, fused operator counts and the accuracy of every file against the
  SavedModel (or the checkpoint's Keras encoder when no SavedModel is given).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import tensorflow as tf

from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.config import SP_MODEL_FILE
from albert_tf.export.encoder import ENCODER_INPUTS
from albert_tf.export.onnx import optimize
from albert_tf.export.onnx.encoder import encoder_graph
from albert_tf.export.onnx.text import guard_empty_batch, preprocess_graph, with_preprocess
from albert_tf.export.tflite import cosine_similarity, probe_inputs
from albert_tf.export.writers import CHECKPOINT_WRITERS, ExportSource, write_one, writers_named
from albert_tf.preprocess.corpus import is_heldout, pydoc_topic_documents
from albert_tf.preprocess.tokenizer import AlbertTokenizer, as_tokenizer
from albert_tf.runtimes import onnx_session, session_runner

ENCODER_FILES = {
    "float32": "encoder.onnx",
    "int8": "encoder_int8.onnx",
    "int8_static": "encoder_int8_static.onnx",
}
TEXT_ENCODER_FILES = {"float32": "text_encoder.onnx", "int8": "text_encoder_int8.onnx"}
# Accuracy bounds the export checks and reports (issue 27): fp32 against the SavedModel, and
# the smallest pooled_output cosine of an int8 file on text it was not calibrated on.
FLOAT32_TOLERANCE = 1e-4
INT8_MIN_COSINE = 0.999


def session(model: onnx.ModelProto | str | os.PathLike, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session of `model` (a ModelProto or a path) with onnxruntime-extensions'
    operators registered (`albert_tf.runtimes.onnx_session`: InstallError instead of a crash
    when onnxruntime_extensions was imported after TensorFlow by other code)."""
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    return onnx_session(proto, threads, custom_ops=True)


def run(sess: Any, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Runs `sess` on the inputs it declares; returns every output by name."""
    return session_runner(sess)(inputs)


def text_batches(
    sp_model: str | os.PathLike | AlbertTokenizer,
    seq_length: int,
    heldout: bool,
    batch: int = 8,
    count: int = 4,
) -> list[dict[str, np.ndarray]]:
    """`count` batches of encoder inputs int32 [batch, seq_length] packed from English prose:
    the help topics of `pydoc_data` (every Python has them), split by topic name into
    calibration (`heldout=False`) and unseen (`heldout=True`) text."""
    tokenizer = as_tokenizer(sp_model)
    texts = [
        " ".join(sentences)
        for name, sentences in pydoc_topic_documents()
        if is_heldout(name, 50) == heldout and sentences
    ][: batch * count]
    rows = [
        [tokenizer.cls_id, *tokenizer.encode(t)[: seq_length - 2], tokenizer.sep_id] for t in texts
    ]
    batches = []
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        ids = np.full((len(chunk), seq_length), tokenizer.pad_id, np.int32)
        mask = np.zeros_like(ids)
        for i, row in enumerate(chunk):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        batches.append(dict(input_word_ids=ids, input_mask=mask, input_type_ids=0 * ids))
    return batches


def _reference(saved_model_dir: str | os.PathLike | None, encoder: Any):
    """A function: encoder inputs -> pooled_output, sequence_output of the SavedModel (or the
    Keras encoder when there is none)."""
    model = tf.saved_model.load(str(saved_model_dir)) if saved_model_dir else encoder

    def call(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feed = {name: tf.constant(inputs[name], tf.int32) for name in ENCODER_INPUTS}
        outputs = model(feed, training=False)
        return {k: outputs[k].numpy() for k in ("pooled_output", "sequence_output")}

    return call


def _accuracy(
    models: dict[str, onnx.ModelProto], reference: Any, batches: list[dict[str, np.ndarray]]
) -> dict[str, dict[str, float]]:
    """Per model: max |difference| of both outputs and the smallest pooled cosine similarity,
    over `batches`, against `reference`."""
    expected = [reference(b) for b in batches]
    report = {}
    for kind, model in models.items():
        sess = session(model)
        pooled, sequence, cosine = 0.0, 0.0, 1.0
        for batch, want in zip(batches, expected, strict=True):
            got = run(sess, batch)
            mask = batch["input_mask"][..., None].astype(bool)
            pooled = max(pooled, float(np.abs(got["pooled_output"] - want["pooled_output"]).max()))
            diff = np.abs(got["sequence_output"] - want["sequence_output"]) * mask
            sequence = max(sequence, float(diff.max()))
            cos = cosine_similarity(got["pooled_output"], want["pooled_output"]).min()
            cosine = min(cosine, float(cos))
        report[kind] = dict(
            pooled_max_abs_diff=pooled,
            sequence_max_abs_diff=sequence,
            pooled_min_cosine=cosine,
        )
    return report


def _text_ids_equal(model: onnx.ModelProto, tokenizer: AlbertTokenizer, seq_length: int) -> bool:
    """Whether the raw-string model's ids equal the reference tokenizer's, packed, on the
    unseen probe text."""
    texts = [" ".join(s) for name, s in pydoc_topic_documents() if is_heldout(name, 50) and s]
    texts = texts[:32]
    got = run(session(model), {"text": np.array(texts, dtype=object)})
    for text, ids, mask in zip(texts, got["input_word_ids"], got["input_mask"], strict=True):
        want = [tokenizer.cls_id, *tokenizer.encode(text)[: seq_length - 2], tokenizer.sep_id]
        if ids[: mask.sum()].tolist() != want:
            return False
    return True


def check_onnx(source: ExportSource) -> None:
    """The ONNX writers' check (`albert_tf.export.writers`): importing this module needed the extra."""


def export_onnx(
    checkpoint_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    seq_length: int = 128,
    sp_model: str | os.PathLike | AlbertTokenizer | None = None,
    do_lower_case: bool = True,
    saved_model_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Writes `output_dir/onnx/` (see the module docstring) atomically; returns the report.

    `seq_length` is the sequence length of the raw-string models and of the accuracy probes
    (the encoder files take any length up to `max_position_embeddings`). Without `sp_model`
    (or `spm.model` in the checkpoint) only the encoder files are written and the probes are
    random ids. `sp_model` may be an `AlbertTokenizer` that has loaded it: it is loaded once.
    Raises CheckpointError, TokenizerError as `export_bundle` does.
    """
    checkpoint = load_checkpoint_dir(checkpoint_dir)
    if sp_model is None and (Path(checkpoint_dir) / SP_MODEL_FILE).is_file():
        sp_model = Path(checkpoint_dir) / SP_MODEL_FILE
    source = ExportSource(
        config=checkpoint.config,
        checkpoint=checkpoint,
        tokenizer=None if sp_model is None else as_tokenizer(sp_model, do_lower_case),
        seq_length=seq_length,
        do_lower_case=do_lower_case,
        encoder_dir=None if saved_model_dir is None else Path(saved_model_dir),
    )
    (writer,) = writers_named(CHECKPOINT_WRITERS, ["onnx"])
    return write_one(writer, source, Path(output_dir) / writer.directory)


def write_onnx(source: ExportSource, target: Path) -> dict[str, Any]:
    """The `onnx` writer (`albert_tf.export.writers`): the files of the module docstring into `target`;
    returns the report."""
    config = source.checkpoint.config
    encoder = source.checkpoint.encoder
    tokenizer, seq_length = source.tokenizer, source.seq_length
    float32 = encoder_graph(encoder)
    fused = optimize.fuse(float32, config.num_attention_heads, config.hidden_size)
    if tokenizer is not None:
        calibration = text_batches(tokenizer, seq_length, heldout=False)
        unseen = text_batches(tokenizer, seq_length, heldout=True)
    else:
        calibration = [probe_inputs(config.vocab_size, seq_length, 8, seed) for seed in (1, 2)]
        unseen = [probe_inputs(config.vocab_size, seq_length, 8, seed) for seed in (3, 4)]
    models = {
        "float32": float32,
        "int8": optimize.quantize_dynamic_int8(fused),
        "int8_static": optimize.quantize_static_int8(fused, calibration),
    }
    # The dynamic int8 file answers an empty batch itself: ORT's int8 attention (QAttention)
    # would stop the process on zero rows. The float32 and static int8 files take zero rows
    # as they are; the float32 one stays a plain graph of standard operators for any tool.
    encoders = {**models, "int8": guard_empty_batch(models["int8"])}
    report: dict[str, Any] = {
        "seq_length": seq_length,
        "probe_text": "pydoc_data help topics" if tokenizer else "random ids",
        "fused_ops": {
            op: n for op, n in optimize.op_counts(fused).items() if op in optimize.FUSED_OPS
        },
        "accuracy": _accuracy(encoders, _reference(source.encoder_dir, encoder), unseen),
    }
    files = {ENCODER_FILES[kind]: model for kind, model in encoders.items()}
    if tokenizer is not None:
        preprocess = preprocess_graph(tokenizer, seq_length, source.do_lower_case)
        for kind in ("float32", "int8"):
            text_encoder = with_preprocess(preprocess, models[kind])
            files[TEXT_ENCODER_FILES[kind]] = guard_empty_batch(text_encoder)
        report["text_ids_equal_preprocess"] = _text_ids_equal(
            files[TEXT_ENCODER_FILES["float32"]], tokenizer, seq_length
        )
    return save_models(target, files, report)


def save_models(
    target: Path, files: dict[str, onnx.ModelProto], report: dict[str, Any]
) -> dict[str, Any]:
    """Saves `files` (name -> model) into the directory `target`; returns `report` with each
    file's size added under `bytes`."""
    report["bytes"] = {}
    for name, model in files.items():
        onnx.save(model, str(target / name))
        report["bytes"][name] = (target / name).stat().st_size
    return report


def describe_onnx(path: Path, report: dict[str, Any]) -> list[str]:
    """The `onnx` writer's lines for `albert-tf export`: fusions and agreement."""
    lines = [f"wrote {path}: fused {report['fused_ops']}"]
    for kind, accuracy in report["accuracy"].items():
        lines.append(
            f"  {kind}: pooled_output cosine similarity to the SavedModel >= "
            f"{accuracy['pooled_min_cosine']:.6f}, max |diff| "
            f"{accuracy['sequence_max_abs_diff']:.2e}"
        )
    return lines
