"""Stopping cleanly: SIGTERM/SIGINT save the step reached, loops fit the preemption grace, a torn
newest checkpoint falls back to the one before, and a terminated `finetune` leaves no output.

The bit-exact resumes after SIGTERM (one device, mirrored, two workers) and the lost worker are
in test_pretrain_distributed.py: they need processes of their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tensorflow as tf

from albert_tf.checkpoint import check_checkpoint_files
from albert_tf.errors import CheckpointError
from albert_tf.pretraining import trainer
from albert_tf.pretraining.preemption import lost_worker
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import pretrain
from tests import helpers
from tests.conftest import REPO

CONFIG = helpers.tiny_pretraining_config(vocab_size=100)


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    root = tmp_path_factory.mktemp("preemption_data")
    helpers.write_pretraining_records(root / "a.tfrecord", 32, vocab_size=100, seed=3)
    return str(root / "a.tfrecord")


def _settings(shard, output, **overrides) -> PretrainSettings:
    values = dict(
        train_steps=6,
        batch_size=4,
        save_every=2,
        log_every=1,
        steps_per_loop=2,
        dtype="float32",
        progress=False,
    )
    return PretrainSettings(shard, CONFIG, str(output), **values | overrides)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_saves_the_step_reached_and_returns_preempted(
    shard, tmp_path, monkeypatch, signum
):
    """The signal arrives mid-run (here: when step 3's summary is written, inside a loop of 3
    steps that holds no checkpoint): the run ends that loop, saves step 3 and returns."""
    write_log = trainer._HostLoop.write_log

    def signal_at_step_3(self, step, *args):
        write_log(self, step, *args)
        if step == 3:
            os.kill(os.getpid(), signum)  # handled in this (main) thread, at once

    monkeypatch.setattr(trainer._HostLoop, "write_log", signal_at_step_3)
    before = signal.getsignal(signum)
    output = tmp_path / "run"
    result = pretrain(_settings(shard, output, train_steps=100, save_every=50, steps_per_loop=3))
    assert result.preempted == signum.name and result.step == 3 and not result.stopped_early
    assert tf.train.latest_checkpoint(str(output)).endswith("ckpt-3")
    assert [h["step"] for h in result.train_history] == [1, 2, 3]
    assert signal.getsignal(signum) == before  # the handlers are put back
    # The run log says why this process stopped and where.
    (segment,) = result.ran["segments"]
    assert (segment["to_step"], segment["steps_taken"], segment["ended"]) == (3, 3, signum.name)


@pytest.mark.slow
def test_loops_are_cut_to_fit_the_preemption_grace(shard, tmp_path):
    """After the first loop (the only one not timed yet), loops hold what fits in the grace:
    with 1 ms, one step each."""
    result = pretrain(
        _settings(shard, tmp_path / "run", train_steps=8, save_every=100, steps_per_loop=5)
    )
    assert len(result.loop_seconds) == 2  # 5 + 3: the grace (30 s) holds a whole loop
    tight = _settings(
        shard,
        tmp_path / "tight",
        train_steps=8,
        save_every=100,
        steps_per_loop=5,
        preemption_grace=1e-3,
    )
    result = pretrain(tight)
    assert len(result.loop_seconds) == 4 and result.step == 8  # 5, 1, 1, 1


def test_a_lost_peer_is_named_by_task_and_address(monkeypatch):
    """The error TensorFlow raised in a survivor when worker 1 was killed (two local workers)."""
    message = (
        "Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at (most recent "
        'call last):\n  File "loop.py", line 196, in _loop\n\nCollective ops is aborted by: '
        "recvmsg:Connection reset by peer\nAdditional GRPC error information from remote target "
        "/job:worker/replica:0/task:1 while calling /tensorflow.WorkerService/RecvBuf:\n"
        '{grpc_message:"recvmsg:Connection reset by peer", grpc_status:14}\n'
        "\t [[{{node CollectiveReduceV2}}]] [Op:__inference__loop_9124]"
    )
    cluster = {"worker": ["127.0.0.1:2001", "127.0.0.1:2002"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"index": 0}}))
    error = tf.errors.UnavailableError(None, None, message)
    assert str(lost_worker(error, 12, "run/ckpt-10")) == (
        "lost worker worker 1 (127.0.0.1:2002) at step 12 (recvmsg:Connection reset by peer); "
        "rerun every worker to resume from run/ckpt-10"
    )
    assert lost_worker(tf.errors.InvalidArgumentError(None, None, message), 12, None) is None
    heartbeat = (  # the coordination service's word when the connection did not reset
        "Graph execution error:\n\nCollective ops is aborted by: Error reported from "
        "/job:worker/task:1: The following tasks are unhealthy (stopped sending heartbeats):\n"
        "/job:worker/replica:0/task:1\nThe tasks have crashed."
    )
    lost = lost_worker(tf.errors.UnavailableError(None, None, heartbeat), 3, None)
    assert str(lost) == (
        "lost worker worker 1 (127.0.0.1:2002) at step 3 (The following tasks are unhealthy "
        "(stopped sending heartbeats)); no checkpoint was written: rerun every worker to start "
        "again"
    )


def _checkpoints(output: Path) -> list[str]:
    state = tf.train.get_checkpoint_state(str(output))
    return [Path(p).name for p in state.all_model_checkpoint_paths]


@pytest.mark.slow
def test_a_torn_newest_checkpoint_falls_back_to_the_one_before(shard, tmp_path, capfd):
    output = tmp_path / "run"
    pretrain(_settings(shard, output, train_steps=4))
    assert _checkpoints(output) == ["ckpt-2", "ckpt-4"]
    torn = output / "ckpt-4.data-00000-of-00001"
    helpers.truncate(torn)  # a save cut short by the kill after a preemption's grace
    capfd.readouterr()
    result = pretrain(_settings(shard, output, train_steps=6))
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: checkpoint {output / 'ckpt-4'} does not restore ("), lines
    assert f"checkpoint file {torn} is corrupt or unreadable" in lines[0], lines
    assert lines[0].endswith(f"; resuming from {output / 'ckpt-2'}"), lines
    assert [h["step"] for h in result.train_history] == [3, 4, 5, 6]  # resumed at step 2
    assert _checkpoints(output) == ["ckpt-2", "ckpt-4", "ckpt-6"]
    check_checkpoint_files(str(output / "ckpt-4"))  # written again, whole


@pytest.mark.slow
def test_no_checkpoint_that_restores_is_an_error(shard, tmp_path):
    output = tmp_path / "run"
    pretrain(_settings(shard, output, train_steps=4))
    for step in (2, 4):
        helpers.truncate(output / f"ckpt-{step}.data-00000-of-00001")
    with pytest.raises(CheckpointError, match="ckpt-4.data-00000-of-00001 is corrupt"):
        pretrain(_settings(shard, output, train_steps=6))


@pytest.mark.slow
def test_finetune_terminated_leaves_no_output(tmp_path, fixtures_dir):
    """SIGTERM mid-training: exit 143 with one line; no --output, no temporary directory, and
    with --overwrite the previous output untouched."""
    helpers.write_pairs(tmp_path / "train.tsv", 48, seed=0)
    output = tmp_path / "model"
    output.mkdir()
    (output / "previous.txt").write_text("the last good run")
    args = [sys.executable, "-m", "albert_tf.cli", "finetune", "--task", "classify"]
    args += ["--train", str(tmp_path / "train.tsv"), "--output", str(output), "--overwrite"]
    args += ["--init", "random", "--config", str(helpers.write_config(tmp_path))]
    args += ["--sp-model", str(fixtures_dir / "tokenizer" / "spm.model"), "--epochs", "1000"]
    args += ["--batch-size", "8", "--dtype", "float32", "--max-seq-length", "32"]
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 180
        # The temporary output's logs/ exists once training runs.
        while not list(tmp_path.glob(".model.tmp-*/logs/*")) and process.poll() is None:
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.05)
        time.sleep(0.5)  # a few steps in
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143, err[-2000:]
    assert err.splitlines()[-1] == "albert-tf finetune: terminated" and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "albert_config.json",
        "model",
        "train.tsv",
    ]
    assert [p.name for p in output.iterdir()] == ["previous.txt"]
