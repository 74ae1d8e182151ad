"""Damage met by `pretrain`: a corrupt record in a shard mid-run, a corrupt checkpoint on resume.

Both stop with one line naming the damaged file (exit 2; DataError / CheckpointError from the
library), and the checkpoints written before stay restorable.
"""

from __future__ import annotations

import functools

import pytest
import tensorflow as tf

from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.cli import main
from albert_tf.errors import DataError
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import pretrain
from tests import helpers

pytestmark = pytest.mark.slow

CONFIG = helpers.tiny_pretraining_config(vocab_size=100)


@pytest.fixture
def run_files(tmp_path, monkeypatch):
    """A 40-record shard, its config, and a shuffle buffer of 8 records, so the pipeline reads
    the shard's last quarter only after a few steps (the default buffer reads it all at once)."""
    tf.config.list_logical_devices()  # TF's one-time device log goes before the captured call
    shard = helpers.write_pretraining_records(tmp_path / "a.tfrecord", 40, vocab_size=100, seed=1)
    CONFIG.to_json_file(tmp_path / "albert_config.json")
    small_buffer = functools.partial(data_lib.train_dataset, shuffle_buffer=8)
    monkeypatch.setattr(data_lib, "train_dataset", small_buffer)
    return shard, tmp_path / "albert_config.json"


def _pretrain_fails(capfd, shard, config, output, steps) -> str:
    """`albert-tf pretrain` for `steps` exits 2 with one error line; returns the line."""
    capfd.readouterr()
    assert main(_argv(shard, config, output, steps)) == 2
    return helpers.one_error_line(capfd.readouterr().err, "pretrain")


def _argv(shard, config, output, steps):
    return [
        "pretrain",
        *("--data", str(shard), "--config", str(config), "--output", str(output)),
        *("--train-steps", str(steps), "--batch-size", "4", "--save-every", "2"),
        *("--steps-per-loop", "2", "--log-every", "2", "--dtype", "float32", "--quiet"),
    ]


def test_corrupt_record_mid_run_names_the_shard_and_keeps_the_checkpoint(run_files, capfd):
    shard, config = run_files
    helpers.overwrite_mid_file(shard, at=0.8)
    output = shard.parent / "run"
    line = _pretrain_fails(capfd, shard, config, output, steps=40)
    latest = tf.train.latest_checkpoint(str(output))
    assert latest is not None and not latest.endswith("ckpt-40")
    assert f"training shard {shard} is corrupt (corrupted record at" in line, line
    assert f"the last checkpoint {latest} is intact" in line, line
    restored = load_checkpoint_dir(output)  # reads every tensor, checking its checksum
    assert restored.mlm_head is not None and restored.sop_head is not None


def test_corrupt_record_is_a_data_error_from_the_library(run_files):
    shard, config = run_files
    helpers.overwrite_mid_file(shard, at=0.8)
    settings = PretrainSettings(
        str(shard),
        str(config),
        str(shard.parent / "run"),
        train_steps=40,
        batch_size=4,
        save_every=2,
        steps_per_loop=2,
        dtype="float32",
        progress=False,
    )
    with pytest.raises(DataError, match="training shard .*a.tfrecord is corrupt"):
        pretrain(settings)


def test_corrupt_record_before_any_checkpoint_leaves_nothing(run_files, capfd):
    shard, config = run_files
    helpers.overwrite_mid_file(shard, at=0.1)
    output = shard.parent / "run"
    line = _pretrain_fails(capfd, shard, config, output, steps=40)
    assert f"{shard} is corrupt" in line and "no checkpoint was written" in line, line
    assert not output.exists()


def test_corrupt_checkpoint_on_resume_is_named_not_a_mismatch(run_files, capfd):
    shard, config = run_files
    output = shard.parent / "run"
    assert main(_argv(shard, config, output, steps=2)) == 0
    data_file = output / "ckpt-2.data-00000-of-00001"
    helpers.overwrite_mid_file(data_file)
    before = sorted(p.name for p in output.iterdir())
    line = _pretrain_fails(capfd, shard, config, output, steps=4)
    assert f"checkpoint file {data_file} is corrupt" in line, line
    assert "albert_config.json" not in line, line
    assert sorted(p.name for p in output.iterdir()) == before
