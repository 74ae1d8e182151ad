"""regress: one number per text or text pair (STS-B style); files and windows as `classify`.

Windows pool the single output; the mean of the window predictions is the document's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.finetune import metrics
from albert_tf.finetune.tasks.base import TaskData
from albert_tf.finetune.tasks.classify import Classify


class Regress(Classify):
    name = "regress"
    best_metric = "pearson"

    def configure(self, examples: list, path: str) -> None:
        has_pair = any(e.text_b is not None for e in examples)
        self.settings = self.settings.replace(has_pair=has_pair)

    def targets(self, examples: list) -> np.ndarray | None:
        if not all(e.label is not None for e in examples):
            return None
        return np.asarray([float(e.label) for e in examples], np.float32)

    def num_outputs(self) -> int:
        return 1

    def outputs(self, logits: Any) -> dict:
        return {"predictions": logits[:, 0]}

    def loss(self, outputs: dict, labels: Any) -> Any:
        return tf.reduce_mean(tf.square(outputs["predictions"] - tf.cast(labels, tf.float32)))

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        return [{"prediction": float(v)} for v in outputs["predictions"]]

    def evaluate(self, records: list[dict], task_data: TaskData) -> dict[str, float]:
        gold = [e.label for e in task_data.examples]
        predicted = [r["prediction"] for r in records]
        return {
            "pearson": metrics.pearson(gold, predicted),
            "spearman": metrics.spearman(gold, predicted),
        }

    def serving_outputs(self, module: Any, outputs: dict) -> dict:
        """`text` (+ `text_pair`) -> `prediction` float32 [B]."""
        return {"prediction": outputs["predictions"]}
