"""Distributed pretraining equals one device; a SIGKILLed run resumes to the same weights.

Each run happens in a subprocess: logical CPU devices and MultiWorkerMirroredStrategy must be
set up before TensorFlow initializes, and a kill must hit a real process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests.test_pretrain_data import write_pretraining_records

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CONFIG = helpers.tiny_pretraining_config(vocab_size=60).to_dict()
STEPS = 20
TRAINING = dict(
    train_steps=STEPS,
    batch_size=8,
    warmup_steps=4,
    learning_rate=0.01,
    save_every=5,
    keep=2,
    log_every=1,
    seed=5,
    dtype="float32",
    deterministic=True,
    progress=False,
)
# Runs `pretrain` once per requested strategy; writes the per-step losses as JSON.
DRIVER = """
import json, sys
import tensorflow as tf
spec = json.loads(sys.argv[1])
if spec.pop("logical_cpus", 0):
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import pretrain
losses = {}
for strategy, output in spec.pop("runs"):
    result = pretrain(PretrainSettings(strategy=strategy, output=output, **spec["settings"]))
    losses[strategy] = [[h["mlm_loss"], h["sop_loss"]] for h in result.train_history]
with open(spec["report"], "w") as f:
    json.dump(losses, f)
"""
TIMEOUT = 240


def _env(**extra) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO), **extra)
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _weights(output: Path, step: int = STEPS) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(output / f"ckpt-{step}"))
    return {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if name.split("/")[0] in ("encoder", "mlm", "sop", "optimizer", "step")
    }


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    write_pretraining_records(root / "a.tfrecord", 48, vocab_size=60, seed=11)
    config = root / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    settings = dict(TRAINING, data=str(root / "a.tfrecord"), config=str(config))
    return root, settings


@pytest.fixture(scope="module")
def single_and_mirrored(setup):
    """One process with 2 logical CPUs: the default strategy, then MirroredStrategy."""
    root, settings = setup
    report = root / "mirrored.json"
    runs = [["default", str(root / "default")], ["mirrored", str(root / "mirrored")]]
    spec = dict(logical_cpus=2, runs=runs, settings=settings, report=str(report))
    subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(spec)],
        env=_env(),
        check=True,
        timeout=TIMEOUT,
        capture_output=True,
    )
    return json.loads(report.read_text()), root / "default", root / "mirrored"


def _assert_same_training(losses, reference_losses, weights, reference_weights):
    assert len(losses) == len(reference_losses) == STEPS
    np.testing.assert_allclose(losses, reference_losses, atol=1e-5)
    assert weights.keys() == reference_weights.keys()
    for name, value in reference_weights.items():
        np.testing.assert_allclose(weights[name], value, atol=1e-5, err_msg=name)


def test_mirrored_over_two_devices_equals_one_device(single_and_mirrored):
    losses, default_dir, mirrored_dir = single_and_mirrored
    # The weights really move (equal runs are not equal no-ops): far more than the tolerance.
    before, after = _weights(default_dir, STEPS - 5), _weights(default_dir)
    model = [k for k in after if k.split("/")[0] in ("encoder", "mlm", "sop")]
    assert max(np.abs(after[k] - before[k]).max() for k in model) > 1e-2
    _assert_same_training(
        losses["mirrored"], losses["default"], _weights(mirrored_dir), _weights(default_dir)
    )


def test_multi_worker_with_two_processes_equals_one_device(setup, single_and_mirrored):
    root, settings = setup
    reference, default_dir, _ = single_and_mirrored
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    output = root / "multi_worker"
    processes = []
    try:
        for index in range(2):
            tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
            report = root / f"worker{index}.json"
            spec = dict(runs=[["multi_worker", str(output)]], settings=settings, report=str(report))
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", DRIVER, json.dumps(spec)],
                    env=_env(TF_CONFIG=json.dumps(tf_config)),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        deadline = time.monotonic() + TIMEOUT
        for process in processes:
            _, err = process.communicate(timeout=max(deadline - time.monotonic(), 1))
            assert process.returncode == 0, err[-2000:]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    chief = json.loads((root / "worker0.json").read_text())["multi_worker"]
    other = json.loads((root / "worker1.json").read_text())["multi_worker"]
    np.testing.assert_allclose(other, chief, atol=0)  # every worker reports the global losses
    _assert_same_training(chief, reference["default"], _weights(output), _weights(default_dir))
    # Only the chief writes the run directory; the other worker's scratch copies are gone.
    assert sorted(p.name for p in output.glob("ckpt-*.index")) == ["ckpt-15.index", "ckpt-20.index"]


def _cli(settings: dict, output: Path) -> list[str]:
    args = [sys.executable, "-m", "albert_tf.cli", "pretrain", "--output", str(output), "--quiet"]
    for key in ("data", "config", "train_steps", "batch_size", "warmup_steps", "learning_rate"):
        args += [f"--{key.replace('_', '-')}", str(settings[key])]
    for key in ("save_every", "keep", "log_every", "seed", "dtype"):
        args += [f"--{key.replace('_', '-')}", str(settings[key])]
    return [*args, "--deterministic"]


def test_run_killed_mid_way_resumes_to_exactly_the_same_weights(setup, single_and_mirrored):
    root, settings = setup
    _, default_dir, _ = single_and_mirrored
    output = root / "killed"
    process = subprocess.Popen(
        _cli(settings, output), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while tf.train.latest_checkpoint(str(output)) is None and process.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL
    killed_at = int(tf.train.latest_checkpoint(str(output)).rsplit("-", 1)[1])
    assert 5 <= killed_at < STEPS
    subprocess.run(_cli(settings, output), env=_env(), check=True, timeout=TIMEOUT)
    resumed, reference = _weights(output), _weights(default_dir)
    assert resumed.keys() == reference.keys()
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)
