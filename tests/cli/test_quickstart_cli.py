"""`albert-tf quickstart` rejects bad input with one line and exit 2, before any heavy work."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from albert_tf.cli import main
from albert_tf.errors import OutputError
from albert_tf.quickstart import validate_arguments


def _run(capsys, *argv):
    code = main(["quickstart", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.mark.parametrize("minutes", ["0", "-1", "nan", "inf"])
def test_non_positive_minutes(capsys, tmp_path, minutes):
    code, err = _run(capsys, "--output", str(tmp_path / "qs"), "--minutes", minutes)
    assert code == 2
    assert len(err) == 1 and "--minutes must be a positive number" in err[0]
    assert not (tmp_path / "qs").exists()


def test_out_under_a_file(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    code, err = _run(capsys, "--output", str(tmp_path / "file" / "qs"))
    assert code == 2
    assert err == [
        f"albert-tf quickstart: error: cannot create {tmp_path}/file/qs: "
        f"{tmp_path}/file is not a directory"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to read-only directories")
def test_out_in_read_only_directory(capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, err = _run(capsys, "--output", str(locked / "qs"))
    assert code == 2 and len(err) == 1 and "is not writable" in err[0]


def test_existing_out_needs_overwrite(capsys, tmp_path):
    (tmp_path / "qs").mkdir()
    (tmp_path / "qs" / "keep.txt").write_text("mine")
    code, err = _run(capsys, "--output", str(tmp_path / "qs"))
    assert code == 2 and len(err) == 1 and "already exists" in err[0]
    assert (tmp_path / "qs" / "keep.txt").read_text() == "mine"


def test_out_under_a_file_is_refused(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    code, err = _run(capsys, "--output", str(tmp_path / "file" / "qs"))
    assert code == 2 and len(err) == 1 and "is not a directory" in err[0]


def test_previous_quickstart_output_is_replaceable(tmp_path):
    previous = tmp_path / "qs"
    (previous / "hub" / "encoder").mkdir(parents=True)
    (previous / "results.json").write_text("{}")
    assert validate_arguments(previous, 1, overwrite=False) == previous
    (tmp_path / "other").mkdir()
    with pytest.raises(OutputError, match="already exists"):
        validate_arguments(tmp_path / "other", 1, overwrite=False)


def test_bad_input_in_a_subprocess_fails_fast_without_tensorflow(tmp_path):
    code = (
        "import sys; from albert_tf.cli import main; rc = main(sys.argv[1:]); "
        "assert not any(m.startswith('tensorflow') for m in sys.modules); sys.exit(rc)"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "quickstart",
            "--output",
            str(tmp_path / "q"),
            "--minutes",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "albert-tf quickstart: error: --minutes must be a positive number, got 0"
    ]
    assert list(tmp_path.iterdir()) == []


def test_output_is_the_flag_and_out_its_alias(capsys, tmp_path):
    code, err = _run(capsys, "--output", str(tmp_path / "qs"), "--minutes", "0")
    assert code == 2 and len(err) == 1 and "--minutes" in err[0]
    code, err = _run(capsys, "--out", str(tmp_path / "qs"), "--minutes", "0")
    assert code == 2 and len(err) == 2 and "--minutes" in err[1]
    assert err[0] == "albert-tf quickstart: --out is deprecated, use --output"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit):
        main(["quickstart", "--help"])
    help_text = capsys.readouterr().out
    assert "--output DIR" in help_text and "--out " not in help_text


class _Stop(Exception):
    """Raised in place of the pipeline's heavy steps, once the dtype they get is seen."""


@pytest.mark.parametrize("flag", [None, "float32", "bfloat16"])
def test_dtype_reaches_pretraining(monkeypatch, tmp_path, flag):
    from albert_tf.dtypes import cpu_supports_bfloat16
    from albert_tf.quickstart import pipeline

    seen = []

    def build(work, target, minutes, dtype, steps):
        seen.append(dtype)
        raise _Stop

    monkeypatch.setattr(pipeline, "_build", build)
    argv = ["quickstart", "--output", str(tmp_path / "qs")] + (["--dtype", flag] if flag else [])
    with pytest.raises(_Stop):
        main(argv)
    auto = "bfloat16" if cpu_supports_bfloat16() else "float32"
    assert seen == [flag or auto]
    assert not (tmp_path / "qs").exists()


def test_unknown_dtype_is_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["quickstart", "--output", str(tmp_path / "qs"), "--dtype", "float16"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and "--dtype" in err[0]
    assert list(tmp_path.iterdir()) == []
