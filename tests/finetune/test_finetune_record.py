"""finetune.json: the typed record reads what earlier versions wrote, rewrites it byte for byte,
and `write_finetuned` writes the directory around it."""

from __future__ import annotations

import json
import shutil

import pytest

from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE, AlbertConfig
from albert_tf.errors import CheckpointError, ConfigError
from albert_tf.finetune.directory import (
    METADATA_FILE,
    SERVING_DIR,
    FinetuneRecord,
    read_record,
    write_finetuned,
)
from albert_tf.finetune.settings import FinetuneSettings
from tests.conftest import FIXTURES

WRITTEN_BEFORE = FIXTURES / "finetune_record"  # by the trainer before the settings were typed


def _old_record(tmp_path, data: dict) -> FinetuneRecord:
    (tmp_path / METADATA_FILE).write_text(json.dumps(data))
    return read_record(tmp_path)


def test_a_record_written_before_reads_into_the_typed_record():
    data = json.loads((WRITTEN_BEFORE / METADATA_FILE).read_text())
    record = read_record(WRITTEN_BEFORE)
    settings = record.settings
    assert isinstance(settings, FinetuneSettings)
    assert settings.record() == data["settings"]
    assert (settings.task, list(settings.labels)) == (data["task"], data["labels"])
    assert (settings.max_seq_length, settings.do_lower_case) == (16, data["do_lower_case"])
    assert (settings.max_windows, settings.window_placement, settings.epochs) == (2, "spread", 2)
    assert (record.encoder, record.dtype, record.from_hub) == ("random", "bfloat16", False)
    assert (record.best_metric, record.best_value, record.best_epoch) == ("accuracy", 0.375, 1)
    assert (record.floor, record.bag_of_words) == (data["floor"], data["bag_of_words"])
    assert (record.learned, record.skipped) == (False, data["skipped"])
    assert record.history == data["history"]
    assert record.seeds is record.restarts is record.converted_from is None
    assert record.unknown == {}


def test_a_record_written_before_is_rewritten_byte_for_byte(tmp_path):
    read_record(WRITTEN_BEFORE).write(tmp_path)
    written = (tmp_path / METADATA_FILE).read_text()
    assert written == (WRITTEN_BEFORE / METADATA_FILE).read_text()


def test_a_record_from_before_the_settings_were_one_object_reads(tmp_path):
    # The task's settings apart from the training ones (under "train"), old path names, no
    # window placement (windows at the head) and no SQuAD head (BERT's).
    record = _old_record(
        tmp_path,
        {
            "task": "classify",
            "settings": {"task": "classify", "labels": ["a", "b"], "max_seq_length": 32},
            "train": {"epochs": 3, "train_path": "t.tsv", "output_dir": "out"},
            "do_lower_case": False,
            "labels": ["a", "b"],
            "max_seq_length": 32,
        },
    )
    settings = record.settings
    assert (settings.task, settings.labels, settings.max_seq_length) == ("classify", ("a", "b"), 32)
    assert (settings.epochs, settings.train, settings.output) == (3, "t.tsv", "out")
    assert (settings.window_placement, settings.squad_head) == ("head", "bert")
    assert settings.do_lower_case is False
    assert (record.encoder, record.dtype, record.unknown) == ("checkpoint", "float32", {})


def test_the_top_copies_fill_in_and_the_top_case_is_the_tokenizers(tmp_path):
    # distill wrote its student's tokenizer case at the top and the teacher's in the settings;
    # predict always read the top one.
    record = _old_record(
        tmp_path,
        {
            "task": "classify",
            "settings": {"labels": ["x"], "do_lower_case": False},
            "do_lower_case": True,
            "max_seq_length": 24,
            "distilled_from": "teacher",
        },
    )
    assert (record.settings.task, record.settings.labels) == ("classify", ("x",))
    assert (record.settings.max_seq_length, record.settings.do_lower_case) == (24, True)
    assert record.unknown == {"distilled_from": "teacher"}
    data = record.to_json()
    assert (data["do_lower_case"], data["settings"]["do_lower_case"]) == (True, True)
    assert data["distilled_from"] == "teacher"


def test_a_record_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="not a fine-tuned model directory"):
        read_record(tmp_path)
    with pytest.raises(CheckpointError, match="is corrupt"):
        _old_record(tmp_path, {"settings": {"labels": ["x"]}})  # no task anywhere
    with pytest.raises(ConfigError, match="--max-windows must be positive"):
        _old_record(tmp_path, {"task": "classify", "settings": {"max_windows": 0}})


def test_write_finetuned_writes_the_directory_and_serving_last(tmp_path):
    settings = FinetuneSettings("regress", "t.tsv", "random", "out", max_seq_length=8)
    record = FinetuneRecord(settings, dtype="bfloat16", converted_from="a test")
    seen = []

    def serving(path):
        seen.append((path, read_record(path.parent)))

    hub = tmp_path / "hub"
    (hub / "variables").mkdir(parents=True)
    shutil.copyfile(FIXTURES / "tokenizer" / "spm.model", tmp_path / "source.model")
    config = AlbertConfig.from_json_file(FIXTURES / "albert_tf1_tiny" / CONFIG_FILE)
    out = tmp_path / "out"
    out.mkdir()
    write_finetuned(
        out, record, tmp_path / "source.model", config=config, hub_encoder=hub, serving=serving
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [CONFIG_FILE, SP_MODEL_FILE, METADATA_FILE, "hub_encoder"]
    )
    assert (out / "hub_encoder" / "variables").is_dir()
    assert AlbertConfig.from_json_file(out / CONFIG_FILE) == config
    [(path, reread)] = seen
    assert path == out / SERVING_DIR and reread == record
    data = json.loads((out / METADATA_FILE).read_text())
    tops = ["task", "settings", "do_lower_case", "encoder", "dtype", "labels", "max_seq_length"]
    assert list(data)[: len(tops)] == tops
    assert (data["task"], data["labels"], data["max_seq_length"]) == ("regress", None, 8)
    assert data["converted_from"] == "a test" and "seeds" not in data
