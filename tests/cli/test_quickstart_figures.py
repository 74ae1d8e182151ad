"""The quickstart's figures: held-out scores beside their baselines, the demos, curves.png."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.quickstart import evaluation as qe
from albert_tf.quickstart.curves import plot_curves
from albert_tf.quickstart.demos import BLANKS, DemoFigures, blank_rows, rank_of, run_demos
from albert_tf.quickstart.report import print_demo_margins, print_scores
from tests import helpers
from tests.conftest import FIXTURES

V = 60


def heldout(answers: list[list[int]], sop: list[int]) -> qe.HeldOut:
    """Examples of length 8 whose masked answers are `answers` (one row each, padded with 0
    weights to 3 predictions) and whose SOP labels are `sop`."""
    n = len(answers)
    ids = np.zeros((n, 3), np.int32)
    weights = np.zeros((n, 3), np.float32)
    for i, row in enumerate(answers):
        ids[i, : len(row)], weights[i, : len(row)] = row, 1.0
    return qe.HeldOut(
        {
            "input_word_ids": np.full((n, 8), 7, np.int32),
            "input_mask": np.ones((n, 8), np.int32),
            "input_type_ids": np.zeros((n, 8), np.int32),
            "masked_lm_positions": np.tile(np.arange(1, 4, dtype=np.int32), (n, 1)),
            "masked_lm_ids": ids,
            "masked_lm_weights": weights,
            "sentence_order_label": np.array(sop, np.int32),
        }
    )


def test_counts_order_and_ranks():
    training = heldout([[5, 5, 9], [5, 9], [2]], [0, 0, 1])
    counts = qe.piece_counts(training, V)
    assert counts[5] == 3 and counts[9] == 2 and counts[2] == 1 and counts.sum() == 6
    assert qe.frequency_order(counts)[:4].tolist() == [5, 9, 2, 0]  # ties by id
    assert rank_of(np.array([0.1, 0.9, 0.5, 0.9]), 2) == 3
    assert rank_of(np.array([0.1, 0.9, 0.5, 0.9]), 1) == 1


def test_unigram_guess_scores():
    counts = np.zeros(V, np.int64)
    counts[[5, 9, 2, 3, 4]] = [50, 40, 30, 20, 10]  # top-5: 5, 9, 2, 3, 4
    counts[10:] = 1
    held = heldout([[5, 9], [4, 55], [30]], [1, 0, 0])
    scores = qe.unigram_scores(held, counts, np.array([0, 0, 1]))
    assert scores.mlm_top1 == pytest.approx(1 / 5)  # 5 of answers 5, 9, 4, 55, 30
    assert scores.mlm_top5 == pytest.approx(3 / 5)
    assert scores.rare_top5 == 0.0  # 55 is the one rare answer (frequency rank 50)
    assert scores.sop == pytest.approx(2 / 3)  # the majority training label 0


class _Fixed:
    """A model whose MLM logits favour `guess` at every position and whose SOP says 1."""

    def __init__(self, guess: int):
        self.guess = guess

    def __call__(self, inputs, training=False):
        b, p = inputs["masked_lm_positions"].shape
        logits = np.zeros((b, p, V), np.float32)
        logits[..., self.guess] = 2.0
        logits[..., 55] = 1.0
        return {"mlm_logits": tf.constant(logits), "sop_logits": tf.constant([[0.0, 1.0]] * b)}


def test_model_scores_count_only_real_predictions():
    counts = np.zeros(V, np.int64)
    counts[:50] = np.arange(50, 0, -1)  # 0..49 frequent, 50.. rare
    held = heldout([[7, 55], [7], [8, 9]], [1, 1, 0])
    scores = qe.model_scores(_Fixed(7), held, counts)
    assert scores.mlm_top1 == pytest.approx(2 / 5)
    assert scores.mlm_top5 == pytest.approx(3 / 5)  # 55 is the second guess; 8 and 9 are not
    assert scores.rare_top5 == 1.0  # the one rare answer, 55
    assert scores.sop == pytest.approx(2 / 3)


def test_report_prints_every_metric_beside_both_baselines():
    scores = {
        "trained": qe.Scores(0.2, 0.4, 0.1, 0.6),
        "random_init": qe.Scores(0.0, 0.001, 0.0, 0.5),
        "unigram": qe.Scores(0.06, 0.19, 0.0, 0.52),
    }
    lines: list[str] = []
    print_scores(scores, lines.append)
    rows = {line.strip().split("  ")[0]: line for line in lines[1:5]}
    assert rows["MLM top-1"].split()[-5:] == ["20.0%", "0.0%", "6.0%", "+14.0", "points"]
    assert rows["MLM top-5"].split()[-5:] == ["40.0%", "0.1%", "19.0%", "+21.0", "points"]
    assert rows["SOP (chance 50%)"].split()[-5:] == ["60.0%", "50.0%", "52.0%", "+8.0", "points"]


def test_demos_and_curves_on_a_random_model(tmp_path):
    """The demos run on real models and the fixture vocabulary; with the same random weights
    under both names, trained and random ranks agree (what a margin of 1.0x means)."""
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(FIXTURES / "tokenizer" / "spm.model")
    config = helpers.tiny_pretraining_config(tokenizer.vocab_size)
    model = qe.load_model(config, None, seed=1)
    special = {"cls": 2, "sep": 3, "mask": 4}
    assert blank_rows(tokenizer, 4), "some BLANKS answer is a single piece of the fixture vocab"
    counts = np.ones(tokenizer.vocab_size, np.int64)
    lines: list[str] = []
    figures = run_demos(
        {"trained": model, "random": model}, tokenizer, counts, special, lines.append
    )
    assert figures.blanks["trained"] == figures.blanks["random"]
    assert figures.neighbours["trained"] == figures.neighbours["random"]
    assert 0 < figures.blank_count <= len(BLANKS)
    assert any("trained top-5" in line for line in lines)
    blanks = figures.details["fill_in_the_blank"]
    assert len(blanks) == figures.blank_count
    assert all(b["trained"] == b["random"] and b["unigram"] >= 1 for b in blanks)
    assert len(figures.details["neighbours"]) == figures.pair_count

    path = plot_curves(
        [{"step": 10, "loss": 9.0}, {"step": 20, "loss": 8.0}],
        [{"step": 0, "mlm_accuracy": 0.0}, {"step": 20, "mlm_accuracy": 0.05}],
        unigram_top1=0.06,
        random_top1=0.0,
        path=tmp_path / "curves.png",
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_margins_say_when_the_trained_model_does_not_beat_its_baseline():
    lines: list[str] = []
    figures = DemoFigures(
        blanks={"trained": 400.0, "random": 2000.0, "unigram": 350.0},
        neighbours={"trained": 880.0, "random": 3520.0},
        blank_count=5,
        pair_count=10,
    )
    print_demo_margins(figures, lines.append)
    assert lines[0].endswith("trained does not beat the best baseline (0.9x): not learned yet")
    assert lines[1].endswith("trained ranks the answer 4.0x higher than the best baseline")
