"""No false alarms: TensorFlow's CUDA and oneDNN start-up notices stay off stderr, real errors show."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from albert_tf.startup_noise import filter_chunk, is_noise, wanted
from tests.conftest import FIXTURES, REPO

CUINIT = (
    b"2026-11-25 10:45:05.336122: E external/local_xla/xla/stream_executor/cuda/"
    b"cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: "
    b"UNKNOWN ERROR (303)\n"
)
INT64 = (
    b"2026-11-25 10:50:16.810098: E tensorflow/core/util/util.cc:131] oneDNN supports DT_INT64 "
    b"only on platforms with AVX-512. Falling back to the default Eigen-based implementation if "
    b"present.\n"
)
ABSL_CUDNN = (
    b"E0000 00:00:1732000000.123456    1234 cuda_dnn.cc:8310] Unable to register cuDNN factory: "
    b"Attempting to register factory for plugin cuDNN when one has already been registered\n"
)
REAL_ERROR = (
    b"2026-11-25 10:50:17.000001: E tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES "
    b"failed at save_restore_v2_ops.cc:230 : DATA_LOSS: file is too short\n"
)
# TFLite's converter and interpreter, during `export --tflite` (absl's format and plain lines).
TFLITE_NOTICES = (
    b"W0000 00:00:1795652678.052906   19400 tf_tfl_flatbuffer_helpers.cc:364] Ignored "
    b"output_format.\n",
    b"W0000 00:00:1795652678.052948   19400 tf_tfl_flatbuffer_helpers.cc:367] Ignored "
    b"drop_control_dependency.\n",
    b"I0000 00:00:1795652678.074871   19400 mlir_graph_optimization_pass.cc:437] MLIR V1 "
    b"optimization pass is not enabled\n",
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n",
)
# XLA's notice on its first compiled kernel: the training step's compiled kernels.
XLA_NOTICE = (
    b"I0000 00:00:1795706051.036378   15840 device_compiler.h:196] Compiled cluster using XLA!  "
    b"This line is logged at most once for the lifetime of the process.\n"
)
# Apache Beam's import-time lines without apache-beam[gcp] (`--runner beam`), as Python's logging
# prints them before and after the root logger gets a handler.
BEAM_NOTICES = (
    b"Failed to import GCSFileSystem; loading of this filesystem will be skipped. Error details: "
    b"cannot import name 'storage' from 'google.cloud' (unknown location)\n",
    b"WARNING:apache_beam.io.filesystems:Failed to import GCSFileSystem; loading of this "
    b"filesystem will be skipped. Error details: No module named 'google.cloud.storage'\n",
    b"WARNING:root:apitools not found, and bigquery client libraries are not available despite "
    b"the import not raising an ImportError.\n",
)
# Any line naming a CUDA, cuInit or oneDNN-capability notice: none may reach the user.
NOTICE = ("cuInit", "CUDA error", "oneDNN supports", "cuda drivers")


@pytest.mark.parametrize(
    "line", [CUINIT, INT64, ABSL_CUDNN, XLA_NOTICE, *TFLITE_NOTICES, *BEAM_NOTICES]
)
def test_startup_notices_are_noise(line):
    assert is_noise(line)


@pytest.mark.parametrize(
    "line",
    [
        REAL_ERROR,
        b"Traceback (most recent call last):\n",
        b"albert-tf convert: error: failed call to cuInit is not a C++ log line here\n",
        b"pretrain: 100%|##########| 10/10 [00:01<00:00]\n",
        b"W0000 00:00:1795652678.052906   19400 tf_tfl_flatbuffer_helpers.cc:364] Ignored "
        b"output_format. And then it failed\n",
        b"WARNING: the export failed: INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n",
        b"E0000 00:00:1795706051.036378   15840 device_compiler.h:196] Compiled cluster using "
        b"XLA!  This line is logged at most once for the lifetime of the process. Then: OOM\n",
        b"ERROR:root:Failed to import GCSFileSystem; loading of this filesystem will be skipped. "
        b"Error details: x\n",
        b"WARNING:root:apitools not found, and bigquery client libraries are not available.\n",
    ],
)
def test_other_lines_are_not(line):
    assert not is_noise(line)


def test_filter_chunk_drops_noise_and_passes_progress_bars_at_once():
    out, held = filter_chunk(CUINIT + b"real line\n" + INT64 + b"\rpretrain:  50%|#####")
    assert (out, held) == (b"real line\n\rpretrain:  50%|#####", b"")
    out, held = filter_chunk(b"done\n2026-11-25 10:45:05.3")  # a log line still arriving
    assert (out, held) == (b"done\n", b"2026-11-25 10:45:05.3")
    assert filter_chunk(held + CUINIT[len(held) :]) == (b"", b"")


def test_verbose_or_a_user_level_turns_the_filter_off():
    assert wanted(False, {})
    assert not wanted(True, {})
    assert not wanted(False, {"TF_CPP_MIN_LOG_LEVEL": "0"})


def test_filter_in_a_process_and_its_children(tmp_path):
    """Under NoiseFilter, notices written to fd 2 (as TensorFlow's C++ writes them), by the
    process or a child it starts, are dropped; a real C++ error and Python's stderr show."""
    child = f"import os; os.write(2, {CUINIT!r}); os.write(2, b'child says hi\\n')"
    script = textwrap.dedent(
        f"""
        import os, subprocess, sys
        from albert_tf.startup_noise import NoiseFilter
        with NoiseFilter():
            os.write(2, {CUINIT + INT64!r})
            os.write(2, {REAL_ERROR!r})
            subprocess.run([sys.executable, "-c", {child!r}], check=True)
            os.write(2, {ABSL_CUDNN!r})
            print("python stderr", file=sys.stderr)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == REAL_ERROR + b"child says hi\npython stderr\n"


def _cli(*argv: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"} | env
    return subprocess.run(
        [sys.executable, "-m", "albert_tf.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ,
        cwd=REPO,
    )


@pytest.mark.slow
def test_commands_print_no_startup_notice_but_real_errors(tmp_path):
    """`convert` runs TensorFlow ops (on a CPU machine with CUDA libraries that is when cuInit
    fails); by default its stderr holds no notice, and a failing command still says why."""
    source = FIXTURES / "albert_tf1_tiny"
    args = ["convert", "--tf1-checkpoint", str(source / "model.ckpt")]
    args += ["--config", str(source / "albert_config.json")]
    done = _cli(*args, "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stderr.splitlines() if any(n in line for n in NOTICE)]

    (tmp_path / "file").write_text("x")
    failed = _cli(*args, "--output", str(tmp_path / "file" / "out"))
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines()[-1].startswith("albert-tf convert: error:")

    verbose = _cli(*args, "--output", str(tmp_path / "out2"), "--verbose")
    assert verbose.returncode == 0, verbose.stderr
    # --verbose shows TensorFlow's C++ log, its INFO lines included.
    assert "tensorflow/core" in verbose.stderr


def test_beam_runner_bad_input_prints_one_line(tmp_path):
    """`create-pretraining-data --runner beam` imports Beam before it reads its input: Beam's two
    import-time lines stay off stderr, so a missing corpus is one line; --verbose shows them."""
    args = ["create-pretraining-data", "--runner", "beam", "--input", str(tmp_path / "none.txt")]
    args += ["--sp-model", str(FIXTURES / "tokenizer" / "spm.model")]
    args += ["--output", str(tmp_path / "out")]
    done = _cli(*args)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"albert-tf create-pretraining-data: error: no input file matches '{tmp_path}/none.txt'"
    ]
    verbose = _cli(*args, "--verbose")
    assert verbose.returncode == 2
    *notices, last = verbose.stderr.splitlines()
    assert last == done.stderr.strip()
    assert all(is_noise(line.encode()) for line in notices)
    if importlib.util.find_spec("apitools") is None:  # without apache-beam[gcp], as in CI
        assert len(notices) == 2
