"""albert-tf turns TensorFlow's oneDNN kernels on for its own processes where the CPU has AVX2
(TensorFlow leaves them off on x86 CPUs without AVX-512 features), a user's TF_ENABLE_ONEDNN_OPTS
wins, and the original's outputs are reproduced within 1e-5 on both paths."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from albert_tf import environment
from albert_tf.benchmarking.runner import worker_environment
from albert_tf.environment import ONEDNN_VARIABLE, cpu_flags, cpuinfo_field, onednn_choice
from tests.conftest import REPO

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})


@pytest.mark.parametrize(
    ("environ", "flags", "expected"),
    [
        ({}, AVX2, "1"),
        ({}, AVX2 | {"avx512f", "avx512_vnni"}, "1"),
        ({}, frozenset({"sse4_2", "avx"}), None),  # no AVX2: TensorFlow decides
        ({}, frozenset(), None),  # not Linux x86
        ({ONEDNN_VARIABLE: ""}, AVX2, "1"),  # empty counts as unset
        ({ONEDNN_VARIABLE: "0"}, AVX2, "0"),  # the user forces the Eigen path
        ({ONEDNN_VARIABLE: "1"}, frozenset(), "1"),  # ... or oneDNN anywhere
    ],
)
def test_choice(environ, flags, expected):
    assert onednn_choice(environ, flags) == expected


def test_cpuinfo_fields(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu avx2 fma\n\n"
        "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n"
    )
    assert cpuinfo_field("model name", cpuinfo) == "Some CPU"
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "fma"}
    assert cpuinfo_field("flags", tmp_path / "missing") is None
    assert cpu_flags(tmp_path / "missing") == frozenset()


@pytest.fixture
def avx2_machine(monkeypatch):
    """A machine with AVX2 where the user set nothing, before `albert-tf` set its choice."""
    monkeypatch.setattr(environment, "cpu_flags", lambda cpuinfo="": AVX2)
    monkeypatch.delenv(ONEDNN_VARIABLE, raising=False)
    monkeypatch.setattr(environment, "_given", environment._UNSET)


def test_cli_choice_is_kept_from_child_processes_that_run_peers(avx2_machine):
    assert environment.use_onednn_choice() == "1"
    assert os.environ[ONEDNN_VARIABLE] == "1"  # this process, as `albert-tf` sets it
    assert ONEDNN_VARIABLE not in environment.given_environment()  # the user's, for peers
    for off_path in (False, True):
        assert worker_environment({"ours"}, off_path)[ONEDNN_VARIABLE] == "1"
    assert ONEDNN_VARIABLE not in worker_environment({"tfm", "tensorflow"}, False)
    assert worker_environment({"tfm", "tensorflow"}, True)[ONEDNN_VARIABLE] == "0"
    assert worker_environment({"kerashub"}, True)["KERAS_BACKEND"] == "tensorflow"


def test_user_value_reaches_every_system(avx2_machine, monkeypatch):
    monkeypatch.setenv(ONEDNN_VARIABLE, "0")
    assert environment.use_onednn_choice() == "0"
    assert environment.given_environment()[ONEDNN_VARIABLE] == "0"
    assert worker_environment({"ours"}, False)[ONEDNN_VARIABLE] == "0"
    assert worker_environment({"tfm"}, False)[ONEDNN_VARIABLE] == "0"


def _env(value: str | None) -> dict[str, str]:
    env = environment.given_environment()
    env.pop(ONEDNN_VARIABLE, None)
    if value is not None:
        env[ONEDNN_VARIABLE] = value
    return env


@pytest.mark.slow
@pytest.mark.parametrize("value", [None, "0", "1"])
def test_albert_tf_process_runs_with_its_choice(value):
    """What TensorFlow does in a process started by the `albert-tf` entry point."""
    code = (
        "from albert_tf import cli; cli.main(['params', '--config', 'tiny']); "
        "from tensorflow.python.util import _pywrap_util_port as port; "
        "print('oneDNN', port.IsMklEnabled())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_env(value), capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.strip().splitlines()[-1]
    if value is None and "avx2" not in cpu_flags():
        pytest.skip("no AVX2: TensorFlow's default applies")
    assert line == f"oneDNN {value != '0'}"


@pytest.mark.slow
@pytest.mark.parametrize("value", ["0", "1"])
def test_fixtures_agree_on_both_paths(value, fixtures_dir):
    """The tests that check the encoder against the original's outputs within 1e-5 (float32 and
    bfloat16), the fused oneDNN kernels and the plain reference, in a process on each path."""
    tests = [
        "tests/export/test_convert.py",
        "tests/model/test_plain_forward.py",
        "tests/model/test_fused.py",
    ]
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    argv += ["-k", "reproduces or plain or fused"]
    env = _env(value) | {"ALBERT_TF_FIXTURES": str(fixtures_dir)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= (20 if value == "1" else 12), summary
