"""The student: an ALBERT encoder with what it is trained through, and the checks that it can
follow its teacher.

- From a sentence-encoder teacher: the encoder, its MLM head (for the masked-LM loss; the SOP
  head is kept as it came so the result is a whole pretrained checkpoint) and a dense
  `projection` from the pooled output [B, H] to the teacher's width [B, H_t].
- From a fine-tuned teacher: the encoder and a classification `task_head` over the teacher's
  labels (a student that is itself a fine-tuned classifier must have the same labels).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.config import (
    SHIPPED_DIR,
    SHIPPED_MODELS,
    SP_MODEL_FILE,
    AlbertConfig,
    resolve_config,
)
from albert_tf.distill.teachers import TASK
from albert_tf.errors import ConfigError
from albert_tf.finetune.directory import METADATA_FILE, read_record
from albert_tf.finetune.models import TaskHead
from albert_tf.finetune.predict import load_finetuned
from albert_tf.preprocess.tokenizer import AlbertTokenizer
from albert_tf.pretrained import resolve
from albert_tf.weights import build_model


@dataclass
class Student:
    """What a distillation run trains. `head` is the projection (sentence-encoder teacher) or
    the task head (fine-tuned teacher); `mlm_head`/`sop_head` are None when the student has none."""

    config: AlbertConfig
    encoder: Any
    mlm_head: Any
    sop_head: Any
    head: Any
    tokenizer: Any
    sp_model_path: Path
    init_kind: str  # "random", "checkpoint" or "fine-tuned"


def _sp_model(settings, teacher, found: Path | None) -> Path:
    """The student's SentencePiece model: --sp-model, else the one its init or config names, else
    (fine-tuned teacher) the teacher's; ConfigError when there is none."""
    if settings.sp_model is not None:
        path = Path(settings.sp_model)
        if not path.is_file():
            raise ConfigError(f"--sp-model {path} does not exist")
        return path
    if found is not None:
        return found
    if settings.init == "random" and str(settings.config) in SHIPPED_MODELS:
        return SHIPPED_DIR / str(settings.config) / SP_MODEL_FILE
    if getattr(teacher, "path", None) is not None and (teacher.path / SP_MODEL_FILE).is_file():
        return teacher.path / SP_MODEL_FILE
    raise ConfigError("the student has no SentencePiece model: pass --sp-model FILE")


def _check_follows(path: Path, teacher) -> None:
    """A fine-tuned student follows only a fine-tuned classifier teacher with its labels."""
    record = read_record(path)
    task, labels = record.settings.task, record.settings.labels
    labels = None if labels is None else list(labels)
    if record.from_hub:
        raise ConfigError(f"--init {path}: a student fine-tuned from a TF-Hub encoder cannot learn")
    if teacher.kind != TASK:
        raise ConfigError(
            f"--init {path} is a fine-tuned {task!r} model; a sentence-encoder "
            "teacher needs a pretrained or random student"
        )
    if task != "classify" or (labels or []) != teacher.labels:
        raise ConfigError(
            f"--init {path} ({task}, labels {labels}) cannot follow the "
            f"teacher's classify labels {teacher.labels}"
        )


def _projection(width: int, config: AlbertConfig) -> keras.layers.Dense:
    init = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
    layer = keras.layers.Dense(width, kernel_initializer=init, name="projection")
    layer.build([None, config.hidden_size])
    return layer


def build_student(settings, teacher) -> Student:
    """The student `settings.init` names, with the head the teacher's kind needs.

    Raises ConfigError (one line) when the student cannot follow the teacher, has no
    SentencePiece model, its vocabulary is smaller than the SentencePiece model's, or the MLM
    loss is asked of a student without an MLM head.
    """
    found, kind, task_head = None, "checkpoint", None
    if settings.init == "random":
        if settings.config is None:
            raise ConfigError("--init random needs --config (a preset, shipped model or JSON)")
        model, kind = build_model(resolve_config(settings.config), True, True), "random"
    else:
        path = Path(resolve(settings.init))
        if not path.exists():
            raise ConfigError(f"--init {path} does not exist")
        if (path / METADATA_FILE).is_file():
            _check_follows(path, teacher)
            finetuned = load_finetuned(path)
            model = _Loaded(finetuned.model.encoder.config, finetuned.model.encoder)
            task_head, kind = finetuned.model.task_head, "fine-tuned"
            found = Path(finetuned.tokenizer.sp_model_path)
        else:
            model = load_checkpoint_dir(path)
            found = model.sp_model_path
    sp_model = _sp_model(settings, teacher, found)
    tokenizer = AlbertTokenizer(sp_model)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise ConfigError(
            f"SentencePiece model {sp_model} has {tokenizer.vocab_size} pieces but the student's "
            f"vocabulary has {model.config.vocab_size}"
        )
    if settings.mlm_weight > 0 and model.mlm_head is None:
        raise ConfigError(f"--init {settings.init} has no MLM head: pass --mlm-weight 0")
    if teacher.kind == TASK:
        head = task_head or TaskHead(
            teacher.width, initializer_range=model.config.initializer_range
        )
        head({"pooled_output": tf.zeros([1, model.config.hidden_size])})  # creates its weights
    else:
        head = _projection(teacher.width, model.config)
    return Student(
        model.config, model.encoder, model.mlm_head, model.sop_head, head, tokenizer, sp_model, kind
    )


@dataclass
class _Loaded:
    """The encoder of a fine-tuned student, shaped like a CheckpointDir (no heads)."""

    config: AlbertConfig
    encoder: Any
    mlm_head: Any = None
    sop_head: Any = None
