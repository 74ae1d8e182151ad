"""Per-task glue between files, features, model outputs, predictions and metrics.

`load_task_data` reads a task file into model inputs; `decode` turns the model's outputs into one
prediction record per example; `evaluate` scores them against the gold labels. The trainer,
`albert-tf predict` and the tests all go through these three functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from albert_tf.errors import DataError
from albert_tf.finetune import data, features, metrics, squad
from preprocess.tokenizer import AlbertTokenizer

# The metric that picks the best epoch, per task.
BEST_METRIC = {
    "classify": "accuracy",
    "regress": "pearson",
    "squad": "f1",
    "multiple-choice": "accuracy",
    "tag": "f1",
}


@dataclass
class TaskSettings:
    """What decides how a task's files become features; saved in the fine-tuned model."""

    task: str
    max_seq_length: int = 128
    labels: list[str] | None = None  # classify: class names; tag: tag names
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    has_header: bool = True
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    version_2_with_negative: bool = True
    has_pair: bool = False  # classify/regress: examples are sentence pairs


@dataclass
class TaskData:
    """Model inputs of one file; `labels` is None for unlabelled input."""

    inputs: dict[str, np.ndarray]
    labels: Any
    examples: list
    skipped: dict[str, int] = field(default_factory=dict)
    squad_features: list | None = None
    word_index: np.ndarray | None = None
    gold_answers: dict[str, list[str]] | None = None

    def __len__(self) -> int:
        return len(self.examples)


def read_examples(
    path: str, settings: TaskSettings, training: bool, require_labels: bool
) -> tuple[list, dict[str, int]]:
    """Examples of a task file, and counts of what was skipped (reported by callers)."""
    task = settings.task
    if task in ("classify", "regress"):
        examples = data.read_text_file(
            path,
            task=task,
            text_column=settings.text_column,
            text_pair_column=settings.text_pair_column,
            label_column=settings.label_column,
            has_header=settings.has_header,
            require_labels=require_labels,
        )
        return examples, {}
    if task == "squad":
        examples, stats = data.read_squad(path, training=training)
        skipped = {"answers not in context": stats.answers_not_in_context}
        if stats.dropped_questions:
            skipped["questions without a usable answer"] = len(stats.dropped_questions)
        return examples, skipped
    if task == "multiple-choice":
        return data.read_race(path, require_labels=require_labels), {}
    if task == "tag":
        return data.read_conll(path, require_labels=require_labels), {}
    raise DataError(f"unknown task {task!r}")


def infer_labels(settings: TaskSettings, examples: list, path: str) -> None:
    """Sets from training examples: `labels` (classify, tag) unless given, `has_pair`, and
    `version_2_with_negative` (squad: any unanswerable question)."""
    if settings.task in ("classify", "regress"):
        settings.has_pair = any(e.text_b is not None for e in examples)
    if settings.labels is not None:
        return
    if settings.task == "classify":
        settings.labels = data.label_list([e.label for e in examples], path)
    elif settings.task == "tag":
        settings.labels = sorted({t for e in examples for t in e.tags})
        if not settings.labels:
            raise DataError(f"{path}: no tags found")
    elif settings.task == "squad":
        settings.version_2_with_negative = any(e.is_impossible for e in examples)


def load_task_data(
    path: str,
    settings: TaskSettings,
    tokenizer: AlbertTokenizer,
    training: bool = False,
    require_labels: bool = True,
) -> TaskData:
    """Reads and featurizes `path`. Raises DataError on malformed records, labels unknown to
    `settings.labels`, or (with `require_labels`) a file without examples."""
    examples, skipped = read_examples(path, settings, training, require_labels)
    if not examples:
        raise DataError(f"{path} holds no examples")
    task, length = settings.task, settings.max_seq_length
    if task == "classify" and settings.labels is not None:
        data.check_labels([(e.source, e.label) for e in examples], settings.labels)
    if task == "tag" and settings.labels is not None:
        for e in examples:
            data.check_labels([(e.source, t) for t in e.tags or ()], settings.labels)
    if task in ("classify", "regress"):
        encoded = features.encode_text(
            examples, tokenizer, length, settings.labels, task == "regress"
        )
    elif task == "multiple-choice":
        encoded = features.encode_choices(examples, tokenizer, length)
    elif task == "tag":
        encoded = features.encode_tags(examples, tokenizer, length, settings.labels)
    else:
        squad_features = squad.build_squad_features(
            examples, tokenizer, length, settings.doc_stride, settings.max_query_length, training
        )
        names = ("input_word_ids", "input_mask", "input_type_ids")
        inputs = {n: np.asarray([getattr(f, n) for f in squad_features], np.int32) for n in names}
        labels = {
            "start_positions": np.asarray([f.start_position for f in squad_features], np.int32),
            "end_positions": np.asarray([f.end_position for f in squad_features], np.int32),
        }
        gold = {e.qid: [text for text, _ in e.answers] for e in examples}
        if not training:
            gold = data.squad_gold_answers(path)
        return TaskData(inputs, labels, examples, skipped, squad_features, gold_answers=gold)
    if encoded.truncated:
        skipped["truncated to --max-seq-length"] = encoded.truncated
    return TaskData(
        encoded.inputs, encoded.labels, examples, skipped, word_index=encoded.word_index
    )


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _default_tag(labels: list[str]) -> str:
    """The tag of words cut off by --max-seq-length."""
    return "O" if "O" in labels else labels[0]


def decode(
    outputs: dict[str, np.ndarray], task_data: TaskData, settings: TaskSettings
) -> list[dict]:
    """One JSON-ready prediction record per example (see `albert-tf predict --help`)."""
    task, examples = settings.task, task_data.examples
    if task == "classify":
        probabilities = _softmax(outputs["logits"])
        return [
            {
                "label": settings.labels[int(p.argmax())],
                "probabilities": dict(zip(settings.labels, p.tolist(), strict=True)),
            }
            for p in probabilities
        ]
    if task == "regress":
        return [{"prediction": float(v)} for v in outputs["predictions"]]
    if task == "multiple-choice":
        probabilities = _softmax(outputs["logits"])
        return [
            {"id": e.qid, "label": "ABCDEFGHIJ"[int(p.argmax())], "probabilities": p.tolist()}
            for e, p in zip(examples, probabilities, strict=True)
        ]
    if task == "tag":
        logits, records = outputs["logits"], []
        for n, example in enumerate(examples):
            tags = [_default_tag(settings.labels)] * len(example.words)
            for position in np.nonzero(task_data.word_index[n] >= 0)[0]:
                tags[task_data.word_index[n, position]] = settings.labels[
                    int(logits[n, position].argmax())
                ]
            records.append({"words": list(example.words), "tags": tags})
        return records
    predictions = squad.postprocess_squad(
        examples,
        task_data.squad_features,
        outputs["start_logits"],
        outputs["end_logits"],
        n_best_size=settings.n_best_size,
        max_answer_length=settings.max_answer_length,
        version_2_with_negative=settings.version_2_with_negative,
        null_score_diff_threshold=settings.null_score_diff_threshold,
    )
    return [
        {
            "id": p.qid,
            "answer": p.text,
            "char_start": p.char_start,
            "char_end": p.char_end,
            "null_score_diff": p.null_score_diff if math.isfinite(p.null_score_diff) else None,
        }
        for p in predictions
    ]


def evaluate(records: list[dict], task_data: TaskData, settings: TaskSettings) -> dict[str, float]:
    """The task's metrics of `records` against the gold labels of `task_data`."""
    task, examples = settings.task, task_data.examples
    if task == "squad":
        return metrics.squad_scores({r["id"]: r["answer"] for r in records}, task_data.gold_answers)
    if task == "regress":
        gold = [e.label for e in examples]
        predicted = [r["prediction"] for r in records]
        return {
            "pearson": metrics.pearson(gold, predicted),
            "spearman": metrics.spearman(gold, predicted),
        }
    if task == "tag":
        gold = [t for e in examples for t in e.tags]
        predicted = [t for r in records for t in r["tags"]]
        outside = "O" if "O" in settings.labels else None
        tp = sum(g == p and g != outside for g, p in zip(gold, predicted, strict=True))
        n_pred = sum(p != outside for p in predicted)
        n_gold = sum(g != outside for g in gold)
        f1 = 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0
        return {"accuracy": metrics.accuracy(gold, predicted), "f1": f1}
    if task == "multiple-choice":
        gold = [e.label for e in examples]
        predicted = ["ABCDEFGHIJ".index(r["label"]) for r in records]
        return {"accuracy": metrics.accuracy(gold, predicted)}
    index = {label: i for i, label in enumerate(settings.labels)}
    gold = [index[e.label] for e in examples]
    predicted = [index[r["label"]] for r in records]
    scores = {
        "accuracy": metrics.accuracy(gold, predicted),
        "mcc": metrics.matthews_corrcoef(gold, predicted),
    }
    if len(settings.labels) == 2:
        scores["f1"] = metrics.f1_binary(gold, predicted)
    else:
        scores["f1_macro"] = metrics.f1_macro(gold, predicted)
    return scores


def num_labels(settings: TaskSettings) -> int:
    """Number of classes (classify) or tags (tag); 1 for the other tasks."""
    return len(settings.labels) if settings.task in ("classify", "tag") else 1
