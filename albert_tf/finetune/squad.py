"""SQuAD features (doc stride over long contexts) and answer post-processing.

A feature is `[CLS] question [SEP] context window [SEP]`: the question truncated to
`max_query_length` tokens, windows of the context starting every `doc_stride` tokens. Training
labels are token positions of the answer inside the window, or 0 ([CLS]) when the window does not
hold the answer or the question is unanswerable (SQuAD v2.0). Predicted spans are mapped back to
characters of the original context through `alignment.encode_with_offsets`, and stripped of
whitespace (`strip_span`). `postprocess_squad` decodes BERT's head (start and end logits);
`postprocess_squad_beam` ALBERT's SQuAD 2.0 head (`squad_head`), as run_squad_v2.py does.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from albert_tf.errors import ConfigError
from albert_tf.finetune.alignment import encode_with_offsets
from albert_tf.finetune.data import SquadExample
from albert_tf.finetune.metrics import softmax
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@dataclass(frozen=True)
class SquadFeature:
    """One window of one example; `token_to_char[i]` is None outside the context."""

    example_index: int
    input_word_ids: list[int]
    input_mask: list[int]
    input_type_ids: list[int]
    token_to_char: list[tuple[int, int] | None]
    max_context: list[bool]  # whether this window is the best one for token i
    start_position: int
    end_position: int


def _max_context(windows: list[tuple[int, int]], window: int, position: int) -> bool:
    """True if `windows[window]` gives doc token `position` the most context (as the original)."""
    best_score, best = None, None
    for index, (start, length) in enumerate(windows):
        end = start + length - 1
        if not start <= position <= end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best = score, index
    return best == window


def _answer_tokens(starts: list[int], ends: list[int], char_start: int, char_end: int):
    """First and last doc token overlapping characters [char_start, char_end)."""
    covering = [
        i
        for i, (s, e) in enumerate(zip(starts, ends, strict=True))
        if e > char_start and s < char_end and e > s
    ]
    return (covering[0], covering[-1]) if covering else None


def build_squad_features(
    examples: Sequence[SquadExample],
    tokenizer: AlbertTokenizer,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    training: bool = False,
) -> list[SquadFeature]:
    """Features of every example (one per context window), padded to `max_seq_length`."""
    if max_seq_length - min(max_query_length, max_seq_length) - 3 < 1:
        raise ConfigError(
            f"max_seq_length {max_seq_length} leaves no room for context after a {max_query_length}-token question"
        )
    if doc_stride < 1:
        raise ConfigError(f"doc_stride must be positive, got {doc_stride}")
    features = []
    for index, example in enumerate(examples):
        query = tokenizer.encode(example.question)[:max_query_length]
        doc_ids, starts, ends = encode_with_offsets(tokenizer, example.context)
        answer = None
        if training and not example.is_impossible and example.answers:
            text, char_start = example.answers[0]
            answer = _answer_tokens(starts, ends, char_start, char_start + len(text))
        budget = max_seq_length - len(query) - 3
        windows: list[tuple[int, int]] = []
        offset = 0
        while True:
            length = min(len(doc_ids) - offset, budget)
            windows.append((offset, length))
            if offset + length >= len(doc_ids):
                break
            offset += min(length, doc_stride)
        for w, (offset, length) in enumerate(windows):
            ids = [tokenizer.cls_id, *query, tokenizer.sep_id]
            types = [0] * len(ids)
            token_to_char: list[tuple[int, int] | None] = [None] * len(ids)
            max_context = [False] * len(ids)
            for position in range(offset, offset + length):
                ids.append(doc_ids[position])
                types.append(1)
                token_to_char.append((starts[position], ends[position]))
                max_context.append(_max_context(windows, w, position))
            ids.append(tokenizer.sep_id)
            types.append(1)
            token_to_char.append(None)
            max_context.append(False)
            start_position = end_position = 0
            if answer is not None and offset <= answer[0] and answer[1] < offset + length:
                shift = len(query) + 2 - offset
                start_position, end_position = answer[0] + shift, answer[1] + shift
            padding = max_seq_length - len(ids)
            features.append(
                SquadFeature(
                    example_index=index,
                    input_word_ids=ids + [tokenizer.pad_id] * padding,
                    input_mask=[1] * len(ids) + [0] * padding,
                    input_type_ids=types + [0] * padding,
                    token_to_char=token_to_char + [None] * padding,
                    max_context=max_context + [False] * padding,
                    start_position=start_position,
                    end_position=end_position,
                )
            )
    return features


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
    """The pairs of one window's beam (`squad_head.SquadV2Head`: [K] starts, [K * K'] ends)
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
    """Answers from ALBERT's SQuAD 2.0 head (`squad_head.SquadV2Head`'s inference outputs,
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
