"""Evaluation metrics of the fine-tuning tasks (pure Python and NumPy, no TensorFlow).

SQuAD exact match and F1 follow the official v1.1/v2.0 evaluation scripts: answers are
normalized (lowercase, punctuation removed, the articles a/an/the removed, whitespace collapsed),
each prediction is scored against every gold answer and the best score is kept, and a question
without gold answers has the single gold answer "" (so only an empty prediction scores 1).
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (float64 inputs stay float64)."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def accuracy(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Fraction of positions where `predictions` equals `labels`; 0.0 for empty input."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def f1_binary(labels: Sequence[int], predictions: Sequence[int], positive: int = 1) -> float:
    """F1 of the `positive` class; 0.0 when it is never predicted nor present."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    denominator = 2 * tp + fp + fn
    return float(2 * tp / denominator) if denominator else 0.0


def f1_macro(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Unweighted mean of the per-class F1 over the classes present in labels or predictions."""
    classes = sorted(set(np.asarray(labels).tolist()) | set(np.asarray(predictions).tolist()))
    if not classes:
        return 0.0
    return float(np.mean([f1_binary(labels, predictions, c) for c in classes]))


def matthews_corrcoef(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Matthews correlation coefficient (multi-class form); 0.0 when undefined."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = sorted(set(labels.tolist()) | set(predictions.tolist()))
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for gold, pred in zip(labels.tolist(), predictions.tolist(), strict=True):
        confusion[index[gold], index[pred]] += 1
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator else 0.0


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation; 0.0 when either side is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denominator) if denominator else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks starting at 1, ties sharing their mean rank."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (Pearson of the tie-averaged ranks)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return pearson(_ranks(x), _ranks(y))


def normalize_answer(text: str) -> str:
    """The official SQuAD normalization: lowercase, drop punctuation and articles, fix spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalized strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str) -> float:
    """Token-level F1 of the normalized strings; two empty answers score 1.0."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred_tokens), overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_raw_scores(
    predictions: Mapping[str, str], gold_answers: Mapping[str, Sequence[str]]
) -> tuple[dict[str, float], dict[str, float], dict[str, bool]]:
    """Per question of `gold_answers`: exact match, F1 (best over its gold answers, 0 when
    `predictions` lacks it) and whether it has an answer (a gold text that normalizes to
    something; [] or [""] is unanswerable)."""
    exact, f1, has_answer = {}, {}, {}
    for qid, golds in gold_answers.items():
        golds = [g for g in golds if normalize_answer(g)] or [""]
        has_answer[qid] = golds != [""]
        if qid not in predictions:
            exact[qid] = f1[qid] = 0.0
            continue
        prediction = predictions[qid]
        exact[qid] = max(squad_exact_match(prediction, g) for g in golds)
        f1[qid] = max(squad_f1(prediction, g) for g in golds)
    return exact, f1, has_answer


def _best_threshold(
    spans: Mapping[str, str],
    raw: Mapping[str, float],
    null_scores: Mapping[str, float],
    has_answer: Mapping[str, bool],
) -> tuple[float, float]:
    """(best score in percent, its threshold) as the official v2.0 script's find_best_thresh:
    questions in increasing null score are answered one by one; the threshold is the null
    score of the last question answered at the best total (0.0 when answering none is best)."""
    score = best = sum(not has for has in has_answer.values())
    threshold = 0.0
    for qid in sorted(null_scores, key=lambda q: null_scores[q]):
        if qid not in raw:
            continue
        if has_answer[qid]:
            score += raw[qid]
        elif spans[qid]:
            score -= 1
        if score > best:
            best, threshold = score, null_scores[qid]
    return 100.0 * best / len(raw), threshold


def squad_null_threshold_search(
    spans: Mapping[str, str],
    null_scores: Mapping[str, float],
    gold_answers: Mapping[str, Sequence[str]],
) -> dict[str, float]:
    """The official SQuAD v2.0 search for the null threshold: `spans[qid]` is the answer given
    when the question is answered, `null_scores[qid]` how strongly the model says it has none.
    Returns `best_exact`, `best_exact_thresh`, `best_f1` and `best_f1_thresh` (answering the
    questions whose null score is at most the threshold)."""
    exact, f1, has_answer = squad_raw_scores(spans, gold_answers)
    best_exact, exact_threshold = _best_threshold(spans, exact, null_scores, has_answer)
    best_f1, f1_threshold = _best_threshold(spans, f1, null_scores, has_answer)
    return {
        "best_exact": best_exact,
        "best_exact_thresh": exact_threshold,
        "best_f1": best_f1,
        "best_f1_thresh": f1_threshold,
    }


def squad_scores(
    predictions: Mapping[str, str], gold_answers: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """SQuAD EM and F1 in percent, averaged over every question of `gold_answers`.

    `gold_answers[qid]` is the list of gold answer texts ([] or [""] for an unanswerable
    question); a question missing from `predictions` scores 0. Returns `exact`, `f1`, `total`,
    and `HasAns_*`/`NoAns_*` breakdowns when both kinds of question are present.
    """
    exact, f1, has_answer = squad_raw_scores(predictions, gold_answers)

    def mean(values: list[float]) -> float:
        return 100.0 * sum(values) / len(values) if values else 0.0

    scores = {
        "exact": mean(list(exact.values())),
        "f1": mean(list(f1.values())),
        "total": float(len(exact)),
    }
    for name, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [q for q in exact if has_answer[q] == wanted]
        if ids and len(ids) < len(exact):
            scores[f"{name}_exact"] = mean([exact[q] for q in ids])
            scores[f"{name}_f1"] = mean([f1[q] for q in ids])
            scores[f"{name}_total"] = float(len(ids))
    return scores
