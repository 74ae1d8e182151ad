"""The fine-tuned model directory: its file names and its `finetune.json`, in one place.

`albert-tf finetune` writes the directory (`finetune.trainer`), `convert --keras-hub-preset`
writes one from a keras-hub classifier, and `predict`, `serving` and every exporter
(`albert_tf.export.hf`, `albert_tf.export.keras_hub`, `albert_tf.export.onnx.classifier`) read one:

- `albert_config.json` (`albert_tf.config.CONFIG_FILE`) and a TF2 checkpoint of `encoder` and
  `task_head` (or, fine-tuned from a TF-Hub encoder, the encoder SavedModel in `hub_encoder/`);
- `spm.model` (`albert_tf.config.SP_MODEL_FILE`), the tokenizer;
- `finetune.json`: the task, its labels, `max_seq_length`, `do_lower_case`, the encoder's kind
  ("checkpoint" or "hub"), the dtype, every setting (`FinetuneSettings.record`) and the run's
  history;
- `serving/`: the strings-in serving SavedModel (`finetune.serving`);
- beside them, what `export --finetuned` writes (`onnx/`, `hf/`, `keras_hub/`, `tflite/`, named by
  `albert_tf.export.writers.FINETUNED_WRITERS`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

from albert_tf.errors import CheckpointError

METADATA_FILE = "finetune.json"
HUB_ENCODER_DIR = "hub_encoder"
SERVING_DIR = "serving"

# The kinds of encoder a fine-tuned model holds: an albert-tf checkpoint's (`checkpoint`, or a
# converted TF1 one, `tf1`) or a TF-Hub SavedModel's (`hub`, copied into HUB_ENCODER_DIR).
HUB_ENCODER = "hub"


@dataclasses.dataclass
class FinetuneRecord:
    """`finetune.json`, the one typed record of a fine-tuned model directory.

    `finetune` writes it (`trainer`), `convert --keras-hub-preset` writes one for a converted
    classifier; `predict`, `serving`, `distill` and every exporter read it through `read_record`.

    Attributes:
        task: the task's name ("classify", "regress", "squad", "multiple-choice", "tag").
        settings: every setting of the run (`FinetuneSettings.record()`), with what the task
            learned from --train (labels, max_seq_length): predict and serving read the
            model's features from here.
        do_lower_case: whether the tokenizer lowercases.
        encoder: the encoder's kind: "checkpoint", "tf1" or "hub" (`HUB_ENCODER`).
        dtype: the dtype the model was fine-tuned and computes in ("float32", "bfloat16", ...).
        labels: the classify/tag labels in output order (None for the other tasks).
        max_seq_length: the length token sequences are cut or padded to.
        best_metric, best_value, best_epoch: the --eval metric the best epoch was chosen by, its
            value (NaN if the run diverged) and that epoch (None without --eval).
        floor: the baseline the run must beat ({"what", "value"}, e.g. the majority class).
        bag_of_words: classify with --eval: the score of TF-IDF + logistic regression fit on
            the same --train ({"what", "value"}; `finetune.summary.bag_of_words`).
        learned: whether the best epoch beat the floor by more than its standard error (None
            without --eval); a run that did not is restarted (--restarts).
        history: one record per epoch (steps, train_loss, eval metrics).
        skipped: what the features left out, for "train" and "eval".
        seeds, restarts: every run's figure under --seeds or --restarts (None otherwise).
        converted_from: where a converted model came from (None when fine-tuned here).
        unknown: keys this version does not know (a newer albert-tf wrote them), kept on rewrite.
    """

    task: str
    settings: dict[str, Any]
    do_lower_case: bool = True
    encoder: str = "checkpoint"
    dtype: str = "float32"
    labels: list[str] | None = None
    max_seq_length: int | None = None
    best_metric: str | None = None
    best_value: float | None = None
    best_epoch: int | None = None
    floor: dict[str, Any] | None = None
    bag_of_words: dict[str, Any] | None = None
    learned: bool | None = None
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    skipped: dict[str, Any] = dataclasses.field(default_factory=dict)
    seeds: dict[str, Any] | None = None
    restarts: dict[str, Any] | None = None
    converted_from: str | None = None
    unknown: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def from_hub(self) -> bool:
        """Whether the encoder is a TF-Hub SavedModel (no albert-tf config or variable names)."""
        return self.encoder == HUB_ENCODER

    @property
    def finite_best(self) -> float | None:
        """`best_value` when it is a number; None when there is none or it is NaN."""
        value = self.best_value
        return None if value is None or math.isnan(value) else value

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FinetuneRecord:
        """The record of a parsed finetune.json, also one written before the settings were one
        object (the training settings apart under "train")."""
        known = {f.name for f in dataclasses.fields(cls)} - {"unknown", "settings"}
        settings = {**data.get("train", {}), **data.get("settings", {})}
        settings.setdefault("do_lower_case", data.get("do_lower_case", True))
        values = {k: v for k, v in data.items() if k in known}
        unknown = {k: v for k, v in data.items() if k not in known | {"settings", "train"}}
        return cls(settings=settings, unknown=unknown, **values)

    def to_json(self) -> dict[str, Any]:
        """The record as finetune.json's JSON object (unset optional parts left out)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        unknown = data.pop("unknown")
        for name in ("seeds", "restarts", "converted_from", "bag_of_words"):
            if data[name] is None:
                del data[name]
        return {**data, **unknown}

    def write(self, directory: str | os.PathLike) -> None:
        """Writes the record as `directory/finetune.json` (indented JSON)."""
        text = json.dumps(self.to_json(), indent=2) + "\n"
        (Path(directory) / METADATA_FILE).write_text(text, encoding="utf-8")


def read_record(path: str | os.PathLike) -> FinetuneRecord:
    """The `FinetuneRecord` of the fine-tuned model directory `path`.

    Raises CheckpointError (one line) when `path` has no finetune.json, or it is not JSON or
    not a record.
    """
    path = Path(path)
    meta_file = path / METADATA_FILE
    if not meta_file.is_file():
        raise CheckpointError(f"{path} is not a fine-tuned model directory (no {METADATA_FILE})")
    try:
        data = json.loads(meta_file.read_text(encoding="utf-8"))
        return FinetuneRecord.from_json(data)
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{meta_file} is corrupt: {e}") from None
