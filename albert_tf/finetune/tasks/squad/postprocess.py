"""SQuAD answers from model outputs: spans over windows, n-best lists and null odds.

Predicted spans are mapped back to characters of the original context through the features'
`token_to_char` (`data.build_squad_features`, from `alignment.encode_with_offsets`), and stripped
of whitespace (`strip_span`). `postprocess_squad` decodes BERT's head (start and end logits);
`postprocess_squad_beam` ALBERT's SQuAD 2.0 head (`heads.SquadV2Head`), as run_squad_v2.py does.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from albert_tf.finetune.metrics import softmax
from albert_tf.finetune.tasks.squad.data import SquadExample, SquadFeature


@dataclass(frozen=True)
class SquadPrediction:
    """The answer of one question: text ("" = no answer), character span, n-best list."""

    qid: str
    text: str
    char_start: int
    char_end: int
    null_score_diff: float
    nbest: list[dict]


def _pair_candidates(
    feature: SquadFeature,
    starts: np.ndarray,
    ends: np.ndarray,
    n_best_size: int,
    max_answer_length: int,
) -> list[tuple[float, int, int]]:
    """(score, char_start, char_end) of one window's top starts x top ends that may be
    answers (BERT's head; see `postprocess_squad`)."""
    candidates, top_ends = [], np.argsort(-ends)[:n_best_size].tolist()
    for s in np.argsort(-starts)[:n_best_size].tolist():
        if not _in_context(feature, s) or not feature.max_context[s]:
            continue
        for e in top_ends:
            if not _in_context(feature, e) or e < s or e - s + 1 > max_answer_length:
                continue
            char_start, char_end = feature.token_to_char[s][0], feature.token_to_char[e][1]
            candidates.append((float(starts[s] + ends[e]), char_start, char_end))
    return candidates


def postprocess_squad(
    examples: Sequence[SquadExample],
    features: Sequence[SquadFeature],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = True,
    null_score_diff_threshold: float = 0.0,
) -> list[SquadPrediction]:
    """Best answer per example from per-feature logits (float [F, S] each).

    Candidates: the `n_best_size` top starts x top ends of every window, start <= end, at most
    `max_answer_length` tokens, both inside the context and the start in its max-context
    window. An answer's text is stripped of whitespace (`strip_span`) and a span left empty
    is skipped. With `version_2_with_negative`, the answer is "" when the null score (start + end
    logit at [CLS], minimum over windows) exceeds the best span's by more than the threshold.
    """
    by_example = collections.defaultdict(list)
    for f, feature in enumerate(features):
        by_example[feature.example_index].append(f)
    predictions = []
    for index, example in enumerate(examples):
        candidates = []
        null_score = math.inf
        for f in by_example[index]:
            starts, ends = start_logits[f], end_logits[f]
            null_score = min(null_score, float(starts[0] + ends[0]))
            candidates += _pair_candidates(
                features[f], starts, ends, n_best_size, max_answer_length
            )
        candidates.sort(key=lambda c: -c[0])
        nbest, seen = [], set()
        for score, span_start, span_end in candidates:
            chars = strip_span(example.context, span_start, span_end)
            if chars is None or example.context[chars[0] : chars[1]] in seen:
                continue
            char_start, char_end = chars
            text = example.context[char_start:char_end]
            seen.add(text)
            nbest.append(
                {"text": text, "score": score, "char_start": char_start, "char_end": char_end}
            )
            if len(nbest) >= n_best_size:
                break
        if version_2_with_negative and math.isfinite(null_score):
            nbest.append({"text": "", "score": null_score, "char_start": -1, "char_end": -1})
            nbest.sort(key=lambda c: -c["score"])
        scores = np.array([c["score"] for c in nbest])
        for entry, probability in zip(
            nbest, softmax(scores).tolist() if nbest else [], strict=True
        ):
            entry["probability"] = probability
        best = next((c for c in nbest if c["text"]), None)
        if best is None:
            predictions.append(SquadPrediction(example.qid, "", -1, -1, math.inf, nbest))
            continue
        diff = null_score - best["score"] if version_2_with_negative else -math.inf
        if version_2_with_negative and diff > null_score_diff_threshold:
            predictions.append(SquadPrediction(example.qid, "", -1, -1, diff, nbest))
        else:
            predictions.append(
                SquadPrediction(
                    example.qid, best["text"], best["char_start"], best["char_end"], diff, nbest
                )
            )
    return predictions


def strip_span(context: str, char_start: int, char_end: int) -> tuple[int, int] | None:
    """`context[char_start:char_end]` without the whitespace around it, as (start, end); None
    when nothing else is left. A span ending on a bare "▁" piece ends where the next word
    starts, so its text ends in the space before that word until stripped."""
    text = context[char_start:char_end]
    stripped = text.strip()
    if not stripped:
        return None
    start = char_start + len(text) - len(text.lstrip())
    return start, start + len(stripped)


def _in_context(feature: SquadFeature, position: int) -> bool:
    return position < len(feature.token_to_char) and feature.token_to_char[position] is not None


@dataclass(frozen=True)
class BeamSpan:
    """One (start, end) pair of the beam that may be an answer: token positions in the packed
    sequence and their log-probabilities."""

    start: int
    end: int
    start_log_prob: float
    end_log_prob: float


def beam_spans(
    feature: SquadFeature,
    start_top_log_probs: np.ndarray,
    start_top_index: np.ndarray,
    end_top_log_probs: np.ndarray,
    end_top_index: np.ndarray,
    max_answer_length: int,
) -> list[BeamSpan]:
    """The pairs of one window's beam (`heads.SquadV2Head`: [K] starts, [K * K'] ends)
    that may be answers, in beam order, as the original's accumulate_predictions_v2 keeps
    them: start and end in the context, the start in its max-context window (the end's is
    not checked), end >= start, at most `max_answer_length` tokens."""
    per_start = len(end_top_index) // len(start_top_index)
    spans = []
    for i, start in enumerate(start_top_index.tolist()):
        if not _in_context(feature, start) or not feature.max_context[start]:
            continue
        for j in range(i * per_start, (i + 1) * per_start):
            end = int(end_top_index[j])
            if not _in_context(feature, end) or end < start or end - start + 1 > max_answer_length:
                continue
            spans.append(
                BeamSpan(start, end, float(start_top_log_probs[i]), float(end_top_log_probs[j]))
            )
    return spans


def _beam_nbest(
    example: SquadExample, spans: list[tuple[BeamSpan, SquadFeature]], n_best_size: int
) -> list[dict]:
    """The n best distinct answers of an example's beam spans (by start + end log-probability),
    with their probability among them; one empty entry when no span is left."""
    spans = sorted(spans, key=lambda pair: -(pair[0].start_log_prob + pair[0].end_log_prob))
    nbest, seen = [], set()
    for span, feature in spans:
        chars = strip_span(
            example.context,
            feature.token_to_char[span.start][0],
            feature.token_to_char[span.end][1],
        )
        if chars is None or example.context[chars[0] : chars[1]] in seen:
            continue
        text = example.context[chars[0] : chars[1]]
        seen.add(text)
        nbest.append(
            {
                "text": text,
                "char_start": chars[0],
                "char_end": chars[1],
                "start_log_prob": span.start_log_prob,
                "end_log_prob": span.end_log_prob,
            }
        )
        if len(nbest) >= n_best_size:
            break
    if not nbest:  # the original's stand-in when no span is left
        nbest.append(
            {
                "text": "",
                "char_start": -1,
                "char_end": -1,
                "start_log_prob": -1e6,
                "end_log_prob": -1e6,
            }
        )
    scores = np.array([e["start_log_prob"] + e["end_log_prob"] for e in nbest])
    for entry, probability in zip(nbest, softmax(scores).tolist(), strict=True):
        entry["probability"] = probability
    return nbest


def postprocess_squad_beam(
    examples: Sequence[SquadExample],
    features: Sequence[SquadFeature],
    outputs: dict[str, np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float | None = None,
) -> list[SquadPrediction]:
    """Answers from ALBERT's SQuAD 2.0 head (`heads.SquadV2Head`'s inference outputs,
    one row per feature), as the original's run_squad_v2.py gives them.

    An example's n-best list holds its windows' `beam_spans` by start + end log-probability,
    each text once, stripped of whitespace (one empty entry when none is left). Its
    `null_score_diff` is the smallest `cls_logits` of its windows. The answer is "" when
    `null_score_diff >= null_score_diff_threshold`, else the n-best's first text; a
    threshold of None answers every question (the original's first pass, before it picks
    the threshold on dev: `metrics.squad_null_threshold_search`).
    """
    by_example = collections.defaultdict(list)
    for f, feature in enumerate(features):
        by_example[feature.example_index].append(f)
    keys = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index")
    predictions = []
    for index, example in enumerate(examples):
        spans = [
            (span, features[f])
            for f in by_example[index]
            for span in beam_spans(features[f], *(outputs[k][f] for k in keys), max_answer_length)
        ]
        nbest = _beam_nbest(example, spans, n_best_size)
        null_score = min(float(outputs["cls_logits"][f]) for f in by_example[index])
        best = nbest[0]
        if null_score_diff_threshold is not None and null_score >= null_score_diff_threshold:
            best = {"text": "", "char_start": -1, "char_end": -1}
        predictions.append(
            SquadPrediction(
                example.qid, best["text"], best["char_start"], best["char_end"], null_score, nbest
            )
        )
    return predictions
