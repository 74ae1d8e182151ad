"""TFLite export of the encoder, at a fixed sequence length, and of a fine-tuned classifier, at
any length up to its `max_seq_length`: float32 and dynamic-range int8.

The encoder's files have one signature, `serving_default`, with inputs `input_word_ids`,
`input_mask`, `input_type_ids` (int32 [B, seq_length]; B is resized on demand) and outputs
`pooled_output` [B, H] and `sequence_output` [B, seq_length, H], float32. Dynamic-range
quantization stores the weight matrices as int8 (tensors of at least 1024 elements) and computes
in float. The tanh GELU is one GELU operator per block (`albert_tf.activations.gelu_as_one_op`).

A fine-tuned classifier (`export --finetuned DIR --tflite`) goes to `DIR/tflite/`:
`classifier_float32.tflite` and `classifier_int8.tflite` take the same three inputs [B, S] for any
S up to the model's `max_seq_length` (pad a batch to its longest text: padding is masked, so the
outputs are those of a full-length batch; the runner resizes on each new shape) and return
`logits` and `probabilities` [B, L] (the encoder in float32, whatever
the dtype it was fine-tuned in), with `labels.txt` (one label per line, in the order of the
probabilities), `spm.model` (the tokenizer: the ids are `[CLS]`, the text's pieces, `[SEP]`,
then `<pad>`; the mask 1 over the tokens) and `report.json` (how each file agrees with `serving/`
on probe sentences).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops serving/ uses)

from albert_tf.activations import gelu_as_one_op
from albert_tf.config import SP_MODEL_FILE
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import ExportError
from albert_tf.export.encoder import ENCODER_INPUTS, float32_copy
from albert_tf.export.writers import agreement_lines
from albert_tf.finetune.directory import SERVING_DIR, read_record
from albert_tf.finetune.features import pack
from albert_tf.preprocess import corpus
from albert_tf.runtimes import tflite_runner

TFLITE_FILES = {"float32": "encoder_float32.tflite", "int8": "encoder_int8.tflite"}
TFLITE_OUTPUTS = ("pooled_output", "sequence_output")
CLASSIFIER_FILES = {"float32": "classifier_float32.tflite", "int8": "classifier_int8.tflite"}
LABELS_FILE = "labels.txt"


def tflite_converters(
    encoder: AlbertEncoder,
    seq_length: int | None,
    head: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """`{"float32": converter, "int8": converter}` for the encoder in inference mode; both share
    one traced function. The int8 converter applies dynamic-range quantization. With `head` (a
    classifier's kernel [H, L] and bias [L] on `pooled_output`, float32), the files return its
    `logits` and their `probabilities` instead of the encoder's outputs. `seq_length` None
    leaves the sequence length open (any S up to the model's positions)."""
    specs = [tf.TensorSpec([None, seq_length], tf.int32, name=name) for name in ENCODER_INPUTS]

    @tf.function(input_signature=specs, autograph=False)
    def serve(input_word_ids, input_mask, input_type_ids):
        inputs = dict(
            input_word_ids=input_word_ids, input_mask=input_mask, input_type_ids=input_type_ids
        )
        outputs = encoder(inputs, training=False)
        if head is None:
            return {key: outputs[key] for key in TFLITE_OUTPUTS}
        kernel, bias = (tf.constant(w, tf.float32) for w in head)
        logits = tf.matmul(tf.cast(outputs["pooled_output"], tf.float32), kernel) + bias
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    with gelu_as_one_op():  # one GELU operator per layer in the files
        concrete = serve.get_concrete_function()
    # The converter first saves the function with this object as a SavedModel; a plain holder
    # of the variables avoids serializing (and tracing) every Keras layer of the encoder.
    holder = tf.train.Checkpoint(variables=list(encoder.variables))
    converters = {}
    for kind in ("float32", "int8"):
        converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], holder)
        if kind == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converters[kind] = converter
    return converters


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two [B, H] arrays -> [B]."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def probe_inputs(vocab_size: int, seq_length: int, batch: int = 4, seed: int = 0) -> dict:
    """Seeded encoder inputs [batch, seq_length] with [CLS]=2 first and rows of varied length."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, size=(batch, seq_length), dtype=np.int32)
    ids[:, 0] = 2
    lengths = np.linspace(seq_length, max(2, seq_length // 4), batch).astype(np.int32)
    mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
    return dict(input_word_ids=ids * mask, input_mask=mask, input_type_ids=np.zeros_like(ids))


def saved_model_variable_bytes(saved_model_dir: str | os.PathLike) -> int:
    """Size of a SavedModel's `variables/` directory in bytes."""
    return sum(f.stat().st_size for f in (Path(saved_model_dir) / "variables").iterdir())


def pooled_output_drift(
    tflite_path: str | os.PathLike, saved_model: Any, inputs: dict[str, Any]
) -> float:
    """Smallest row-wise cosine similarity of `pooled_output`: TFLite file vs the loaded
    encoder SavedModel (`hub.load` / `tf.saved_model.load` result) on the same inputs."""
    ours = tflite_runner(tflite_path)(inputs)["pooled_output"]
    feed = {name: tf.constant(inputs[name], tf.int32) for name in ENCODER_INPUTS}
    reference = saved_model(feed, training=False)["pooled_output"].numpy()
    return float(cosine_similarity(ours, reference).min())


def export_tflite(
    encoder: AlbertEncoder,
    output_dir: str | os.PathLike,
    seq_length: int,
    saved_model_dir: str | os.PathLike,
) -> dict[str, Any]:
    """Writes `encoder_float32.tflite` and `encoder_int8.tflite` into `output_dir` (existing);
    returns a report: file sizes, the SavedModel's variable bytes, and each file's smallest
    `pooled_output` cosine similarity to the SavedModel on `probe_inputs`."""
    output_dir = Path(output_dir)
    saved_model = tf.saved_model.load(str(saved_model_dir))
    inputs = probe_inputs(encoder.config.vocab_size, seq_length)
    report: dict[str, Any] = {
        "seq_length": seq_length,
        "saved_model_variable_bytes": saved_model_variable_bytes(saved_model_dir),
    }
    for kind, converter in tflite_converters(encoder, seq_length).items():
        path = output_dir / TFLITE_FILES[kind]
        path.write_bytes(converter.convert())
        report[f"{kind}_bytes"] = path.stat().st_size
        report[f"{kind}_pooled_cosine"] = pooled_output_drift(path, saved_model, inputs)
    return report


def write_tflite(source: Any, target: Path) -> dict[str, Any]:
    """The `tflite` writer (`albert_tf.export.writers`): `export_tflite` of the checkpoint's encoder,
    compared with the encoder SavedModel of the same export."""
    return export_tflite(source.checkpoint.encoder, target, source.seq_length, source.encoder_dir)


def check_tflite_classifier(source: Any) -> None:
    """The fine-tuned `tflite` writer's check: ExportError unless the model is a classifier of
    one window per text whose encoder is an albert-tf one (not a TF-Hub SavedModel)."""
    record = read_record(source.finetuned_dir)
    task, windows = record.settings.task, record.settings.max_windows
    if task != "classify" or windows > 1:
        raise ExportError(
            "TFLite export of fine-tuned models covers classify tasks of one window per text; "
            f"this one is {task} with --max-windows {windows}"
        )
    if record.from_hub:
        raise ExportError(
            "TFLite export needs a model fine-tuned from an albert-tf checkpoint; this one wraps "
            "a TF-Hub encoder (export it with --onnx or use serving/)"
        )


def write_tflite_classifier(source: Any, target: Path) -> dict[str, Any]:
    """The fine-tuned `tflite` writer (`albert_tf.export.writers`): the files of the module docstring
    into `target`, checked against the model's `serving/` on probe sentences; returns the
    report."""
    finetuned = source.finetuned
    settings = finetuned.task.settings
    seq_length = settings.max_seq_length
    labels = [str(label) for label in settings.labels]
    encoder = float32_copy(finetuned.model.encoder)
    head = finetuned.model.task_head.output_weights()
    (target / LABELS_FILE).write_text("\n".join(labels) + "\n", encoding="utf-8")
    shutil.copyfile(source.finetuned_dir / SP_MODEL_FILE, target / SP_MODEL_FILE)

    texts, pairs = probe_sentences(2 if settings.has_pair else 1)
    inputs = classifier_inputs(finetuned.tokenizer, texts, pairs, seq_length)
    serving = tf.saved_model.load(str(source.finetuned_dir / SERVING_DIR))
    feed = {"text": tf.constant(texts)}
    if pairs is not None:
        feed["text_pair"] = tf.constant(pairs)
    expected = serving.signatures["serving_default"](**feed)["probabilities"].numpy()
    report: dict[str, Any] = {
        "seq_length": seq_length,
        "labels": labels,
        "serving_dtype": finetuned.record.dtype,
        "against_serving": {},
    }
    for kind, converter in tflite_converters(encoder, None, head).items():
        path = target / CLASSIFIER_FILES[kind]
        path.write_bytes(converter.convert())
        got = tflite_runner(path)(inputs)["probabilities"]
        report["against_serving"][path.name] = {
            "bytes": path.stat().st_size,
            "label_agreement": float(np.mean(got.argmax(-1) == expected.argmax(-1))),
            "probabilities_max_abs_diff": float(np.abs(got - expected).max()),
        }
    return report


def probe_sentences(num_segments: int) -> tuple[list[str], list[str] | None]:
    """16 English sentences (pydoc help topics) as texts, and 16 others as their pairs for a
    pair task (None for one segment)."""
    sentences = corpus.probe_sentences(32)
    return sentences[:16], (sentences[16:] if num_segments == 2 else None)


def classifier_inputs(
    tokenizer: Any, texts: list[str], pairs: list[str] | None, seq_length: int
) -> dict[str, np.ndarray]:
    """The three int32 inputs of a classifier file for `texts` (and `pairs`), packed as
    fine-tuning packs them (`albert_tf.finetune.features.pack`)."""
    rows = [
        pack(tokenizer, tokenizer.encode(text), tokenizer.encode(pairs[i]) if pairs else None,
             seq_length)[:3]
        for i, text in enumerate(texts)
    ]  # fmt: skip
    return {
        name: np.array([row[k] for row in rows], np.int32) for k, name in enumerate(ENCODER_INPUTS)
    }


def describe_tflite(path: Path, report: dict[str, Any]) -> list[str]:
    """The `tflite` writer's lines for `albert-tf export`: sizes and agreement."""
    lines = [f"wrote {path}: SavedModel variables {report['saved_model_variable_bytes']:,} B"]
    for kind in ("float32", "int8"):
        lines.append(
            f"  {kind}: {report[f'{kind}_bytes']:,} B, pooled_output cosine similarity "
            f"to the SavedModel >= {report[f'{kind}_pooled_cosine']:.6f}"
        )
    return lines


def describe_tflite_classifier(path: Path, report: dict[str, Any]) -> list[str]:
    """The fine-tuned `tflite` writer's lines for `albert-tf export`."""
    return [f"wrote {path}", *agreement_lines(report)]
