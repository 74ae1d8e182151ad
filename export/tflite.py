"""TFLite export of the encoder: float32 and dynamic-range int8, at a fixed sequence length.

Both files have one signature, `serving_default`, with inputs `input_word_ids`, `input_mask`,
`input_type_ids` (int32 [B, seq_length]; B is resized on demand) and outputs `pooled_output`
[B, H] and `sequence_output` [B, seq_length, H], float32. Dynamic-range quantization stores the
weight matrices as int8 (tensors of at least 1024 elements) and computes in float. The tanh GELU
is one GELU operator per block (`albert_tf.activations.gelu_as_one_op`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.activations import gelu_as_one_op
from albert_tf.encoder import AlbertEncoder
from albert_tf.runtimes import tflite_runner
from export.encoder import ENCODER_INPUTS

TFLITE_FILES = {"float32": "encoder_float32.tflite", "int8": "encoder_int8.tflite"}
TFLITE_OUTPUTS = ("pooled_output", "sequence_output")


def tflite_converters(encoder: AlbertEncoder, seq_length: int) -> dict[str, Any]:
    """`{"float32": converter, "int8": converter}` for the encoder in inference mode; both share
    one traced function. The int8 converter applies dynamic-range quantization."""
    specs = [tf.TensorSpec([None, seq_length], tf.int32, name=name) for name in ENCODER_INPUTS]

    @tf.function(input_signature=specs, autograph=False)
    def serve(input_word_ids, input_mask, input_type_ids):
        inputs = dict(
            input_word_ids=input_word_ids, input_mask=input_mask, input_type_ids=input_type_ids
        )
        outputs = encoder(inputs, training=False)
        return {key: outputs[key] for key in TFLITE_OUTPUTS}

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
    """The `tflite` writer (`export.writers`): `export_tflite` of the checkpoint's encoder,
    compared with the encoder SavedModel of the same export."""
    return export_tflite(source.checkpoint.encoder, target, source.seq_length, source.encoder_dir)
