"""Loading a fine-tuned model directory and predicting on task files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf
import tensorflow_text  # noqa: F401  (ops of the exported encoder)

from albert_tf.checkpoint import check_checkpoint_files
from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE, AlbertConfig
from albert_tf.dtypes import keras_policy
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import CheckpointError
from albert_tf.finetune.directory import HUB_ENCODER_DIR, FinetuneRecord, read_record
from albert_tf.finetune.features import INPUT_NAMES
from albert_tf.finetune.inference import batched_outputs
from albert_tf.finetune.models import TaskModel, build_head
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.finetune.tasks import Task, TaskData, get_task
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@dataclass
class FinetunedModel:
    """A fine-tuned model restored from its directory, with its tokenizer, task and record."""

    model: TaskModel
    tokenizer: AlbertTokenizer
    task: Task
    record: FinetuneRecord

    @property
    def settings(self) -> FinetuneSettings:
        return self.task.settings


def _build_model(path: Path, record: FinetuneRecord, task: Task) -> TaskModel:
    """The task model of a fine-tuned directory, built (variables created), not yet restored."""
    if record.from_hub:
        # optional: only a TF-Hub encoder needs it, and it needs pkg_resources (setuptools<82)
        import tensorflow_hub as hub

        encoder = hub.KerasLayer(str(path / HUB_ENCODER_DIR), trainable=True, name="encoder")
        initializer_range = 0.02
        config_file = path / CONFIG_FILE
        if config_file.is_file():
            initializer_range = AlbertConfig.from_json_file(config_file).initializer_range
    else:
        config = AlbertConfig.from_json_file(path / CONFIG_FILE)
        encoder = AlbertEncoder(config)
        initializer_range = config.initializer_range
    model = TaskModel(encoder, build_head(task, initializer_range), task)
    model({name: tf.zeros(task.input_shape(), tf.int32) for name in INPUT_NAMES}, training=False)
    return model


def load_finetuned(path: str | os.PathLike) -> FinetunedModel:
    """Restores what `albert-tf finetune` wrote to `path` (CheckpointError if it is not one)."""
    path = Path(path)
    record = read_record(path)
    task = get_task(record.settings)
    tokenizer = AlbertTokenizer(path / SP_MODEL_FILE, do_lower_case=record.settings.do_lower_case)
    with keras_policy(record.dtype):
        model = _build_model(path, record, task)
    prefix = tf.train.latest_checkpoint(str(path))
    if prefix is None:
        raise CheckpointError(f"no checkpoint in {path}")
    check_checkpoint_files(prefix)
    status = (
        tf.train.Checkpoint(encoder=model.encoder, task_head=model.task_head)
        .read(prefix)
        .expect_partial()
    )
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise CheckpointError(f"checkpoint {prefix} does not match its model: {e}") from None
    return FinetunedModel(model, tokenizer, task, record)


def load_examples(finetuned: FinetunedModel, input_path: str, **columns: Any) -> TaskData:
    """The examples of `input_path` (same formats as training; labels optional), tokenized for
    `finetuned`; DataError for a file that holds none or is malformed. `columns`
    (`text_column`, `text_pair_column`, `label_column`, `has_header`) say how this file differs
    from the training file; the rest is read as in training."""
    task = finetuned.task
    if columns:
        task = get_task(task.settings.replace(**columns))
    return task.load(input_path, finetuned.tokenizer, training=False, require_labels=False)


def example_id(example: Any) -> str | int:
    """An example's id: its file's id (id column, SQuAD or RACE id) as the string given (a
    JSONL number 7 is "7"), else the number of its line in the file (an int, from 1)."""
    for name in ("id", "qid"):
        given = getattr(example, name, None)
        if given is not None and given != "":
            return str(given)
    return int(example.source.rpartition(":")[2])


def predict_examples(
    finetuned: FinetunedModel, task_data: TaskData, batch_size: int = 64, encoder: Any = None
) -> tuple[list[dict], dict[str, float] | None]:
    """Prediction records of `task_data` (`load_examples`) and the metrics when it carries
    labels (None otherwise); every record starts with "id" (`example_id`). `encoder`: the
    model's encoder on another runtime (`albert_tf.export.runtime_encoder`), None for
    TensorFlow."""
    task = finetuned.task
    outputs = batched_outputs(finetuned.model, task_data.inputs, batch_size, encoder)
    records = task.decode(outputs, task_data)
    scores = task.evaluate(records, task_data) if task.has_labels(task_data) else None
    records = [
        {"id": example_id(example), **record}
        for example, record in zip(task_data.examples, records, strict=True)
    ]
    return records, scores


def predict_file(
    finetuned: FinetunedModel, input_path: str, batch_size: int = 64, encoder: Any = None
) -> tuple[list[dict], dict[str, float] | None, TaskData]:
    """`predict_examples` of `load_examples(finetuned, input_path)`, and those examples."""
    task_data = load_examples(finetuned, input_path)
    return (*predict_examples(finetuned, task_data, batch_size, encoder), task_data)
