"""Loading a fine-tuned model directory and predicting on task files."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.dtypes import keras_policy
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import CheckpointError
from albert_tf.finetune import tasks
from albert_tf.finetune.models import TaskHead, TaskModel, num_head_outputs
from preprocess.tokenizer import AlbertTokenizer

METADATA_FILE = "finetune.json"
HUB_ENCODER_DIR = "hub_encoder"


@dataclass
class FinetunedModel:
    """A fine-tuned model restored from its directory, with its tokenizer and settings."""

    model: TaskModel
    tokenizer: AlbertTokenizer
    settings: tasks.TaskSettings
    metadata: dict


def _build_model(path: Path, metadata: dict, settings: tasks.TaskSettings) -> TaskModel:
    """The task model of a fine-tuned directory, built (variables created), not yet restored."""
    if metadata["encoder"] == "hub":
        import tensorflow_hub as hub
        import tensorflow_text  # noqa: F401  (ops of the exported encoder)

        encoder = hub.KerasLayer(str(path / HUB_ENCODER_DIR), trainable=True, name="encoder")
        initializer_range = 0.02
        config_file = path / "albert_config.json"
        if config_file.is_file():
            initializer_range = AlbertConfig.from_json_file(config_file).initializer_range
    else:
        config = AlbertConfig.from_json_file(path / "albert_config.json")
        encoder = AlbertEncoder(config)
        initializer_range = config.initializer_range
    head = TaskHead(
        settings.task,
        num_head_outputs(settings.task, tasks.num_labels(settings)),
        initializer_range=initializer_range,
    )
    model = TaskModel(encoder, head)
    shape = [1, settings.max_seq_length]
    if settings.task == "multiple-choice":
        shape = [1, 1, settings.max_seq_length]
    names = ("input_word_ids", "input_mask", "input_type_ids")
    model({name: tf.zeros(shape, tf.int32) for name in names}, training=False)
    return model


def load_finetuned(path: str | os.PathLike) -> FinetunedModel:
    """Restores what `albert-tf finetune` wrote to `path` (CheckpointError if it is not one)."""
    path = Path(path)
    meta_file = path / METADATA_FILE
    if not meta_file.is_file():
        raise CheckpointError(f"{path} is not a fine-tuned model directory (no {METADATA_FILE})")
    metadata = json.loads(meta_file.read_text(encoding="utf-8"))
    settings = tasks.TaskSettings(**metadata["settings"])
    tokenizer = AlbertTokenizer(path / "spm.model", do_lower_case=metadata["do_lower_case"])
    with keras_policy(metadata.get("dtype", "float32")):
        model = _build_model(path, metadata, settings)
    prefix = tf.train.latest_checkpoint(str(path))
    if prefix is None:
        raise CheckpointError(f"no checkpoint in {path}")
    status = (
        tf.train.Checkpoint(encoder=model.encoder, task_head=model.task_head)
        .read(prefix)
        .expect_partial()
    )
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise CheckpointError(f"checkpoint {prefix} does not match its model: {e}") from None
    return FinetunedModel(model, tokenizer, settings, metadata)


def predict_file(
    finetuned: FinetunedModel, input_path: str, batch_size: int = 64
) -> tuple[list[dict], dict[str, float] | None, tasks.TaskData]:
    """Prediction records of every example in `input_path` (same formats as training; labels
    optional) and the metrics when the file carries labels (None otherwise)."""
    from albert_tf.finetune.trainer import batched_outputs

    task_data = tasks.load_task_data(
        input_path, finetuned.settings, finetuned.tokenizer, training=False, require_labels=False
    )
    outputs = batched_outputs(finetuned.model, task_data.inputs, batch_size)
    records = tasks.decode(outputs, task_data, finetuned.settings)
    scores = None
    if _has_labels(task_data, finetuned.settings):
        scores = tasks.evaluate(records, task_data, finetuned.settings)
    return records, scores, task_data


def _has_labels(task_data: tasks.TaskData, settings: tasks.TaskSettings) -> bool:
    if settings.task == "squad":
        return any(task_data.gold_answers.values()) or any(
            e.is_impossible for e in task_data.examples
        )
    if settings.task == "tag":
        return all(e.tags is not None for e in task_data.examples)
    return all(e.label is not None for e in task_data.examples) and not (
        settings.task == "classify" and task_data.labels is None
    )


def numpy_outputs(outputs: dict) -> dict[str, np.ndarray]:
    """Tensors of a model or signature call as numpy arrays."""
    return {k: v.numpy() if hasattr(v, "numpy") else np.asarray(v) for k, v in outputs.items()}
