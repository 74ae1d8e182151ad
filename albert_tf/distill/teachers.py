"""The two kinds of teacher `distill` learns from, and how a directory says which it is.

- `SentenceTeacher`: a BERT sentence encoder in the transformers / sentence-transformers layout
  (`albert_tf.distill.bert`); its output per sentence is the L2-normalized mean-pooled last
  layer, float32 [N, H].
- `TaskTeacher`: a directory `albert-tf finetune` wrote (`finetune.json`); its output per text is
  the task model's logits, float32 [N, L]. Only `classify` models teach (their logits are a
  distribution over the labels).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.distill import bert
from albert_tf.distill.cache import teacher_digest
from albert_tf.distill.data import encode_texts
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import ConfigError, DataError
from albert_tf.finetune.data import read_text_file
from albert_tf.finetune.directory import METADATA_FILE, read_record
from albert_tf.finetune.inference import batched_outputs
from albert_tf.finetune.predict import load_finetuned
from albert_tf.weights import assign_checked

SENTENCE, TASK = "sentence-encoder", "fine-tuned"
TEACHABLE_TASKS = ("classify",)


def teacher_kind(path: str | os.PathLike) -> str:
    """SENTENCE or TASK by what `path` holds; DataError (one line) for anything else."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"--teacher {path} is not a directory")
    if (path / METADATA_FILE).is_file():
        return TASK
    if bert.is_bert_dir(path):
        return SENTENCE
    raise DataError(
        f"--teacher {path} is neither a BERT sentence encoder (config.json with model_type "
        f"'bert', model.safetensors, vocab.txt) nor a fine-tuned albert-tf directory "
        f"({METADATA_FILE})"
    )


class SentenceTeacher:
    """A BERT sentence encoder on `AlbertEncoder`, with its own WordPiece tokenizer."""

    kind = SENTENCE

    def __init__(self, path: str | os.PathLike) -> None:
        self.files = bert.read_bert_dir(path)
        if not self.files.mean_pooling:
            raise ConfigError(f"--teacher {path}: only mean pooling is supported")
        self.encoder = AlbertEncoder(self.files.config, name="encoder")
        targets = {v.name.removesuffix(":0"): v for v in self.encoder.variables}
        values = bert.bert_weights(self.files)
        if "encoder/pooler/dense/kernel" not in values:  # sentence encoders may drop the pooler
            targets = {k: v for k, v in targets.items() if "/pooler/" not in k}
        assign_checked(targets, values, f"teacher {path}")
        self._function: Any = None

    @property
    def width(self) -> int:
        """H: the width of each embedding."""
        return self.files.config.hidden_size

    def identity(self) -> dict:
        """What decides this teacher's outputs (a teacher cache's key)."""
        return {
            "kind": self.kind,
            "teacher": teacher_digest(self.files.path),
            "max_seq_length": self.files.max_seq_length,
        }

    def _embed_padded(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._function is None:

            def embed(word_ids: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
                inputs = dict(
                    input_word_ids=word_ids,
                    input_mask=input_mask,
                    input_type_ids=tf.zeros_like(word_ids),
                )
                sequence = self.encoder(inputs, training=False)["sequence_output"]  # [B, S, H]
                weights = tf.cast(input_mask, tf.float32)[:, :, tf.newaxis]  # [B, S, 1]
                mean = tf.reduce_sum(sequence * weights, 1) / tf.maximum(
                    tf.reduce_sum(weights, 1), 1e-9
                )  # [B, H]
                return tf.math.l2_normalize(mean, axis=-1, epsilon=1e-24)

            spec = tf.TensorSpec([None, None], tf.int32)
            self._function = tf.function(embed, input_signature=[spec, spec])
        return self._function(ids, mask).numpy()

    def embed(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """float32 [N, H]: each text's normalized mean-pooled embedding. Texts are run in
        batches of similar length (padding costs time, not accuracy: padded keys are masked)."""
        ids = bert.wordpiece_ids(self.files, texts)
        order = np.argsort([len(row) for row in ids], kind="stable")
        out = np.zeros([len(texts), self.width], np.float32)
        for begin in range(0, len(texts), batch_size):
            rows = order[begin : begin + batch_size]
            length = max(len(ids[i]) for i in rows)
            word_ids = np.zeros([len(rows), length], np.int32)
            mask = np.zeros([len(rows), length], np.int32)
            for j, i in enumerate(rows):
                word_ids[j, : len(ids[i])] = ids[i]
                mask[j, : len(ids[i])] = 1
            out[rows] = self._embed_padded(word_ids, mask)
        return out


@dataclass
class TaskTeacher:
    """A fine-tuned albert-tf classifier; `logits` runs it on raw texts."""

    path: Path
    finetuned: Any  # albert_tf.finetune.predict.FinetunedModel

    kind = TASK

    @classmethod
    def load(cls, path: str | os.PathLike) -> TaskTeacher:
        record = read_record(path)
        task = record.settings.task
        if task not in TEACHABLE_TASKS:
            raise ConfigError(
                f"--teacher {path} was fine-tuned for {task!r}; only "
                f"{', '.join(TEACHABLE_TASKS)} models can teach"
            )
        if record.settings.text_pair_column is not None:
            raise ConfigError(
                f"--teacher {path} classifies text pairs; distill teaches on single texts"
            )
        return cls(Path(path), load_finetuned(path))

    @property
    def labels(self) -> list[str]:
        return list(self.finetuned.record.settings.labels)

    @property
    def width(self) -> int:
        return len(self.labels)

    def identity(self) -> dict:
        """What decides this teacher's outputs (a teacher cache's key)."""
        return {
            "kind": self.kind,
            "teacher": teacher_digest(self.path),
            "max_seq_length": self.finetuned.record.settings.max_seq_length,
        }

    def _named_file(self, name: str) -> Path | None:
        """The file the teacher's finetune.json names as `name` ("train", "eval"), if it is
        still there (relative paths from the current directory, as finetune read them)."""
        named = getattr(self.finetuned.record.settings, name)
        return Path(named) if named and Path(named).is_file() else None

    @property
    def eval_file(self) -> Path | None:
        """The teacher's own --eval file, where it still is."""
        return self._named_file("eval")

    def labeled_texts(self) -> tuple[Path | None, list[str], list[int]]:
        """The teacher's own --train file, its texts and their label indices (into `labels`), read
        as finetune read it; (None, [], []) when it is not there anymore."""
        path = self._named_file("train")
        if path is None:
            return None, [], []
        taught = self.finetuned.record.settings
        examples = read_text_file(
            path, "classify", taught.text_column, None, taught.label_column,
            taught.has_header, quoting=taught.quoting,
        )  # fmt: skip
        index = {label: i for i, label in enumerate(self.labels)}
        kept = [e for e in examples if e.text_a.strip() and str(e.label) in index]
        return path, [e.text_a for e in kept], [index[str(e.label)] for e in kept]

    def logits(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """float32 [N, L]: the teacher's logits of each text (one window per text)."""
        length = self.finetuned.record.settings.max_seq_length
        inputs = encode_texts(self.finetuned.tokenizer, texts, length)
        return batched_outputs(self.finetuned.model, inputs, batch_size)["logits"]

    def embed(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """The teacher's targets: its logits (the cache stores what `embed` returns)."""
        return self.logits(texts, batch_size)


def load_teacher(path: str | os.PathLike) -> SentenceTeacher | TaskTeacher:
    """The teacher in `path`, of the kind `teacher_kind` finds."""
    return SentenceTeacher(path) if teacher_kind(path) == SENTENCE else TaskTeacher.load(path)
