"""Progress bars only on a terminal (albert_tf.progress); in a pipe or a log file no carriage
returns, and pretrain says the same in a line per summary step."""

from __future__ import annotations

import io
import re
import subprocess
import sys

from albert_tf import progress
from tests import helpers
from tests.conftest import REPO


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_on_a_terminal_only(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    terminal, pipe = _Terminal(), io.StringIO()
    assert progress.interactive(terminal) and not progress.interactive(pipe)
    with progress.bar(range(3), file=terminal, mininterval=0) as bar:
        assert not bar.disable and list(bar) == [0, 1, 2]
    assert "\r" in terminal.getvalue() and "3/3" in terminal.getvalue()
    with progress.bar(total=3, file=pipe) as bar:
        bar.update(2)
        bar.set_postfix(loss="0.5")
        assert bar.disable
    assert pipe.getvalue() == ""
    assert progress.bar(total=1, file=terminal, enabled=False).disable  # --quiet, a library call
    monkeypatch.setenv("TQDM_DISABLE", "1")  # what `--quiet` sets for the whole process
    assert not progress.interactive(terminal)


def test_every_bar_goes_through_the_helper():
    sources = [p for d in ("albert_tf", "export", "preprocess") for p in (REPO / d).rglob("*.py")]
    calls = [
        f"{p.relative_to(REPO)}:{n}"
        for p in sources
        if p.name != "progress.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\btqdm\(", line)
    ]
    assert not calls, calls


def test_pretrain_into_a_pipe_prints_lines_not_bars(tmp_path):
    config = tmp_path / "albert_config.json"
    helpers.tiny_pretraining_config(vocab_size=50).to_json_file(config)
    helpers.write_pretraining_records(tmp_path / "train.tfrecord", 16, vocab_size=50, seed=1)
    argv = ["pretrain", "--data", str(tmp_path / "train.tfrecord"), "--config", str(config)]
    argv += ["--output", str(tmp_path / "run"), "--train-steps", "4", "--batch-size", "4"]
    argv += ["--log-every", "2", "--steps-per-loop", "2", "--dtype", "float32"]
    done = subprocess.run(
        [sys.executable, "-m", "albert_tf.cli", *argv], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "\r" not in output
    steps = [line for line in done.stdout.splitlines() if line.startswith("step ")]
    assert [line.split(":")[0] for line in steps] == ["step 2/4", "step 4/4"]
    assert all(" examples/s" in line for line in steps)
