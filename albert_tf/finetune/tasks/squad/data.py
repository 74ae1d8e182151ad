"""What a SQuAD file becomes: examples (`read_squad`), then features over windows of the context.

A feature is `[CLS] question [SEP] context window [SEP]`: the question truncated to
`max_query_length` tokens, windows of the context starting every `doc_stride` tokens. Training
labels are token positions of the answer inside the window, or 0 ([CLS]) when the window does not
hold the answer or the question is unanswerable (SQuAD v2.0).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from albert_tf.errors import ConfigError, DataError
from albert_tf.finetune.alignment import encode_with_offsets
from albert_tf.finetune.data import check_file
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@dataclass(frozen=True)
class SquadExample:
    """One SQuAD question; `answers` holds (text, character start) pairs in `context`."""

    qid: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]
    is_impossible: bool
    source: str
    gold_texts: tuple[str, ...] = ()  # every gold answer as written (for the official EM/F1)


@dataclass
class SquadStats:
    """Counts reported by `read_squad`: questions kept and answers dropped."""

    questions: int = 0
    impossible: int = 0
    answers_not_in_context: int = 0
    dropped_questions: list[str] = field(default_factory=list)


def _load_json(path: Path) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None


def read_squad(path: str | os.PathLike, training: bool) -> tuple[list[SquadExample], SquadStats]:
    """Reads a SQuAD v1.1 or v2.0 JSON file (`{"data": [{"paragraphs": [...]}]}`).

    Gold answers whose text does not occur at `answer_start` in the context are counted in
    `SquadStats.answers_not_in_context` and dropped; in training a question left without a
    usable answer (and not marked impossible) is dropped and listed in `dropped_questions`.
    """
    path = check_file(path)
    document = _load_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise DataError(f"{path}: not a SQuAD file (no top-level 'data' list)")
    stats, examples = SquadStats(), []
    for a, article in enumerate(document["data"]):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            try:
                context = paragraph["context"]
                qas = paragraph["qas"]
            except (KeyError, TypeError):
                raise DataError(f"{path}: data[{a}].paragraphs[{p}] lacks context or qas") from None
            for qa in qas:
                try:
                    qid, question = str(qa["id"]), qa["question"]
                    raw_answers = qa.get("answers", [])
                    answers = [(x["text"], int(x["answer_start"])) for x in raw_answers]
                except (KeyError, TypeError, ValueError):
                    raise DataError(
                        f"{path}: data[{a}].paragraphs[{p}]: malformed question {qa.get('id')!r}"
                    ) from None
                impossible = bool(qa.get("is_impossible", False))
                kept = tuple(
                    (text, start)
                    for text, start in answers
                    if context[start : start + len(text)] == text and text.strip()
                )
                stats.answers_not_in_context += len(answers) - len(kept)
                if training and not impossible and not kept:
                    stats.dropped_questions.append(qid)
                    continue
                stats.questions += 1
                stats.impossible += impossible
                source = f"{path}: question {qid}"
                gold = tuple(text for text, _ in answers)
                examples.append(
                    SquadExample(qid, question, context, kept, impossible, source, gold)
                )
    return examples, stats


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
