"""Metrics: classification, correlation, and the official SQuAD EM/F1."""

from __future__ import annotations

import pytest

from albert_tf.finetune import metrics


def test_classification_metrics_pinned_values():
    labels = [1, 1, 0, 0, 1, 0]
    preds = [1, 0, 0, 1, 1, 0]
    assert metrics.accuracy(labels, preds) == pytest.approx(4 / 6)
    # tp=2, fp=1, fn=1 -> F1 = 4 / 6
    assert metrics.f1_binary(labels, preds) == pytest.approx(4 / 6)
    # confusion [[2,1],[1,2]]: MCC = (4 - 1) / 3*3
    assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(1 / 3)
    assert metrics.matthews_corrcoef([0, 1, 0], [0, 0, 0]) == 0.0
    assert metrics.f1_macro([0, 1, 2], [0, 1, 1]) == pytest.approx((1 + 2 / 3 + 0) / 3)


def test_correlations():
    x = [1.0, 2.0, 3.0, 4.0]
    assert metrics.pearson(x, [2.0, 4.0, 6.0, 8.0]) == pytest.approx(1.0)
    assert metrics.pearson(x, [1.0, 1.0, 1.0, 1.0]) == 0.0
    # monotone but not linear: Spearman 1, Pearson < 1
    y = [1.0, 10.0, 100.0, 1000.0]
    assert metrics.spearman(x, y) == pytest.approx(1.0)
    assert metrics.pearson(x, y) < 0.99
    # ties get their mean rank: ranks [1.5, 1.5, 3] vs [1, 2, 3]
    assert metrics.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(0.8660254, abs=1e-6)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("an apple, a pear", "apple pear"),
        ("  theatre   there  ", "theatre there"),
        ("U.S.A.", "usa"),
        ("A", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert metrics.normalize_answer(text) == normalized


def test_squad_em_f1_crafted_cases():
    gold = {
        "articles": ["the Eiffel Tower"],
        "punct": ["Paris, France."],
        "multi": ["1889", "in 1889", "the year 1889"],
        "partial": ["Gustave Eiffel"],
        "noans": [],
        "noans_wrong": [],
        "missing": ["x"],
    }
    predictions = {
        "articles": "Eiffel Tower",  # articles removed -> exact
        "punct": "paris france",  # punctuation and case -> exact
        "multi": "year 1889",  # best over golds: "the year 1889" -> exact
        "partial": "Eiffel",  # P=1, R=1/2 -> F1 2/3
        "noans": "",
        "noans_wrong": "something",
    }
    scores = metrics.squad_scores(predictions, gold)
    # exact: articles, punct, multi, noans = 4 of 7
    assert scores["exact"] == pytest.approx(100 * 4 / 7)
    assert scores["f1"] == pytest.approx(100 * (4 + 2 / 3) / 7)
    assert scores["total"] == 7
    assert scores["NoAns_total"] == 2
    assert scores["NoAns_exact"] == pytest.approx(50.0)
    assert scores["HasAns_f1"] == pytest.approx(100 * (3 + 2 / 3) / 5)


def test_squad_f1_token_overlap_counts_duplicates():
    assert metrics.squad_f1("a cat cat", "cat") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert metrics.squad_f1("", "") == 1.0
    assert metrics.squad_f1("the", "") == 1.0  # both normalize to empty
    assert metrics.squad_f1("dog", "") == 0.0
