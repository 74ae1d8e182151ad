"""experiments/finetune_defaults.py: one line per run, resumed, reported on dev."""

from __future__ import annotations

import json

import pytest

from experiments import finetune_defaults as sweep
from tests.helpers import write_config, write_pairs

pytestmark = pytest.mark.slow


def test_the_sweep_records_each_run_once_and_resumes(tmp_path, fixtures_dir, capsys):
    write_pairs(tmp_path / "train.tsv", 16, seed=0)
    write_pairs(tmp_path / "dev.tsv", 8, seed=1)
    argv = ["--name", "tiny", "--init", "random", "--config", str(write_config(tmp_path))]
    argv += ["--sp-model", str(fixtures_dir / "tokenizer" / "spm.model")]
    argv += ["--train", str(tmp_path / "train.tsv"), "--dev", str(tmp_path / "dev.tsv")]
    argv += ["--learning-rates", "1e-3", "--epochs", "1", "--seeds", "1,2", "--train-steps", "1"]
    argv += ["--max-seq-length", "16", "--results", str(tmp_path / "results")]
    assert sweep.main(argv) == 0
    lines = (tmp_path / "results" / "tiny.jsonl").read_text().splitlines()
    assert [json.loads(line)["seed"] for line in lines] == [1, 2]
    assert sweep.main(argv) == 0  # resumed: nothing left to run
    assert (tmp_path / "results" / "tiny.jsonl").read_text().splitlines() == lines
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("pick: learning rate 0.001, 1 epochs (majority class on dev: ")
