"""The fine-tuned model directory: its file names and its `finetune.json`, in one place.

`write_finetuned` writes the directory (`albert-tf finetune`, `convert` from a run_squad_v2.py
checkpoint or a keras-hub classifier, and `distill` from a fine-tuned teacher all call it);
`predict`, `serving` and every exporter (`albert_tf.export.hf`, `albert_tf.export.keras_hub`,
`albert_tf.export.onnx.classifier`) read one:

- `albert_config.json` (`albert_tf.config.CONFIG_FILE`) and a TF2 checkpoint of `encoder` and
  `task_head` (or, fine-tuned from a TF-Hub encoder, the encoder SavedModel in `hub_encoder/`);
- `spm.model` (`albert_tf.config.SP_MODEL_FILE`), the tokenizer;
- `finetune.json` (`FinetuneRecord`): every setting (`FinetuneSettings`, the task, its labels,
  `max_seq_length` and `do_lower_case` among them), the encoder's kind ("checkpoint" or "hub"),
  the dtype and the run's history;
- `serving/`: the strings-in serving SavedModel (`finetune.serving`);
- beside them, what `export --finetuned` writes (`onnx/`, `hf/`, `keras_hub/`, `tflite/`, named by
  `albert_tf.export.writers.FINETUNED_WRITERS`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_tf.checkpoint import write_checkpoint
from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE
from albert_tf.errors import CheckpointError
from albert_tf.finetune.settings import FinetuneSettings

if TYPE_CHECKING:
    from albert_tf.config import AlbertConfig

METADATA_FILE = "finetune.json"
HUB_ENCODER_DIR = "hub_encoder"
SERVING_DIR = "serving"

# The kinds of encoder a fine-tuned model holds: an albert-tf checkpoint's (`checkpoint`, or a
# converted TF1 one, `tf1`) or a TF-Hub SavedModel's (`hub`, copied into HUB_ENCODER_DIR).
HUB_ENCODER = "hub"

# Settings finetune.json also writes at its top, for readers of the file itself; on reading, the
# settings' own values count, except that the top "do_lower_case" is the tokenizer's case
# (`predict` always read it from there, and distill wrote its student's case there).
_TOP_COPIES = ("task", "labels", "max_seq_length")


@dataclasses.dataclass
class FinetuneRecord:
    """`finetune.json`, the one typed record of a fine-tuned model directory.

    `write_finetuned` writes it with the rest of the directory (`finetune`, `convert` and
    `distill` call it); `predict`, `serving`, `distill` and every exporter read it through
    `read_record`.

    On disk (`to_json`): the object of these attributes, `settings` as
    `FinetuneSettings.record()`, and at its top a copy of the settings' "task", "do_lower_case",
    "labels" and "max_seq_length" (the file's format since the settings were recorded whole).

    Attributes:
        settings: every setting of the run, with what the task learned from --train (labels,
            max_seq_length, has_pair, ...): predict and serving read the model's task, features
            and tokenizer's case from here.
        encoder: the encoder's kind: "checkpoint", "tf1" or "hub" (`HUB_ENCODER`).
        dtype: the dtype the model was fine-tuned and computes in ("float32", "bfloat16", ...).
        steps: the training steps the kept run took (None for a model not fine-tuned here).
        hardware: what it ran on (`albert_tf.run_record.hardware`: CPU model, cores,
            accelerators; None for a model not fine-tuned here). A fine-tune runs in one
            process, so its settings cannot change mid-run.
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

    settings: FinetuneSettings
    encoder: str = "checkpoint"
    dtype: str = "float32"
    steps: int | None = None
    hardware: dict[str, Any] | None = None
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

    def ran(self) -> dict[str, Any]:
        """What the run ran, for a record that keeps a fine-tune's figures: {"dtype", "steps",
        "hardware"}."""
        return {"dtype": self.dtype, "steps": self.steps, "hardware": self.hardware}

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
        object (the training settings apart under "train"; old setting names and defaults as
        `FinetuneSettings.from_record` reads them). ConfigError for a setting out of range."""
        recorded = {**data.get("train", {}), **data.get("settings", {})}
        for name in _TOP_COPIES:
            if name in data:
                recorded.setdefault(name, data[name])
        recorded["do_lower_case"] = data.get("do_lower_case", recorded.get("do_lower_case", True))
        fields = {f.name for f in dataclasses.fields(cls)} - {"settings", "unknown"}
        copies = {"settings", "train", "do_lower_case", *_TOP_COPIES}
        return cls(
            settings=FinetuneSettings.from_record(recorded),
            unknown={k: v for k, v in data.items() if k not in fields | copies},
            **{k: v for k, v in data.items() if k in fields},
        )

    def to_json(self) -> dict[str, Any]:
        """The record as finetune.json's JSON object (unset optional parts left out)."""
        settings = self.settings.record()
        rest = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in ("settings", "encoder", "dtype", "unknown"):
            del rest[name]
        for name in ("steps", "hardware", "seeds", "restarts", "converted_from", "bag_of_words"):
            if rest[name] is None:
                del rest[name]
        return {
            "task": settings["task"],
            "settings": settings,
            "do_lower_case": settings["do_lower_case"],
            "encoder": self.encoder,
            "dtype": self.dtype,
            "labels": settings["labels"],
            "max_seq_length": settings["max_seq_length"],
            **rest,
            **self.unknown,
        }

    def write(self, directory: str | os.PathLike) -> None:
        """Writes the record as `directory/finetune.json` (indented JSON); `write_finetuned`
        writes a whole directory, and `--seeds`/`--restarts` rewrite the kept run's record."""
        text = json.dumps(self.to_json(), indent=2) + "\n"
        (Path(directory) / METADATA_FILE).write_text(text, encoding="utf-8")


def write_finetuned(
    directory: str | os.PathLike,
    record: FinetuneRecord,
    sp_model: str | os.PathLike,
    *,
    config: AlbertConfig | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    hub_encoder: str | os.PathLike | None = None,
    serving: Callable[[Path], None] | None = None,
) -> None:
    """Writes a fine-tuned model directory (the module docstring) into the existing `directory`:
    the config, the checkpoint, the tokenizer, the TF-Hub encoder, `record` as finetune.json and
    then the serving SavedModel.

    Args:
        sp_model: the SentencePiece model, copied as `SP_MODEL_FILE`.
        config: the encoder's config (None for a TF-Hub encoder that came without one).
        checkpoint: the objects of the TF2 checkpoint (`encoder`, `task_head`), written with
            `albert_tf.checkpoint.write_checkpoint`; None when `directory` holds it already
            (the trainer saves its best epoch there).
        hub_encoder: a TF-Hub encoder SavedModel, copied into `HUB_ENCODER_DIR`.
        serving: writes the serving SavedModel at the path it is given (`directory/SERVING_DIR`);
            called last, so it may load the directory back. None writes no `serving/`.
    """
    directory = Path(directory)
    if config is not None:
        config.to_json_file(directory / CONFIG_FILE)
    if checkpoint is not None:
        write_checkpoint(directory, **checkpoint)
    shutil.copyfile(sp_model, directory / SP_MODEL_FILE)
    if hub_encoder is not None:
        shutil.copytree(hub_encoder, directory / HUB_ENCODER_DIR)
    record.write(directory)
    if serving is not None:
        serving(directory / SERVING_DIR)


def read_record(path: str | os.PathLike) -> FinetuneRecord:
    """The `FinetuneRecord` of the fine-tuned model directory `path`.

    Raises CheckpointError (one line) when `path` has no finetune.json, or it is not JSON or
    not a record, and ConfigError for a recorded setting out of range.
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
