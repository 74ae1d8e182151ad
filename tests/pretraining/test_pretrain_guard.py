"""The divergence guard: spikes and non-finite losses or weights roll back, resume stays exact,
no checkpoint holds a NaN, and a run that keeps diverging stops with one line (exit 2); a run
that stalls at the commonest piece says so."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.cli import main as cli_main
from albert_tf.pretraining.guard import (
    GUARD_FILE,
    MIN_HISTORY,
    DivergenceError,
    DivergenceGuard,
    commonest_share,
    stalled,
)
from albert_tf.pretraining.loop import TrainLoop
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import pretrain
from tests import helpers

pytestmark = pytest.mark.slow

CONFIG = helpers.tiny_pretraining_config(vocab_size=1000)


# === The guard's calls ===


def test_a_falling_loss_never_trips_and_a_rise_past_the_factor_does():
    guard = DivergenceGuard(spike_factor=1.5, max_rollbacks=1, record=None)
    for loss in np.linspace(10.0, 4.0, 30):
        assert guard.check_losses([loss, loss]) is None
    assert guard.reference == pytest.approx(np.median(np.linspace(10.0, 4.0, 30)[-20:]))
    assert guard.check_losses([guard.reference * 1.49]) is None
    assert "loss spike" in guard.check_losses([guard.reference * 1.6])
    assert guard.check_losses([4.0, math.nan]) == "non-finite loss"
    assert guard.check_losses([math.inf]) == "non-finite loss"


def test_no_spike_is_called_before_the_reference_is_armed():
    guard = DivergenceGuard(spike_factor=1.5, max_rollbacks=1, record=None)
    for loss in [1.0] * (MIN_HISTORY - 1):
        assert guard.check_losses([loss]) is None
    assert guard.check_losses([100.0]) is None  # no reference yet: only non-finite counts
    assert guard.reference is not None


def test_rollbacks_halve_the_rate_record_the_skips_and_run_out(tmp_path):
    record = tmp_path / GUARD_FILE
    guard = DivergenceGuard(spike_factor=1.5, max_rollbacks=2, record=record)
    first = guard.roll_back(step=30, loss=9.0, restored_step=20, reason="loss spike")
    second = guard.roll_back(step=45, loss=math.nan, restored_step=40, reason="non-finite loss")
    assert (first.skipped_batches, first.lr_scale) == (10, 0.5)
    assert (second.skipped_batches, second.lr_scale) == (5, 0.25)
    assert guard.skipped_batches == 15 and guard.lr_scale == 0.25
    with pytest.raises(DivergenceError, match="diverged at step 50 .* step 40: lower"):
        guard.roll_back(step=50, loss=9.0, restored_step=40, reason="loss spike")
    # A resume from step 40 or later replays both; from 20 to 39 only the first happened.
    for resumed, expected in ((40, 2), (39, 1), (20, 1), (19, 0)):
        again = DivergenceGuard(spike_factor=1.5, max_rollbacks=2, record=record)
        again.load(resumed)
        assert len(again.rollbacks) == expected


def test_the_stall_baseline_is_the_commonest_masked_piece_by_weight():
    batches = [
        {"masked_lm_ids": np.array([[1, 1, 2]]), "masked_lm_weights": np.array([[1.0, 1, 1]])},
        {"masked_lm_ids": np.array([[3, 0, 0]]), "masked_lm_weights": np.array([[1.0, 0, 0]])},
    ]
    assert commonest_share(batches) == 0.5  # piece 1: 2 of the 4 weighted positions
    assert math.isnan(commonest_share([]))
    assert "stalled" in stalled(0.042, 0.041) and "0.0410" in stalled(0.05, 0.041)
    assert stalled(0.06, 0.041) is None and stalled(0.05, math.nan) is None


# === In a run ===


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard_data")
    helpers.write_pretraining_records(root / "a.tfrecord", 48, vocab_size=1000, seed=3)
    return str(root / "a.tfrecord")


# Steps of one loop each, a checkpoint every 2 steps, all of them kept; bit-exact float32 ops.
SETTINGS = {"train_steps": 8, "batch_size": 4, "save_every": 2, "keep": 10, "log_every": 1}
SETTINGS |= {"steps_per_loop": 1, "dtype": "float32", "deterministic": True, "progress": False}


def _settings(corpus, output, **kwargs):
    values = SETTINGS | kwargs
    return PretrainSettings(corpus, CONFIG, str(output), **values)


def _nan_at(monkeypatch, steps: set[int], weights: bool = False, once: bool = True):
    """Makes the loops ending at `steps` bad (each only the first time with `once`): a NaN
    loss row, or (`weights`) a NaN weight."""
    real_run = TrainLoop.run
    done = set()

    def run(self, iterator, n):
        rows = real_run(self, iterator, n)
        step = int(self.step.numpy())
        if step in steps and not (once and step in done):
            done.add(step)
            if weights:
                variable = self.model.trainable_variables[0]
                variable.assign(tf.fill(variable.shape, np.nan))
            else:
                rows[-1, 0] = np.nan
        return rows

    monkeypatch.setattr(TrainLoop, "run", run)


def _all_checkpoints_finite(output) -> list[int]:
    steps = []
    for index in sorted(output.glob("ckpt-*.index")):
        reader = tf.train.load_checkpoint(str(index.with_suffix("")))
        for name in reader.get_variable_to_shape_map():
            value = reader.get_tensor(name)
            if np.issubdtype(np.asarray(value).dtype, np.floating):
                assert np.all(np.isfinite(value)), (index.name, name)
        steps.append(int(index.name.split("-")[1].split(".")[0]))
    return steps


def test_a_nan_loss_rolls_back_skips_and_the_resume_is_exact(corpus, tmp_path, monkeypatch):
    _nan_at(monkeypatch, {5})
    output = tmp_path / "run"
    result = pretrain(_settings(corpus, output))
    assert result.step == 8
    assert [(r["detected_step"], r["restored_step"]) for r in result.rollbacks] == [(5, 4)]
    record = json.loads((output / GUARD_FILE).read_text())["rollbacks"]
    assert record[0]["skipped_batches"] == 1 and record[0]["lr_scale"] == 0.5
    assert _all_checkpoints_finite(output) == [2, 4, 6, 8]

    # Resumed from step 6 (after the rollback), the run reads the same batches at the same
    # rate: its last checkpoint equals the uninterrupted run's.
    resumed = tmp_path / "resumed"
    shutil.copytree(output, resumed)
    for path in resumed.glob("ckpt-8.*"):
        path.unlink()
    (resumed / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-6"\nall_model_checkpoint_paths: "ckpt-6"\n'
    )
    again = pretrain(_settings(corpus, resumed))
    assert again.step == 8 and again.rollbacks == []
    ours = tf.train.load_checkpoint(str(resumed / "ckpt-8"))
    theirs = tf.train.load_checkpoint(str(output / "ckpt-8"))
    for name in theirs.get_variable_to_shape_map():
        if name in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"):
            continue
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name), err_msg=name)


def test_a_nan_weight_is_never_saved(corpus, tmp_path, monkeypatch):
    _nan_at(monkeypatch, {4}, weights=True)
    output = tmp_path / "run"
    result = pretrain(_settings(corpus, output, train_steps=6))
    assert [(r["reason"], r["restored_step"]) for r in result.rollbacks] == [
        ("non-finite weights", 2)
    ]
    assert _all_checkpoints_finite(output) == [2, 4, 6]


def test_a_run_that_keeps_diverging_stops_with_one_line(corpus, tmp_path, monkeypatch, capsys):
    _nan_at(monkeypatch, {3}, once=False)
    output = tmp_path / "run"
    config = tmp_path / "albert_config.json"
    CONFIG.to_json_file(config)
    args = ["pretrain", "--data", corpus, "--config", str(config), "--output", str(output)]
    args += ["--train-steps", "8", "--batch-size", "4", "--save-every", "2", "--keep", "10"]
    args += ["--steps-per-loop", "1", "--dtype", "float32", "--max-rollbacks", "2", "--quiet"]
    assert cli_main(args) == 2
    line = helpers.one_error_line(capsys.readouterr().err, "pretrain")
    assert "diverged at step" in line and "after 2 rollbacks" in line
    assert _all_checkpoints_finite(output) == [2]


def test_a_run_that_learns_no_context_says_so(corpus, tmp_path, capsys):
    """Random pieces cannot be learned: after 8 steps the held-out MLM accuracy is at the
    commonest piece's share or below, and pretrain ends with the stall warning (exit 0)."""
    config = tmp_path / "config.json"
    CONFIG.to_json_file(config)
    output = tmp_path / "run"
    args = ["pretrain", "--data", corpus, "--eval", corpus, "--config", str(config)]
    args += ["--output", str(output), "--train-steps", "8", "--batch-size", "4", "--quiet"]
    assert cli_main(args) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning: held-out MLM")]
    assert len(warnings) == 1 and "stalled" in warnings[0], err[-2000:]
