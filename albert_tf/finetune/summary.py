"""What a fine-tuning run ends with: its best epoch beside the floor any model must beat.

The floor is scikit-learn's DummyClassifier idea: for `classify` the majority class of --train
predicted for every --eval example, scored by the same metric; for `regress` the mean of the
--train labels, whose correlation with anything is 0. A best epoch that does not beat it by
more than the floor's standard error on --eval has learned nothing the label counts did not
already say (on 361 examples, one example more than the majority is 0.003 above it, the standard
error 0.026), and `summary_lines` says so in one line. The bag-of-words floor, where there is
one, is read by the same rule: beaten by less than its standard error, the gap is inside the
noise, and one line says so. scikit-learn, which takes seconds to import, is imported by
`bag_of_words` only (classify with --eval).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

FLOORED_TASKS = ("classify", "regress")
RARE = 2  # a label seen this often or less in --train gets a warning


@dataclass(frozen=True)
class Floor:
    """The baseline a run must beat: what it predicts, and its score by the best metric."""

    what: str  # "majority class 'pos'" or "the mean 2.5"
    value: float
    margin: float  # the value's standard error on --eval: a run must beat value + margin


def label_counts(labels: list) -> dict[str, int]:
    """Examples per label, most frequent first (ties by name)."""
    counts = Counter(str(label) for label in labels if label is not None)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def rare_label_warnings(train_labels: list, train_path: str) -> list[str]:
    """One line per label seen at most RARE times in --train (often a typo)."""
    counts = Counter(label for label in train_labels if label is not None)
    lines = []
    for label, count in sorted(counts.items(), key=lambda item: (item[1], str(item[0]))):
        if count <= RARE:
            times = "once" if count == 1 else "twice"
            lines.append(
                f"warning: label {label!r} occurs {times} in {train_path}: a typo? (it becomes a "
                "class of its own)"
            )
    return lines


def floor(task, train_examples: list, eval_data) -> Floor | None:
    """The floor on `eval_data` (None for tasks without one or runs without --eval)."""
    if eval_data is None or task.name not in FLOORED_TASKS:
        return None
    labels, n = [e.label for e in train_examples], len(eval_data.examples)
    if task.name == "regress":
        mean = sum(labels) / len(labels)
        # A correlation measured on n pairs of unrelated values has a standard error of about
        # 1/sqrt(n - 3) (Fisher's z).
        return Floor(f"the mean {mean:.4g}", 0.0, 1 / math.sqrt(max(n - 3, 1)))
    majority = next(iter(label_counts(labels)))
    records = [{"label": majority} for _ in eval_data.examples]
    value = task.evaluate(records, eval_data)[task.best_metric]
    return Floor(f"majority class {majority!r}", value, math.sqrt(value * (1 - value) / n))


def improves(value: float | None, best: float | None, first: bool = False) -> bool:
    """The one rule for "better", for epochs and for runs: whether a score `value` replaces the
    `best` kept so far (`first`: nothing is kept yet, and anything is kept). A number replaces
    a NaN or missing score; a NaN or missing score never replaces a number."""
    if first:
        return True
    if value is None or math.isnan(value):
        return False
    return best is None or math.isnan(best) or value > best


BAG_OF_WORDS = "a bag of words (TF-IDF of word 1-2 grams + logistic regression)"
# A logistic regression's C, wherever one is picked (the bag of words here and in
# experiments/label_efficiency.py, the teacher's probe there): the grid it starts from, and the
# limits its growth stops at. At 1e-3 the bag of words of Rotten Tomatoes' 8,454 sentences
# answers one label for every sentence; from 1e5 up its weights grow by under 1% per factor of
# 10 (lbfgs meets its tolerance first), so a larger C fits nearly the same model.
C_GRID = (0.1, 1.0, 10.0, 100.0)
C_LIMITS = (1e-3, 1e5)


def pick_c(
    score: Callable[[float], float],
    grid: tuple[float, ...] = C_GRID,
    limits: tuple[float, float] = C_LIMITS,
) -> tuple[float, dict[float, float]]:
    """The C with the highest `score(C)`, and the score of every C tried, by C ascending.

    Every C of `grid` is scored. While the pick is the largest C tried, the next C is 10 times it;
    while it is the smallest, a tenth of it: the grid grows until the pick lies inside it. Ties go
    to the smaller C (the more regularized fit), so a plateau grows the grid downwards only. Growth
    stops at `limits`: a pick equal to a limit is the edge of what is tried, and the only case in
    which the pick is an edge of the scores returned."""
    low_limit, high_limit = limits
    scores = {c: score(c) for c in sorted(grid)}
    while True:
        pick = max(scores, key=scores.__getitem__)  # the first of equal scores: the smaller C
        tried = list(scores)
        if pick == tried[-1] and pick * 10 <= high_limit * (1 + 1e-9):
            new = float(f"{pick * 10:g}")  # a power of 10 exactly, as records name it
        elif pick == tried[0] and pick / 10 >= low_limit * (1 - 1e-9):
            new = float(f"{pick / 10:g}")
        else:
            return pick, scores
        scores = dict(sorted({**scores, new: score(new)}.items()))


def _joined(example) -> str:
    return example.text_a if example.text_b is None else f"{example.text_a} {example.text_b}"


def bag_of_words(task, train_examples: list, eval_data) -> Floor | None:
    """The score on `eval_data` of a bag of words fit on the same training examples: TF-IDF of
    word 1-2 grams (sublinear tf) and a logistic regression whose C is picked by 3-fold
    cross-validation on --train over `pick_c`'s growing grid (C = 1 when a label has fewer than 3
    examples). The floor a network must beat to be worth its cost. None for tasks other than
    classify, runs without --eval, or training data of one label."""
    if eval_data is None or task.name != "classify":
        return None
    # start-up: scikit-learn takes seconds to import, and only classify with --eval needs it
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    labels = [str(e.label) for e in train_examples]
    counts = Counter(labels)
    if len(counts) < 2:
        return None
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    features = vectorizer.fit_transform([_joined(e) for e in train_examples])
    c = 1.0
    if min(counts.values()) >= 3:

        def cross_validated(value: float) -> float:
            model = LogisticRegression(C=value, max_iter=2000)
            return cross_val_score(model, features, labels, cv=3).mean()

        c, _ = pick_c(cross_validated)
    model = LogisticRegression(C=c, max_iter=2000).fit(features, labels)
    predicted = model.predict(vectorizer.transform([_joined(e) for e in eval_data.examples]))
    by_name = {str(label): label for label in (e.label for e in train_examples)}
    records = [{"label": by_name[p]} for p in predicted]
    value = task.evaluate(records, eval_data)[task.best_metric]
    n = len(eval_data.examples)
    return Floor(BAG_OF_WORDS, value, math.sqrt(value * (1 - value) / max(n, 1)))


def beats(value: float | None, baseline: Floor | None) -> bool:
    """Whether the best epoch's `value` is above the floor by more than its standard error
    (True when there is no floor)."""
    return baseline is None or (value is not None and value > baseline.value + baseline.margin)


def duration(seconds: float) -> str:
    """`1 min 23 s`, or `42 s` under a minute."""
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def summary_lines(
    *,
    metric: str | None,
    best: float | None,
    best_epoch: int,
    epochs: int,
    baseline: Floor | None,
    counts: dict[str, int] | None,
    train_path: str,
    seconds: float,
    logs: str,
    learning_rate: float,
    dtype: str,
    bow: Floor | None = None,
) -> list[str]:
    """The run's closing lines: best epoch and floor, label counts, time and the dtype the run
    computed in, where the logs are, and a warning when the best epoch does not beat the floor
    by more than its standard error, or else the bag of words by more than its own."""
    if metric is None or best is None:
        lines = [f"best epoch: {best_epoch} of {epochs} (no --eval: the last epoch is kept)"]
    else:
        line = f"best epoch: {best_epoch} of {epochs}, {metric} {best:.4f}"
        if baseline is not None:
            line += f"; {baseline.what} {baseline.value:.4f} (± {baseline.margin:.4f})"
        lines = [line]
    if bow is not None:
        lines.append(f"{bow.what}: {metric} {bow.value:.4f} (± {bow.margin:.4f})")
    if counts:
        shown = ", ".join(f"{label} {n}" for label, n in counts.items())
        lines.append(f"labels in {train_path}: {shown}")
    lines.append(f"time: {duration(seconds)} in {dtype}; TensorBoard logs: {logs}")
    if metric is not None and not beats(best, baseline):
        lines.append(
            f"warning: the best epoch ({metric} {best:.4f}) does not beat {baseline.what} "
            f"({baseline.value:.4f}) by more than its standard error ({baseline.margin:.4f}): "
            f"nothing was learned; try another --learning-rate (now {learning_rate:g}; see "
            "the defaults by model size in --help), more --epochs, more data or a better "
            "pretrained --init (albert_en_mini)"
        )
    elif bow is not None and best is not None and not best > bow.value:
        lines.append(
            f"warning: the best epoch ({metric} {best:.4f}) does not beat {bow.what} "
            f"({bow.value:.4f}), which fits in seconds: use it, or try more data, more --epochs "
            "or a better --init"
        )
    elif bow is not None and best is not None and not beats(best, bow):
        lines.append(
            f"warning: the best epoch ({metric} {best:.4f}) beats {bow.what} ({bow.value:.4f}) "
            f"by less than its standard error ({bow.margin:.4f}): the gap is inside the noise, "
            "and the bag of words fits in seconds"
        )
    return lines
