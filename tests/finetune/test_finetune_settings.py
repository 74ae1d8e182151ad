"""FinetuneSettings: the CLI's defaults are the fields', every flag is recorded, bad values are
one-line errors, and finetune.json (old and new) reads back."""

from __future__ import annotations

import dataclasses

import pytest

from albert_tf.cli import build_parser
from albert_tf.errors import ConfigError
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.finetune.tasks import REGISTRY, TASK_NAMES

REQUIRED = ["--task", "classify", "--train", "t.tsv", "--init", "random", "--output", "out"]


def _from_argv(*flags: str) -> FinetuneSettings:
    return FinetuneSettings.from_args(build_parser().parse_args(["finetune", *REQUIRED, *flags]))


def test_flag_defaults_are_the_fields_defaults():
    assert _from_argv() == FinetuneSettings("classify", "t.tsv", "random", "out")


def test_every_flag_reaches_the_settings_and_the_record():
    settings = _from_argv(
        "--eval=d.tsv",
        "--no-header",
        "--no-lower-case",
        "--no-serving",
        "--labels=neg,pos",
        "--max-windows=8",
        "--window-placement=head-tail",
        "--epochs=5",
        "--config=tiny",
        "--sp-model=spm.model",
    )
    assert (settings.eval, settings.has_header, settings.do_lower_case) == (
        "d.tsv",
        False,
        False,
    )
    assert (settings.export_serving, settings.labels) == (False, ("neg", "pos"))
    assert (settings.max_windows, settings.window_placement, settings.epochs) == (8, "head-tail", 5)
    record = settings.record()
    assert set(record) == {f.name for f in dataclasses.fields(FinetuneSettings)}
    assert (record["init"], record["config"], record["sp_model"]) == ("random", "tiny", "spm.model")
    assert FinetuneSettings.from_record(record) == settings
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.epochs = 1


def test_the_record_uses_the_flags_names_and_old_records_read_back():
    record = _from_argv("--eval=d.tsv").record()
    assert (record["train"], record["eval"], record["output"]) == ("t.tsv", "d.tsv", "out")
    assert not {"train_path", "eval_path", "output_dir"} & set(record)
    # finetune.json of a model fine-tuned before the settings took the flags' names
    old = {k: v for k, v in record.items() if k not in ("train", "eval", "output")}
    old |= {"train_path": "t.tsv", "eval_path": "d.tsv", "output_dir": "out"}
    assert FinetuneSettings.from_record(old) == FinetuneSettings.from_record(record)


def test_a_model_from_before_reads_its_windows_at_the_head():
    # finetune.json of a model fine-tuned before the settings were one object
    old = {"task": "classify", "max_windows": 4, "labels": ["a", "b"], "has_pair": False}
    settings = FinetuneSettings.from_record({"epochs": 2, "do_lower_case": True, **old})
    assert (settings.window_placement, settings.max_windows, settings.epochs) == ("head", 4, 2)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epochs": 0}, "--epochs must be positive"),
        ({"learning_rate": float("nan")}, "--learning-rate must be positive"),
        ({"warmup_proportion": 2.0}, r"--warmup-proportion must be in \[0, 1\]"),
        ({"window_placement": "middle"}, "--window-placement must be one of head, spread"),
        ({"max_windows": 0}, "--max-windows must be positive"),
        (
            {"task": "squad", "max_windows": 2},
            "--max-windows applies to classify, regress and tag, not squad",
        ),
        ({"task": "tag", "window_pooling": "max"}, "--window-pooling must be mean for tag"),
        (
            {"max_windows": 2, "max_seq_length": 16, "max_first_segment_length": 13},
            r"--max-first-segment-length must be in \[1, 12\]",
        ),
    ],
)
def test_bad_values_are_one_line_errors(changes, message):
    with pytest.raises(ConfigError, match=message):
        FinetuneSettings("classify", "t.tsv", "random", "out").replace(**changes)


def test_task_names_are_the_registry():
    assert tuple(REGISTRY) == TASK_NAMES
