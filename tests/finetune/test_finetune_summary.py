"""A fine-tuning run against its floor: size-dependent defaults, the closing summary, the
warning when the floor is not beaten, rare labels, and --seeds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from albert_tf import cli
from albert_tf.finetune import summary
from albert_tf.finetune.defaults import SIZE_DEFAULTS, size_defaults
from albert_tf.finetune.settings import FinetuneSettings
from tests.helpers import write_config, write_pairs


def test_defaults_follow_the_hidden_size_and_flags_win():
    assert size_defaults(128).learning_rate == 1e-3  # the tiny preset, the quickstart's
    assert size_defaults(256).learning_rate == 3e-4  # albert_en_mini
    assert size_defaults(768).learning_rate == 2e-5  # base
    assert size_defaults(None) == SIZE_DEFAULTS[-1]
    settings = FinetuneSettings(task="classify", train="t", init="random", output="o")
    assert settings.learning_rate is None and settings.epochs is None  # filled in by size
    assert FinetuneSettings(**{**settings.record(), "learning_rate": 3e-4}).learning_rate == 3e-4


class _Task:
    name, best_metric = "classify", "accuracy"

    def evaluate(self, records, data):
        gold = [e.label for e in data.examples]
        return {
            "accuracy": sum(r["label"] == g for r, g in zip(records, gold, strict=True)) / len(gold)
        }


class _Example:
    def __init__(self, label):
        self.label = label


class _Data:
    def __init__(self, labels):
        self.examples = [_Example(label) for label in labels]


def test_the_floor_is_the_majority_class_of_train_scored_on_eval():
    floor = summary.floor(_Task(), _Data(["a", "b", "b"]).examples, _Data(["b", "a", "a", "a"]))
    assert floor == summary.Floor("majority class 'b'", 0.25, (0.25 * 0.75 / 4) ** 0.5)
    assert summary.floor(_Task(), [], None) is None


def test_a_run_that_does_not_beat_the_floor_says_so_in_one_line():
    common = dict(
        metric="accuracy",
        best_epoch=2,
        epochs=3,
        baseline=summary.Floor("majority class 'pos'", 0.567, 0.026),
        counts={"pos": 17, "neg": 13},
        train_path="train.tsv",
        seconds=83,
        logs="runs/sst/logs",
        learning_rate=2e-5,
        dtype="bfloat16",
    )
    lines = summary.summary_lines(best=0.3833, **common)
    assert lines[0] == "best epoch: 2 of 3, accuracy 0.3833; majority class 'pos' 0.5670 (± 0.0260)"
    assert lines[1] == "labels in train.tsv: pos 17, neg 13"
    assert lines[2] == "time: 1 min 23 s in bfloat16; TensorBoard logs: runs/sst/logs"
    assert lines[3].startswith("warning: the best epoch (accuracy 0.3833) does not beat")
    assert "--learning-rate (now 2e-05" in lines[3] and len(lines) == 4
    assert len(summary.summary_lines(best=0.95, **common)) == 3
    # One example above the majority of 361 is not learning: within the floor's standard error.
    assert summary.summary_lines(best=0.5789, **common)[3].startswith("warning: ")
    assert not summary.beats(0.5789, summary.Floor("majority class 'pos'", 0.5762, 0.026))


class _Text:
    def __init__(self, text, label):
        self.text_a, self.text_b, self.label = text, None, label


def test_the_bag_of_words_floor_is_tfidf_and_logistic_regression_fit_on_train():
    train = [
        _Text(f"{w} film {i}", lab) for i in range(6) for w, lab in (("good", "p"), ("bad", "n"))
    ]
    dev = _Data(["p", "n", "p", "n"])
    dev.examples = [
        _Text(t, lab) for t, lab in zip(["good", "bad", "bad one", "good one"], "pnpn", strict=True)
    ]
    bow = summary.bag_of_words(_Task(), train, dev)
    assert bow == summary.Floor(summary.BAG_OF_WORDS, 0.5, 0.25)  # the words decide, right or not
    assert summary.bag_of_words(_Task(), train, None) is None
    common = dict(metric="accuracy", best_epoch=1, epochs=1, baseline=None, counts=None,
                  train_path="t", seconds=1, logs="l", learning_rate=1e-3, dtype="float32")  # fmt: skip
    high = summary.Floor(summary.BAG_OF_WORDS, 0.8, 0.01)
    lines = summary.summary_lines(best=0.7, bow=high, **common)
    assert lines[1] == f"{summary.BAG_OF_WORDS}: accuracy 0.8000 (± 0.0100)"
    assert lines[-1].startswith("warning: the best epoch (accuracy 0.7000) does not beat a bag")
    assert len(summary.summary_lines(best=0.82, bow=high, **common)) == 3  # beaten: no warning
    # Above the bag of words by less than its standard error: the majority check's rule says so.
    lines = summary.summary_lines(best=0.805, bow=high, **common)
    assert len(lines) == 4 and "by less than its standard error (0.0100)" in lines[-1]
    assert lines[-1].startswith("warning: the best epoch (accuracy 0.8050) beats a bag")


def _scored(peak: float, calls: list[float]):
    """A score that rises towards log10(C) = `peak` and falls past it, recording each C asked."""

    def score(c: float) -> float:
        calls.append(c)
        return -abs(math.log10(c) - peak)

    return score


def test_the_c_grid_grows_past_an_edge_until_the_pick_is_inside_it():
    calls: list[float] = []
    pick, scores = summary.pick_c(_scored(0.0, calls))  # peaks inside: the start grid only
    assert pick == 1.0 and list(scores) == list(summary.C_GRID) == calls
    calls.clear()
    pick, scores = summary.pick_c(_scored(3.0, calls))  # still rising at 100
    assert pick == 1000.0 and list(scores) == [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]
    assert calls == list(scores)  # each C scored once
    pick, scores = summary.pick_c(_scored(-2.0, []))  # rising towards the small end
    assert pick == 0.01 and list(scores)[:2] == [0.001, 0.01]
    # At a limit the growth stops and the limit is the pick, the edge of what was tried.
    pick, scores = summary.pick_c(_scored(9.0, []))
    assert pick == summary.C_LIMITS[1] == max(scores)
    pick, scores = summary.pick_c(_scored(-9.0, []))
    assert pick == summary.C_LIMITS[0] == min(scores)
    # Equal scores go to the smaller C, so a plateau grows downwards to the limit, never up.
    pick, scores = summary.pick_c(lambda c: 0.5)
    assert pick == summary.C_LIMITS[0] and max(scores) == max(summary.C_GRID)
    pick, _ = summary.pick_c(lambda c: min(c, 10.0))  # level from 10 up: 10, inside
    assert pick == 10.0


def test_each_c_the_label_efficiency_table_shows_was_picked_inside_its_grid():
    from experiments import label_efficiency

    results = label_efficiency.RESULTS
    rows = json.loads((results / "results.json").read_text())["rows"]
    runs = [json.loads(path.read_text()) for path in (results / "runs").glob("*.json")]
    picked = [row for row in rows if row["arm"] in label_efficiency.C_ARMS]
    assert {row["arm"] for row in picked} == {"bow", "teacher"}
    for row in picked:
        tried = sorted(float(value) for value in row["dev_grid"])
        assert tried[0] < row["learning_rate"] < tried[-1], row
        mine = [r for r in runs if (r["arm"], r["labels"]) == (row["arm"], row["labels"])]
        score = label_efficiency.recorded_dev_score(mine)
        assert label_efficiency.dev_pick(row["arm"], score)[0] == row["learning_rate"]


def test_labels_seen_once_or_twice_are_named():
    lines = summary.rare_label_warnings(["pos"] * 5 + ["neg"] * 4 + ["postive", "ne", "ne"], "t")
    assert [line.split("'")[1] for line in lines] == ["postive", "ne"]
    assert "occurs once in t" in lines[0] and "occurs twice" in lines[1]


def _run(tmp_path, fixtures_dir, *extra):
    argv = ["finetune", "--task", "classify", "--train", tmp_path / "train.tsv"]
    argv += ["--eval", tmp_path / "dev.tsv", "--init", "random", "--config", write_config(tmp_path)]
    argv += ["--sp-model", fixtures_dir / "tokenizer" / "spm.model", "--max-seq-length", 16]
    argv += ["--output", tmp_path / "out", "--dtype", "float32", "--no-serving", "--quiet"]
    argv += ["--batch-size", 8, *extra]
    return cli.main([str(a) for a in argv])


@pytest.fixture
def pairs(tmp_path):
    write_pairs(tmp_path / "train.tsv", 16, seed=0)
    write_pairs(tmp_path / "dev.tsv", 8, seed=1)
    return tmp_path


@pytest.mark.slow
def test_summary_and_floor_warning_end_a_run_that_learns_nothing(pairs, fixtures_dir, capsys):
    assert _run(pairs, fixtures_dir, "--learning-rate", "1e-9", "--train-steps", 3) == 0
    err = capsys.readouterr().err.splitlines()
    assert not any("epoch 2/5" in line for line in err)  # --quiet: no bar, in any epoch
    defaults = next(line for line in err if line.startswith("defaults for hidden size 32, tiny"))
    assert "epochs 5" in defaults and "learning rate" not in defaults  # given
    assert err[-5].startswith("best epoch: ") and " of 5, accuracy " in err[-5]
    assert "; majority class " in err[-5]
    assert err[-4].startswith(f"{summary.BAG_OF_WORDS}: accuracy ")
    assert err[-3].startswith(f"labels in {pairs / 'train.tsv'}: ")
    assert err[-2].startswith("time: ") and err[-2].endswith(str(pairs / "out" / "logs"))
    assert err[-1].startswith("warning: the best epoch (accuracy ")
    meta = json.loads((pairs / "out" / "finetune.json").read_text())
    assert f" in {meta['dtype']}; TensorBoard logs: " in err[-2]  # the dtype it trained in
    assert meta["settings"]["learning_rate"] == 1e-9 and meta["settings"]["epochs"] == 5
    assert meta["floor"]["what"].startswith("majority class")
    assert meta["bag_of_words"]["what"] == summary.BAG_OF_WORDS
    assert f"accuracy {meta['bag_of_words']['value']:.4f} (± " in err[-4]


@pytest.mark.slow
def test_a_run_that_learns_nothing_restarts_with_the_next_seed(pairs, fixtures_dir, capsys):
    argv = ("--learning-rate", "1e-9", "--train-steps", 1, "--epochs", 1, "--seed", 7)
    assert _run(pairs, fixtures_dir, *argv, "--restarts", 2) == 0
    err = capsys.readouterr().err.splitlines()
    restarts = [line for line in err if " learned nothing (best epoch: 1 of 1, accuracy " in line]
    assert [line.split()[1] for line in restarts] == ["7", "8"]
    assert restarts[0].endswith("restart 1 of 2 with seed 8")
    meta = json.loads((pairs / "out" / "finetune.json").read_text())
    runs = meta["restarts"]["runs"]
    assert [(run["seed"], run["learned"]) for run in runs] == [(7, False), (8, False), (9, False)]
    assert meta["best_value"] == max(run["value"] for run in runs)
    assert meta["settings"]["seed"] == meta["restarts"]["kept_seed"] and meta["learned"] is False
    kept = next(line for line in err if line.startswith("kept seed "))
    expected = (
        f"kept seed {meta['restarts']['kept_seed']} of 3 runs (the best on {pairs / 'dev.tsv'}; "
    )
    assert kept.startswith(expected) and kept.endswith(" s in all)")
    # the kept run's closing lines come last and name the output, not a run's scratch directory
    assert err[-6] == f"wrote {pairs / 'out'} (best epoch 1, accuracy {meta['best_value']:.4f})"
    assert err[-2].endswith(str(pairs / "out" / "logs")) and err[-1].startswith("warning: ")
    assert sorted(p.name for p in (pairs / "out").iterdir() if p.name.startswith(".")) == []


def test_restarts_stop_at_the_first_run_that_learns(tmp_path):
    from types import SimpleNamespace

    from albert_tf.finetune.directory import FinetuneRecord
    from albert_tf.finetune.seeds import finetune_restarts

    values = {7: 0.50, 8: 0.81, 9: 0.90}  # seed 9 would be better, but 8 learned: no third run

    def one_run(settings, log, progress, closing, shown_output):
        Path(settings.output).mkdir(parents=True)
        value = values[settings.seed]
        record = FinetuneRecord(settings, best_value=value, learned=value > 0.6)
        closing(f"wrote {shown_output}")
        closing(f"best epoch: 1 of 1, accuracy {value}")
        return SimpleNamespace(record=record, settings=settings)

    settings = FinetuneSettings(
        "classify", "t.tsv", "random", str(tmp_path / "out"), eval="d.tsv", seed=7
    )
    lines = []
    result = finetune_restarts(settings, one_run, lines.append, progress=False)
    assert [run["seed"] for run in result.record.restarts["runs"]] == [7, 8]
    assert result.settings.seed == 8 and result.record.restarts["kept_seed"] == 8
    assert lines == [
        "seed 7 learned nothing (best epoch: 1 of 1, accuracy 0.5); restart 1 of 2 with seed 8",
        "kept seed 8 of 2 runs (the best on d.tsv; 0 s in all)",
        f"wrote {tmp_path / 'out'}",
        "best epoch: 1 of 1, accuracy 0.81",
    ]
    assert json.loads((tmp_path / "out" / "finetune.json").read_text())["best_value"] == 0.81
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["finetune.json"]


@pytest.mark.parametrize("first", [math.nan, None])
def test_a_nan_first_run_is_not_kept_over_a_finite_one(tmp_path, first):
    from types import SimpleNamespace

    from albert_tf.finetune.directory import FinetuneRecord
    from albert_tf.finetune.seeds import finetune_restarts, finetune_seeds

    values = {7: first, 8: 0.31, 9: math.nan}  # the first run diverged, the last too

    def one_run(settings, log, progress, closing, shown_output):
        Path(settings.output).mkdir(parents=True)
        value = values[settings.seed]
        record = FinetuneRecord(settings, best_value=value, learned=False)
        closing(f"wrote {shown_output}")
        closing(f"best epoch: 1 of 1, accuracy {value}")
        return SimpleNamespace(record=record, settings=settings)

    common = ("classify", "t.tsv", "random")
    for name, run in (("restarts", finetune_restarts), ("seeds", finetune_seeds)):
        settings = FinetuneSettings(
            *common, str(tmp_path / name), eval="d.tsv", seed=7, restarts=2, seeds=3
        )
        result = run(settings, one_run, lambda line: None, progress=False)
        assert result.settings.seed == 8 and result.record.best_value == 0.31, name
        written = json.loads((tmp_path / name / "finetune.json").read_text())
        assert written["best_value"] == 0.31 and written[name]["kept_seed"] == 8, name
        assert [r["seed"] for r in written[name]["runs"]] == [7, 8, 9], name


def test_one_rule_for_better_epochs_and_runs():
    from albert_tf.finetune.summary import improves

    assert improves(math.nan, None, first=True) and improves(None, 0.9, first=True)
    assert improves(0.1, math.nan) and improves(0.1, None) and improves(0.6, 0.5)
    assert not improves(math.nan, 0.1) and not improves(None, 0.1) and not improves(0.5, 0.5)
    assert not improves(math.nan, math.nan)


@pytest.mark.slow
def test_seeds_report_mean_and_sd_and_keep_the_best_on_dev(pairs, fixtures_dir, capsys):
    argv = ("--seeds", 2, "--seed", 7, "--epochs", 1, "--train-steps", 1)
    assert _run(pairs, fixtures_dir, *argv) == 0
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("accuracy over 2 seeds: mean ") and " ± " in last
    meta = json.loads((pairs / "out" / "finetune.json").read_text())
    values = [run["value"] for run in meta["seeds"]["runs"]]
    assert [run["seed"] for run in meta["seeds"]["runs"]] == [7, 8]
    assert (
        meta["best_value"] == max(values) and meta["settings"]["seed"] == meta["seeds"]["kept_seed"]
    )
    assert sorted(p.name for p in (pairs / "out").iterdir() if p.name.startswith(".")) == []


def test_seeds_need_eval(pairs, fixtures_dir, capsys):
    argv = ["finetune", "--task", "classify", "--train", str(pairs / "train.tsv")]
    argv += ["--init", "random", "--config", str(write_config(pairs)), "--seeds", "2"]
    argv += [
        "--output",
        str(pairs / "out"),
        "--sp-model",
        str(fixtures_dir / "tokenizer" / "spm.model"),
    ]
    assert cli.main(argv) == 2
    assert "--seeds needs --eval" in capsys.readouterr().err
    assert not (pairs / "out").exists()
