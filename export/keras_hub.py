"""`albert-tf export --keras-hub`: a keras-hub preset of a checkpoint or a fine-tuned classifier.

The preset is written by keras-hub itself (`save_to_preset` of an `AlbertBackbone`,
`AlbertMaskedLM` or `AlbertTextClassifier` whose variables are set from ours through
`albert_tf.convert.keras_hub`'s name table): its files are whatever keras-hub's loaders read,
now and in later versions, with no second copy of Keras' weight-file layout here. Keras 3 runs in
this process beside tf_keras, on its TensorFlow backend: `albert_tf.convert.keras_hub`'s
`import_keras_hub` chooses it and imports keras-hub (the `keras-hub` extra), and Keras is
imported after that.

Beside keras-hub's files the preset holds `assets/albert_tf/spm.model` (the SentencePiece model
as trained; `convert --keras-hub-preset` reads it back) and `report.json`: what travelled, the
notes printed, keras-hub's largest differences from our outputs on probe inputs, and the
tokenizer's known differences (`albert_tf.export.keras_hub_tokenizer.DIFFERENCES`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.convert.keras_hub import (
    CLASSIFIER,
    MASKED_LM,
    MLM_EPSILON_NOTE,
    ORIGINAL_SP_MODEL,
    backbone_config,
    check_travels,
    import_keras_hub,
    name_pairs,
    weights_by_path,
)
from albert_tf.errors import ExportError
from albert_tf.export.keras_hub_tokenizer import DIFFERENCES, albert_sp_model_proto
from albert_tf.export.tflite import probe_inputs
from albert_tf.export.writers import (
    CHECKPOINT_WRITERS,
    FINETUNED_WRITERS,
    ExportSource,
    write_one,
    writers_named,
)
from albert_tf.finetune.directory import read_record
from albert_tf.finetune.features import INPUT_NAMES
from albert_tf.finetune.predict import load_finetuned
from albert_tf.preprocess.tokenizer import AlbertTokenizer, as_tokenizer

SOP_NOTE = "the sentence-order head stays behind: keras-hub has no ALBERT SOP head"

Outputs = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def our_arrays(variables: list[Any]) -> dict[str, np.ndarray]:
    """Variables (tf_keras) as arrays keyed by name without `:0` (the name table's keys)."""
    return {v.name.removesuffix(":0"): v.numpy() for v in variables}


def _keras_hub_outputs(model: Any, head: str | None, inputs: dict[str, np.ndarray]) -> dict:
    """keras-hub `model`'s float32 outputs for our encoder inputs as numpy arrays: the
    backbone's `sequence_output` and `pooled_output` (head None), `mlm_logits` [B, S, V] at
    every position ("mlm"), or the classifier's `logits` ("classifier")."""
    import keras

    numpy = keras.ops.convert_to_numpy
    feed = dict(
        token_ids=inputs["input_word_ids"],
        segment_ids=inputs["input_type_ids"],
        padding_mask=inputs["input_mask"],
    )
    if head == "mlm":
        positions = np.tile(
            np.arange(inputs["input_word_ids"].shape[1], dtype=np.int32),
            (len(feed["token_ids"]), 1),
        )
        return {"mlm_logits": numpy(model({**feed, "mask_positions": positions}, training=False))}
    if head == "classifier":
        return {"logits": numpy(model(feed, training=False))}
    return {k: numpy(v) for k, v in model(feed, training=False).items()}


def write_preset(
    directory: Path,
    config: AlbertConfig,
    arrays: dict[str, np.ndarray],
    *,
    head: str | None = None,
    num_classes: int | None = None,
    sp_model: Path | AlbertTokenizer | None = None,
    do_lower_case: bool = True,
    seq_length: int = 128,
    ours: Outputs,
    probe: dict[str, np.ndarray],
) -> dict[str, Any]:
    """Writes the keras-hub preset of `arrays` (our variable names; `head` None, "mlm" or
    "classifier" with `num_classes`) into `directory` (created if needed); returns the report.

    With `sp_model` (a path or the loaded tokenizer) the preset has keras-hub's
    `AlbertTokenizer` (the combined normalizer of
    `albert_tf.export.keras_hub_tokenizer`) and, for a task, its preprocessor at `seq_length`. `ours` maps
    `probe` (encoder inputs) to our outputs (`sequence_output`, `pooled_output`, and
    `mlm_logits` at every position or the classifier's `logits`); the report holds keras-hub's
    largest absolute difference from each.
    """
    keras_hub = import_keras_hub()
    models = keras_hub.models
    backbone = models.AlbertBackbone(**backbone_config(config))
    tokenizer = preprocessor = ours_tokenizer = None
    if sp_model is not None:
        ours_tokenizer = as_tokenizer(sp_model, do_lower_case)
        tokenizer = models.AlbertTokenizer(
            proto=albert_sp_model_proto(ours_tokenizer.model_proto, do_lower_case)
        )
    if head == "mlm":
        if tokenizer is not None:
            preprocessor = models.AlbertMaskedLMPreprocessor(tokenizer, sequence_length=seq_length)
        model = models.AlbertMaskedLM(backbone, preprocessor=preprocessor)
    elif head == "classifier":
        if tokenizer is not None:
            preprocessor = models.AlbertTextClassifierPreprocessor(
                tokenizer, sequence_length=seq_length
            )
        model = models.AlbertTextClassifier(backbone, num_classes, preprocessor=preprocessor)
    else:
        model = backbone
    _fill(model, config, arrays, head)

    directory.mkdir(parents=True, exist_ok=True)
    model.save_to_preset(str(directory))
    if model is backbone and tokenizer is not None:
        tokenizer.save_to_preset(str(directory))
    if ours_tokenizer is not None:
        (directory / ORIGINAL_SP_MODEL).parent.mkdir(parents=True)
        (directory / ORIGINAL_SP_MODEL).write_bytes(ours_tokenizer.model_proto)

    expected = ours(probe)
    got = _keras_hub_outputs(backbone, None, probe)
    if head is not None:
        got.update(_keras_hub_outputs(model, head, probe))
    differences = {
        name: float(np.abs(got[name] - expected[name]).max()) for name in got if name in expected
    }
    if head == "mlm":
        # What a user gets after setting ALBERT's epsilon (MLM_EPSILON_NOTE).
        model.masked_lm_head._intermediate_layer_norm.epsilon = 1e-12
        exact = _keras_hub_outputs(model, head, probe)["mlm_logits"]
        differences["mlm_logits_epsilon_1e-12"] = float(
            np.abs(exact - expected["mlm_logits"]).max()
        )
    return {
        "keras_hub_version": keras_hub.__version__,
        "task": {None: "AlbertBackbone", "mlm": MASKED_LM, "classifier": CLASSIFIER}[head],
        "max_abs_diff": differences,
        "tokenizer": None
        if sp_model is None
        else {"do_lower_case": do_lower_case, "differs_from_albert_on": _differences()},
    }


def _differences() -> list[str]:
    return list(DIFFERENCES)


def _fill(
    model: Any, config: AlbertConfig, arrays: dict[str, np.ndarray], head: str | None
) -> None:
    """Sets every variable of the keras-hub `model` from `arrays` through the name table; the
    embedding projection is the identity where E == H. ExportError if anything is left over."""
    weights = weights_by_path(model)
    filled = set()
    for ours, theirs in name_pairs(config, head):
        variable = weights[theirs]
        variable.assign(arrays[ours].reshape(variable.shape))
        filled.add(theirs)
    if config.embedding_size == config.hidden_size:
        weights["embedding_projection/kernel"].assign(np.eye(config.hidden_size, dtype=np.float32))
        weights["embedding_projection/bias"].assign(np.zeros(config.hidden_size, np.float32))
        filled |= {"embedding_projection/kernel", "embedding_projection/bias"}
    left = sorted(set(weights) - filled)
    if left:
        raise ExportError(f"keras-hub variables with no value from our model: {', '.join(left)}")


def check_keras_hub(source: ExportSource) -> None:
    """The keras-hub writers' check (`albert_tf.export.writers`): the extra is installed, and keras-hub
    computes the model (`check_travels`) when its config is known."""
    if source.config is not None:
        check_travels(source.config)  # what keras-hub cannot compute is refused before any work
    import_keras_hub()


def check_keras_hub_finetuned(source: ExportSource) -> None:
    """The fine-tuned `keras_hub` writer's check, from finetune.json alone: a classify model
    fine-tuned from an albert-tf checkpoint (keras-hub has no other ALBERT task model, and a
    TF-Hub encoder has no config to rebuild), then the extra."""
    record = read_record(source.finetuned_dir)
    if record.settings.task != "classify":
        raise ExportError(
            "keras-hub has an ALBERT model for classify tasks only; this one is "
            f"{record.settings.task}"
        )
    if record.from_hub:
        raise ExportError(
            "this model was fine-tuned from a TF-Hub encoder: keras-hub export needs a "
            "checkpoint directory's encoder (fine-tune from one)"
        )
    import_keras_hub()


# === A checkpoint directory (export --checkpoint DIR --keras-hub) ===


def write_checkpoint_preset(
    checkpoint: Any,
    directory: Path,
    sp_model: Path | AlbertTokenizer | None,
    seq_length: int,
    do_lower_case: bool,
) -> dict[str, Any]:
    """The preset of a `CheckpointDir` (`AlbertMaskedLM` when it has an MLM head, else the
    backbone) at the new `directory`, with report.json; returns the report."""
    tokenizer = None if sp_model is None else as_tokenizer(sp_model, do_lower_case)
    source = ExportSource(
        config=checkpoint.config,
        checkpoint=checkpoint,
        tokenizer=tokenizer,
        seq_length=seq_length,
        do_lower_case=do_lower_case,
    )
    (writer,) = writers_named(CHECKPOINT_WRITERS, ["keras_hub"])
    return write_one(writer, source, Path(directory))


def write_keras_hub(source: ExportSource, target: Path) -> dict[str, Any]:
    """The `keras_hub` writer (`albert_tf.export.writers`): the preset of `write_checkpoint_preset` into
    `target`; returns the report."""
    checkpoint = source.checkpoint
    config = checkpoint.config
    notes = check_travels(config)
    variables = list(checkpoint.encoder.variables)
    head = None
    if checkpoint.mlm_head is not None:
        head = "mlm"
        notes.append(MLM_EPSILON_NOTE)
        variables += checkpoint.mlm_head.variables  # the tied table again, by the same name
    if checkpoint.sop_head is not None:
        notes.append(SOP_NOTE)
    if source.tokenizer is None:
        notes.append("no SentencePiece model: the preset has no tokenizer")
    arrays = our_arrays(variables)

    def ours(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = checkpoint.encoder(inputs, training=False)
        result = {k: outputs[k].numpy() for k in ("sequence_output", "pooled_output")}
        if checkpoint.mlm_head is not None:
            result["mlm_logits"] = checkpoint.mlm_head(outputs["sequence_output"]).numpy()
        return result

    seq_length = source.seq_length
    probe = probe_inputs(config.vocab_size, min(seq_length, config.max_position_embeddings))
    report = write_preset(
        target,
        config,
        arrays,
        head=head,
        sp_model=source.tokenizer,
        do_lower_case=source.do_lower_case,
        seq_length=seq_length,
        ours=ours,
        probe=probe,
    )
    report["notes"] = notes
    return report


# === A fine-tuned classifier (export --finetuned DIR --keras-hub) ===


def export_finetuned_keras_hub(finetuned_dir: str | os.PathLike) -> dict[str, Any]:
    """Writes `finetuned_dir/keras_hub/`, an `AlbertTextClassifier` preset of a `finetune`
    classify model with its head's weights, replacing an earlier one atomically; returns the
    report (with its `notes`).

    Raises ExportError (one line, nothing written) for other tasks, for models fine-tuned from
    a TF-Hub encoder (no config to rebuild), and for what `check_travels` refuses.
    """
    finetuned_dir = Path(finetuned_dir)
    check_keras_hub_finetuned(ExportSource(finetuned_dir=finetuned_dir))
    source = ExportSource(finetuned_dir=finetuned_dir, finetuned=load_finetuned(finetuned_dir))
    (writer,) = writers_named(FINETUNED_WRITERS, ["keras_hub"])
    return write_one(writer, source, finetuned_dir / writer.directory)


def write_keras_hub_finetuned(source: ExportSource, target: Path) -> dict[str, Any]:
    """The fine-tuned `keras_hub` writer (`albert_tf.export.writers`): the preset of
    `export_finetuned_keras_hub` into `target`; returns the report."""
    finetuned = source.finetuned
    settings = finetuned.settings
    model = finetuned.model
    config = model.encoder.config
    notes = check_travels(config)
    if settings.max_windows > 1:
        notes.append(
            f"keras-hub's AlbertTextClassifier reads the first {settings.max_seq_length} tokens "
            f"of a text; it does not pool {settings.max_windows} windows over long texts"
        )
    if finetuned.record.dtype != "float32":
        notes.append(
            f"fine-tuned in {finetuned.record.dtype}: the preset computes in float32 "
            "(keras-hub's default policy)"
        )
    arrays = our_arrays(model.encoder.variables)
    kernel, bias = model.task_head.output_weights()
    arrays["task_head/dense/kernel"], arrays["task_head/dense/bias"] = kernel, bias

    def ours(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = model.encoder(inputs, training=False)
        result = {k: outputs[k].numpy() for k in ("sequence_output", "pooled_output")}
        feed = {name: inputs[name] for name in INPUT_NAMES}
        result["logits"] = model(feed, training=False)["logits"].numpy()
        return result

    probe = probe_inputs(config.vocab_size, min(settings.max_seq_length, 32))
    report = write_preset(
        target,
        config,
        arrays,
        head="classifier",
        num_classes=model.task_head.num_outputs,
        sp_model=finetuned.tokenizer,
        do_lower_case=finetuned.tokenizer.do_lower_case,
        seq_length=settings.max_seq_length,
        ours=ours,
        probe=probe,
    )
    report["notes"] = notes
    report["labels"] = list(settings.labels or [])
    report["finetune_settings"] = settings.record()
    return report


def describe_keras_hub(path: Path, report: dict[str, Any]) -> list[str]:
    """The `keras_hub` writers' lines for `albert-tf export`: a line per note, one for the
    outputs' agreement, one for the tokenizer."""
    lines = [f"wrote {path}", *(f"  note: {note}" for note in report["notes"])]
    differences = ", ".join(f"{k} {v:.1e}" for k, v in report["max_abs_diff"].items())
    lines.append(f"  {report['task']}: largest difference from ours on probe inputs: {differences}")
    if report["tokenizer"] is not None:
        lines.append(
            "  AlbertTokenizer: our ids except on "
            + "; ".join(report["tokenizer"]["differs_from_albert_on"])
        )
    return lines
