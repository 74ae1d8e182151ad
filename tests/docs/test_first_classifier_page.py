"""docs/guides/first-classifier.md runs as written.

Every block of the page that names `test_the_page_runs_as_written` runs here in page order, its
code unchanged, in a fresh folder where `examples/` is the repository's: shell blocks in bash,
Python blocks each in a process of its own (as a user pastes them into a file), each `text`
block checked against the output of the command before it (numbers aside). No step is capped:
the fine-tuning runs its 3 epochs (about 1.5 minutes on 2 cores), the exports and the snippets
about another minute. Then the figures are checked: the run beats its majority-class floor, and
every format gives the labels and probabilities of the `serving/` SavedModel.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO
from tests.docs.test_docs import _blocks

PAGE = REPO / "docs" / "guides" / "first-classifier.md"
TEST = "tests/docs/test_first_classifier_page.py::test_the_page_runs_as_written"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
SUMMARY = re.compile(
    r"best epoch: \d+ of \d+, accuracy (?P<accuracy>[\d.]+); "
    r"majority class '\w+' (?P<floor>[\d.]+) \(± (?P<se>[\d.]+)\)"
)
PREDICTION = re.compile(r"^(?P<label>\w+) \[(?P<probabilities>[^\]]+)\]$")


def _page_blocks() -> list:
    """The page's blocks this test runs, in order."""
    return [b for b in _blocks(PAGE) if b.marker["tests"] and TEST in b.marker["tests"]]


def _shape(line: str) -> str:
    """A line with its numbers and spacing left out: what a run's output shares with the page."""
    line = re.sub(r"\s+", " ", line.strip()).replace("[ ", "[").replace(" ]", "]")
    # The dtype `--dtype auto` trains in is the CPU's (bfloat16 with AVX512_BF16).
    line = NUMBER.sub("N", re.sub(r"\bb?float\d+\b", "DTYPE", line))
    # A run under a minute says "58 s"; a snippet's label of a sentence may differ on another
    # CPU (the formats' agreement is checked below).
    return PREDICTION.sub(r"LABEL [\g<probabilities>]", line.replace("N min N s", "N s"))


def _run(block, folder: Path, env: dict) -> str:
    if block.language == "bash":
        command = ["bash", "-e", "-c", block.code]
    else:
        script = folder / f"block_{block.line}.py"
        script.write_text(block.code)
        command = [sys.executable, script.name]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{block} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout + "\n" + done.stderr


def _predictions(output: str) -> tuple[list[str], np.ndarray]:
    """The labels and [N, labels] probabilities a snippet printed, one line per text."""
    rows = [m for m in map(PREDICTION.match, output.splitlines()) if m]
    assert len(rows) == 3, output[-2000:]
    probabilities = [[float(p) for p in m["probabilities"].split()] for m in rows]
    return [m["label"] for m in rows], np.asarray(probabilities)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_block_of_the_page_runs_here_or_installs():
    ours = {b.line for b in _page_blocks()}
    assert [b.language for b in _page_blocks()].count("python") == 5
    others = [b for b in _blocks(PAGE) if b.line not in ours]
    assert [b.code for b in others] == ['pip install -e ".[onnx,hf,keras-hub]"\n']
    assert others[0].marker["reason"]


@pytest.mark.slow
def test_the_page_runs_as_written(tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        # `albert-tf` is the console script beside this interpreter (a venv need not be active).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "HF_HUB_OFFLINE": "1",  # the hf/ folder is local: nothing may be fetched
    }
    outputs, previous = {}, ""
    for block in _page_blocks():
        if block.language == "text":
            produced = {_shape(line) for line in previous.replace("\r", "\n").splitlines()}
            missing = [line for line in block.code.splitlines() if _shape(line) not in produced]
            assert not missing, f"{block}: the run printed no line like {missing}"
            continue
        previous = outputs[block.line] = _run(block, tmp_path, env)
    runs = tmp_path / "runs"

    # The run beats its floor by more than the floor's standard error.
    summary = SUMMARY.search(next(o for o in outputs.values() if SUMMARY.search(o)))
    assert float(summary["accuracy"]) > float(summary["floor"]) + float(summary["se"])

    # predict scores test.tsv above always answering its commonest label (0.560).
    predicted = _jsonl(runs / "predictions.jsonl")
    gold = [
        line.split("\t")[1]
        for line in (REPO / "examples/sentiment/test.tsv").read_text().splitlines()[1:]
    ]
    assert len(predicted) == len(gold) == 361
    accuracy = np.mean([p["label"] == g for p, g in zip(predicted, gold, strict=True)])
    assert accuracy > max(gold.count(label) for label in set(gold)) / len(gold) + 0.05

    # Every format gives serving/'s labels and probabilities: the float32 exports within 1e-3
    # of each other, and of serving/ within 1e-3 too, or within bfloat16's rounding (2e-2)
    # where dtype auto trained in bfloat16 (a CPU with AVX512_BF16): serving/ then computes in
    # bfloat16 and every export in float32.
    snippets = [_predictions(outputs[b.line]) for b in _page_blocks() if b.language == "python"]
    (labels, reference), *exports = snippets
    trained_in = json.loads((runs / "sentiment" / "finetune.json").read_text())["dtype"]
    tolerance = 2e-2 if trained_in == "bfloat16" else 1e-3
    for other_labels, probabilities in exports:
        assert other_labels == labels
        np.testing.assert_allclose(probabilities, reference, atol=tolerance)
        np.testing.assert_allclose(probabilities, exports[0][1], atol=1e-3)
    np.testing.assert_allclose(reference.sum(axis=1), 1, atol=2e-4)
    # The TFLite export checked its own files against serving/ (labels equal on the probes).
    report = json.loads((runs / "sentiment" / "tflite" / "report.json").read_text())
    for name, agreement in report["against_serving"].items():
        assert agreement["label_agreement"] == 1.0, name
        # int8 weights move the probabilities by up to about 1e-2 (the ONNX int8 file's too).
        limit = tolerance if "float32" in name else 5e-2
        assert agreement["probabilities_max_abs_diff"] < limit, name


def test_the_output_check_ignores_numbers_and_spacing_only():
    assert _shape("time: 1 min 30 s in bfloat16; TensorBoard logs: runs/sentiment/logs") == _shape(
        "time: 58 s in float32; TensorBoard logs: runs/sentiment/logs"
    )
    assert _shape("positive [0.0385 0.9615]") == _shape("positive [ 5.000e-04  0.95   ]")
    assert _shape("positive [0.0385 0.9615]") != _shape("positive 0.0385 0.9615")
    assert _shape("best epoch: 3 of 3, accuracy 0.7452") != _shape("best epoch 3 of 3: 0.7452")
