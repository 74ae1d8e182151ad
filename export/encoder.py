"""The encoder SavedModel with the TF-Hub contract of `albert_en_*/3`.

A reusable SavedModel (the protocol `hub.KerasLayer(trainable=True)` and `hub.load` read):
`__call__(inputs, training)` traced for both training values, and the attributes `variables`,
`trainable_variables` and `regularization_losses`. It is written with `tf.saved_model.save` from
plain tracked objects holding `tf.function`s over `AlbertEncoder`, not as a Keras model: no Keras
layer (so no Lambda layer) is serialized, and only the functions below are traced, which keeps
export time a fraction of Keras's per-layer tracing.

Root call: dict of int32 [B, S] `input_word_ids`, `input_mask`, `input_type_ids` (B and S
dynamic) -> dict of float32 `pooled_output [B, H]`, `default` (the same values),
`sequence_output [B, S, H]`, `encoder_outputs` (list of [B, S, H], one per block applied).
`.mlm` (when the checkpoint has an MLM head): the same inputs plus `masked_lm_positions` int32
[B, P] -> the root outputs plus `mlm_logits [B, P, V]`.
Assets: `albert_config_file` (albert_config.json) and, when known, `sp_model_file` (spm.model).
Signature `serving_default`: the three ids as named inputs -> `pooled_output`, `default`,
`sequence_output`, `encoder_outputs_{i}` (a signature's outputs must be a flat dict).
Endpoints `serve` / `serve_training` (Keras 3 `keras.layers.TFSMLayer(path)` and its
`call_training_endpoint`): the root call with training False / True, one dict argument.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import tensorflow as tf

from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE
from albert_tf.dtypes import keras_policy
from albert_tf.encoder import AlbertEncoder
from albert_tf.heads import MaskedLMHead
from albert_tf.layers.compiled import compiled_training
from albert_tf.preprocess.preprocess_model import save_preprocess_model
from albert_tf.preprocess.tokenizer import AlbertTokenizer, as_tokenizer

try:
    from tensorflow.python.saved_model.save_context import save_context
except ImportError:  # a TensorFlow without it only loses the tracing shortcut below
    save_context = None

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
MLM_INPUTS = (*ENCODER_INPUTS, "masked_lm_positions")


def _ids_specs(names: tuple[str, ...]) -> dict[str, tf.TensorSpec]:
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}


def unique_variables(variables: list[tf.Variable]) -> list[tf.Variable]:
    """`variables` without repeats, in first-seen order (the MLM head also tracks the tied
    word-embedding table)."""
    return list({id(v): v for v in variables}.values())


def _reusable(call: tf.types.experimental.PolymorphicFunction, variables: list) -> tf.Module:
    """A trackable object with the reusable-SavedModel attributes, traced for both modes."""
    obj = tf.train.Checkpoint()
    obj.__call__ = call
    obj.variables = unique_variables(variables)
    obj.trainable_variables = [v for v in obj.variables if v.trainable]
    obj.regularization_losses = []
    return obj


def build_hub_module(encoder: AlbertEncoder, mlm_head: MaskedLMHead | None = None) -> tf.Module:
    """The object that is saved. Call it in Python as `module.__call__(inputs, training=...)`.

    Root `variables` hold only the encoder (as tensorflow/models' TF-Hub exporter does); the MLM
    head's variables are reachable through `.mlm`. Autograph is off: the encoder's Python loops
    run at trace time, and skipping conversion makes tracing faster.
    """

    # Traced without the training step's XLA-compiled kernels (layers/compiled.py): the
    # SavedModel keeps plain, portable ops in its training=True functions too.
    with compiled_training(False):

        def encode(inputs: dict[str, tf.Tensor], training: bool = False) -> dict[str, Any]:
            outputs = dict(encoder({k: inputs[k] for k in ENCODER_INPUTS}, training=training))
            outputs["default"] = outputs["pooled_output"]
            return outputs

        encode_fn = tf.function(encode, autograph=False)
        root = _reusable(encode_fn, encoder.variables)
        for training in (False, True):
            encode_fn.get_concrete_function(_ids_specs(ENCODER_INPUTS), training=training)

        if mlm_head is not None:

            def encode_with_mlm(inputs: dict[str, tf.Tensor], training: bool = False) -> dict:
                outputs = dict(encode_fn({k: inputs[k] for k in ENCODER_INPUTS}, training=training))
                outputs["mlm_logits"] = mlm_head(
                    outputs["sequence_output"], masked_lm_positions=inputs["masked_lm_positions"]
                )
                return outputs

            mlm_fn = tf.function(encode_with_mlm, autograph=False)
            root.mlm = _reusable(mlm_fn, encoder.variables + mlm_head.variables)
            for training in (False, True):
                mlm_fn.get_concrete_function(_ids_specs(MLM_INPUTS), training=training)

        # Keras 3 `TFSMLayer` endpoints (its default `call_endpoint` is "serve"): one dict in, as
        # Keras' own `model.export()` writes them.
        specs = [_ids_specs(ENCODER_INPUTS)]
        root.serve = tf.function(
            lambda inputs: encode_fn(inputs, training=False), specs, autograph=False
        )
        root.serve_training = tf.function(
            lambda inputs: encode_fn(inputs, training=True), specs, autograph=False
        )
        for endpoint in (root.serve, root.serve_training):
            endpoint.get_concrete_function()
        return root


def serving_signature(module: tf.Module) -> tf.types.experimental.ConcreteFunction:
    """`serving_default` for TF Serving: the three ids as named inputs, flat outputs."""

    @tf.function(input_signature=list(_ids_specs(ENCODER_INPUTS).values()), autograph=False)
    def serve(input_word_ids, input_mask, input_type_ids):
        inputs = dict(
            input_word_ids=input_word_ids, input_mask=input_mask, input_type_ids=input_type_ids
        )
        outputs = module.serve(inputs)
        flat = {key: outputs[key] for key in ("pooled_output", "default", "sequence_output")}
        for i, block_output in enumerate(outputs["encoder_outputs"]):
            flat[f"encoder_outputs_{i}"] = block_output
        return flat

    return serve.get_concrete_function()


def save_encoder(
    output_dir: str | os.PathLike,
    encoder: AlbertEncoder,
    mlm_head: MaskedLMHead | None = None,
    sp_model: str | os.PathLike | AlbertTokenizer | None = None,
) -> tf.Module:
    """Saves the encoder SavedModel into `output_dir`; returns the saved module.

    Not atomic by itself: `albert_tf.export.bundle.export_bundle` calls it inside a temporary directory.
    Assets are staged under fixed names in a scratch directory that is deleted afterwards; the
    SavedModel stores only asset basenames, so no source or scratch path ends up in it.
    """
    config = encoder.config
    # The SentencePiece model is checked here (and loaded unless a loaded one is given).
    tokenizer = None if sp_model is None else as_tokenizer(sp_model, vocab_size=config.vocab_size)
    # `tf.saved_model.save` retraces every function whose trace was made outside a save context
    # (the context is part of the trace cache key); tracing inside one saves that second trace.
    tracing = (
        save_context(tf.saved_model.SaveOptions()) if save_context else contextlib.nullcontext()
    )
    with tracing:
        module = build_hub_module(encoder, mlm_head)
        signature = serving_signature(module)
    with tempfile.TemporaryDirectory(prefix="albert-export-assets-") as staging:
        config_file = Path(staging) / CONFIG_FILE
        config.to_json_file(config_file)
        module.albert_config_file = tf.saved_model.Asset(str(config_file))
        if tokenizer is not None:
            sp_file = Path(staging) / SP_MODEL_FILE
            shutil.copyfile(tokenizer.sp_model_path, sp_file)
            module.sp_model_file = tf.saved_model.Asset(str(sp_file))
        tf.saved_model.save(module, str(output_dir), signatures={"serving_default": signature})
    return module


def write_encoder(source: Any, target: Path) -> dict[str, bool]:
    """The `encoder` writer (`albert_tf.export.writers`): the checkpoint's encoder SavedModel,
    with `.mlm` when it has an MLM head and the SentencePiece model as an asset when there is
    one; returns {"has_mlm": whether it has `.mlm`}."""
    checkpoint = source.checkpoint
    save_encoder(target, checkpoint.encoder, checkpoint.mlm_head, source.tokenizer)
    return {"has_mlm": checkpoint.mlm_head is not None}


def describe_encoder(path: Path, report: dict[str, bool]) -> list[str]:
    """The `encoder` writer's line for `albert-tf export`."""
    mlm = "with .mlm" if report["has_mlm"] else "without .mlm (no MLM head in the checkpoint)"
    return [f"wrote {path} ({mlm})"]


def write_preprocess(source: Any, target: Path) -> None:
    """The `preprocess` writer (`albert_tf.export.writers`): the preprocessing SavedModel of the
    SentencePiece model at `source.seq_length`."""
    # `target` is the writer's new, empty directory: written over in place.
    save_preprocess_model(
        source.tokenizer, target, source.seq_length, source.do_lower_case, overwrite=True
    )


def float32_copy(encoder: Any) -> Any:
    """A float32 `AlbertEncoder` with `encoder`'s weights (a model fine-tuned in bfloat16 keeps
    float32 variables; the exports compute in float32 before quantizing)."""
    with keras_policy("float32"):
        copy = AlbertEncoder(encoder.config)
        copy({name: tf.zeros((1, 2), tf.int32) for name in ENCODER_INPUTS}, training=False)
    copy.set_weights(encoder.get_weights())
    return copy
