"""Distributed pretraining equals one device; accumulation equals one batch; host loops of any
length, SIGKILLed runs and SIGTERMed (preempted) runs (dropout 0.1) end with bit-identical
weights; a multi-worker run that loses a worker stops with one line.

Each run happens in a subprocess: logical CPU devices and MultiWorkerMirroredStrategy must be
set up before TensorFlow initializes, and a kill must hit a real process.
"""

from __future__ import annotations

import json
import os
import re
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
from tests.conftest import REPO

pytestmark = pytest.mark.slow

CONFIG = helpers.tiny_pretraining_config(vocab_size=60).to_dict()
DROPOUT = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
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
for name, strategy, output, overrides in spec.pop("runs"):
    settings = PretrainSettings(strategy=strategy, output=output, **spec["settings"] | overrides)
    result = pretrain(settings)
    if result.preempted:
        sys.exit(75)
    losses[name] = [[h["mlm_loss"], h["sop_loss"]] for h in result.train_history]
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
    helpers.write_pretraining_records(root / "a.tfrecord", 48, vocab_size=60, seed=11)
    config = root / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    (root / "dropout_config.json").write_text(json.dumps(CONFIG | DROPOUT))
    settings = dict(TRAINING, data=str(root / "a.tfrecord"), config=str(config))
    return root, settings


def _drive(spec: dict, **popen):
    """Starts the driver on `spec` (see DRIVER)."""
    return subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(spec)], **popen)


@pytest.fixture(scope="module")
def single_and_mirrored(setup):
    """One process with 2 logical CPUs: the default strategy and MirroredStrategy, each plain,
    with gradient accumulation, and (default) with other steps per loop; then the same with
    dropout 0.1 for the resume tests."""
    root, settings = setup
    dropout = str(root / "dropout_config.json")
    runs = [
        ["default", "default", str(root / "default"), {}],
        ["mirrored", "mirrored", str(root / "mirrored"), {}],
        ["loop1", "default", str(root / "loop1"), {"steps_per_loop": 1}],
        ["loop3", "default", str(root / "loop3"), {"steps_per_loop": 3}],
        ["dropout_default", "default", str(root / "dropout_default"), {"config": dropout}],
        ["dropout_mirrored", "mirrored", str(root / "dropout_mirrored"), {"config": dropout}],
        # Last: accumulating turns Grappler's arithmetic optimizer off for the process (loop.py),
        # and the bitwise comparisons above are with fresh processes that keep it on.
        ["default_accum4", "default", str(root / "default_accum4"), {"grad_accum_steps": 4}],
        ["mirrored_accum2", "mirrored", str(root / "mirrored_accum2"), {"grad_accum_steps": 2}],
    ]
    report = root / "mirrored.json"
    spec = dict(logical_cpus=2, runs=runs, settings=settings, report=str(report))
    process = _drive(spec, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = process.communicate(timeout=TIMEOUT * 2)
    assert process.returncode == 0, err[-3000:]
    return json.loads(report.read_text()), root


def _assert_same_training(losses, reference_losses, weights, reference_weights):
    assert len(losses) == len(reference_losses) == STEPS
    np.testing.assert_allclose(losses, reference_losses, atol=1e-5)
    assert weights.keys() == reference_weights.keys()
    for name, value in reference_weights.items():
        np.testing.assert_allclose(weights[name], value, atol=1e-5, err_msg=name)


def test_mirrored_over_two_devices_equals_one_device(single_and_mirrored):
    losses, root = single_and_mirrored
    default_dir = root / "default"
    # The weights really move (equal runs are not equal no-ops): far more than the tolerance.
    before, after = _weights(default_dir, STEPS - 5), _weights(default_dir)
    model = [k for k in after if k.split("/")[0] in ("encoder", "mlm", "sop")]
    assert max(np.abs(after[k] - before[k]).max() for k in model) > 1e-2
    _assert_same_training(
        losses["mirrored"], losses["default"], _weights(root / "mirrored"), _weights(default_dir)
    )


@pytest.mark.parametrize("run", ["default_accum4", "mirrored_accum2"])
def test_accumulated_micro_batches_equal_one_batch(single_and_mirrored, run):
    """K micro-batches of B/K per update: the same training as batches of B (float32,
    dropout 0), one device and mirrored."""
    losses, root = single_and_mirrored
    _assert_same_training(
        losses[run], losses["default"], _weights(root / run), _weights(root / "default")
    )


def test_steps_per_loop_do_not_change_a_bit(single_and_mirrored):
    """Loops of 1, 3 and the CPU default (10, cut to 5 by the checkpoints): identical runs."""
    losses, root = single_and_mirrored
    reference = _weights(root / "default")
    for run in ("loop1", "loop3"):
        assert losses[run] == losses["default"]
        weights = _weights(root / run)
        assert weights.keys() == reference.keys()
        for name, value in reference.items():
            np.testing.assert_array_equal(weights[name], value, err_msg=f"{run}: {name}")


def test_multi_worker_with_two_processes_equals_one_device(setup, single_and_mirrored):
    root, settings = setup
    reference, _ = single_and_mirrored
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    output = root / "multi_worker"
    processes = []
    try:
        for index in range(2):
            tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
            report = root / f"worker{index}.json"
            runs = [["multi_worker", "multi_worker", str(output), {}]]
            spec = dict(runs=runs, settings=settings, report=str(report))
            env = _env(TF_CONFIG=json.dumps(tf_config))
            processes.append(
                _drive(spec, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
    _assert_same_training(chief, reference["default"], _weights(output), _weights(root / "default"))
    # Only the chief writes the run directory; the other worker's scratch copies are gone.
    assert sorted(p.name for p in output.glob("ckpt-*.index")) == ["ckpt-15.index", "ckpt-20.index"]


def _cli(settings: dict, output: Path) -> list[str]:
    args = [sys.executable, "-m", "albert_tf.cli", "pretrain", "--output", str(output), "--quiet"]
    for key in ("data", "config", "train_steps", "batch_size", "warmup_steps", "learning_rate"):
        args += [f"--{key.replace('_', '-')}", str(settings[key])]
    for key in ("save_every", "keep", "log_every", "seed", "dtype"):
        args += [f"--{key.replace('_', '-')}", str(settings[key])]
    return [*args, "--deterministic"]


def _checkpoint_step(output: Path) -> int:
    latest = tf.train.latest_checkpoint(str(output))
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def _signal_after_checkpoint(
    process: subprocess.Popen, output: Path, signum: int, after: int = 0
) -> None:
    """Sends `signum` to `process` once `output` holds a checkpoint past step `after`."""
    try:
        deadline = time.monotonic() + TIMEOUT
        while _checkpoint_step(output) <= after and process.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.01)
        assert process.poll() is None, "the run ended before the signal"
        process.send_signal(signum)
    except BaseException:
        process.kill()
        process.wait()
        raise


def _kill_after_first_checkpoint(process: subprocess.Popen, output: Path) -> None:
    _signal_after_checkpoint(process, output, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    assert 5 <= _checkpoint_step(output) < STEPS


def _assert_bitwise_equal(output: Path, reference_dir: Path) -> None:
    resumed, reference = _weights(output), _weights(reference_dir)
    assert resumed.keys() == reference.keys()
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)


def test_run_killed_mid_way_resumes_to_exactly_the_same_weights(setup, single_and_mirrored):
    """kill -9 of `albert-tf pretrain` with dropout 0.1, then the same command again."""
    root, settings = setup
    settings = dict(settings, config=str(root / "dropout_config.json"))
    output = root / "killed"
    quiet = dict(env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_after_first_checkpoint(subprocess.Popen(_cli(settings, output), **quiet), output)
    subprocess.run(_cli(settings, output), check=True, timeout=TIMEOUT, **quiet)
    _assert_bitwise_equal(output, root / "dropout_default")
    # Dropout really was on: the same run without it ends elsewhere.
    no_dropout = _weights(root / "default")
    assert any(not np.array_equal(v, no_dropout[k]) for k, v in _weights(output).items())


@pytest.mark.parametrize(
    "signum, exit_code",
    [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, 75)],
    ids=["kill-9", "sigterm"],
)
def test_mirrored_run_stopped_mid_way_resumes_to_exactly_the_same_weights(
    setup, single_and_mirrored, signum, exit_code
):
    """kill -9, or SIGTERM (a checkpoint of the step reached, exit 75), of a run mirrored over
    two logical CPUs with dropout 0.1; the same run again ends bit-identical."""
    root, settings = setup
    output = root / f"stopped_mirrored_{signum.name}"
    runs = [["stopped", "mirrored", str(output), {"config": str(root / "dropout_config.json")}]]
    spec = dict(logical_cpus=2, runs=runs, settings=settings, report=str(root / "stopped.json"))
    quiet = dict(env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process = _drive(spec, **quiet)
    _signal_after_checkpoint(process, output, signum)
    assert process.wait(timeout=TIMEOUT) == exit_code
    assert 5 <= _checkpoint_step(output) < STEPS
    assert _drive(spec, **quiet).wait(timeout=TIMEOUT) == 0
    _assert_bitwise_equal(output, root / "dropout_mirrored")


# === Preemption: SIGTERM saves the step reached, exits 75; the same command resumes ===


def _preempted_line(stderr: str) -> int:
    """The step named by the one line `pretrain` writes when preempted."""
    lines = [line for line in stderr.splitlines() if line.startswith("albert-tf pretrain:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    match = re.fullmatch(
        r"albert-tf pretrain: preempted by (SIGTERM|another worker's signal) at step (\d+): "
        r"checkpoint saved in \S+; run the same command to resume \(exit code 75\)",
        lines[0],
    )
    assert match, lines[0]
    return int(match.group(2))


def test_sigterm_mid_run_saves_and_resumes_to_exactly_the_same_weights(setup, single_and_mirrored):
    """SIGTERM to `albert-tf pretrain` (dropout 0.1, loops of 1 step): a checkpoint of the step
    reached, exit code 75, one line; the same command again ends bit-identical."""
    root, settings = setup
    settings = dict(settings, config=str(root / "dropout_config.json"))
    output, log = root / "sigterm", root / "sigterm.err"
    with log.open("w") as err:
        process = subprocess.Popen(
            [*_cli(settings, output), "--steps-per-loop", "1"],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _signal_after_checkpoint(process, output, signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 75
    step = _preempted_line(log.read_text())
    assert 5 <= step < STEPS and _checkpoint_step(output) == step
    quiet = dict(env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(_cli(settings, output), check=True, timeout=TIMEOUT, **quiet)
    _assert_bitwise_equal(output, root / "dropout_default")


def _start_workers(settings: dict, output: Path, name: str) -> tuple[list, list[Path]]:
    """Two `albert-tf pretrain --strategy multi_worker` processes on free localhost ports;
    their stderr goes to root/NAME-wI.err."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    processes, logs = [], []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        logs.append(output.parent / f"{name}-w{index}.err")
        with logs[-1].open("w") as err:
            processes.append(
                subprocess.Popen(
                    [*_cli(settings, output), "--strategy", "multi_worker"],
                    env=_env(TF_CONFIG=json.dumps(tf_config)),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
    return processes, logs


def _wait_all(processes: list, timeout: float = TIMEOUT) -> list[int]:
    deadline = time.monotonic() + timeout
    try:
        return [p.wait(timeout=max(deadline - time.monotonic(), 1)) for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_two_workers_preempted_then_a_lost_worker_then_resumed_bitwise(setup, single_and_mirrored):
    """Two local worker processes (dropout 0.1): SIGTERM to worker 1 stops both at the same step
    (exit 75); rerun, kill -9 of worker 1 makes worker 0 fail at once with one line naming it
    (exit 69); rerun to the end: the same weights, bit for bit, as MirroredStrategy over two
    logical CPUs without interruption (two replicas summed in the same order)."""
    root, settings = setup
    settings = dict(settings, config=str(root / "dropout_config.json"))
    output = root / "preempted_workers"

    processes, logs = _start_workers(settings, output, "sigterm")
    _signal_after_checkpoint(processes[1], output, signal.SIGTERM)
    assert _wait_all(processes) == [75, 75], [log.read_text()[-2000:] for log in logs]
    steps = [_preempted_line(log.read_text()) for log in logs]
    assert steps[0] == steps[1] == _checkpoint_step(output) and 5 <= steps[0] < STEPS
    assert "by another worker's signal" in logs[0].read_text()  # worker 0 got no signal

    processes, logs = _start_workers(settings, output, "lost")
    _signal_after_checkpoint(processes[1], output, signal.SIGKILL, after=steps[0])
    killed = time.monotonic()
    assert _wait_all(processes, timeout=60) == [69, -signal.SIGKILL]
    assert time.monotonic() - killed < 60
    stderr = logs[0].read_text()
    lines = [line for line in stderr.splitlines() if line.startswith("albert-tf pretrain:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert "Graph execution error" not in lines[0], lines[0]  # the cause, not TF's preamble
    assert re.match(
        r"albert-tf pretrain: error: lost worker worker 1 \(127\.0\.0\.1:\d+\) at step \d+ "
        r"\(.+\); rerun every worker to resume from \S+ckpt-\d+$",
        lines[0],
    ), lines[0]

    processes, logs = _start_workers(settings, output, "resumed")
    assert _wait_all(processes) == [0, 0], [log.read_text()[-2000:] for log in logs]
    _assert_bitwise_equal(output, root / "dropout_mirrored")
