"""Token features of sentence, multiple-choice and tagging examples.

Packing is `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` with type ids 0 for CLS/A/first SEP and 1
for B and its SEP, padded with 0. A pair too long for `max_seq_length` is trimmed round-robin
(equivalently, the original's "pop from the longer segment"), the same as the preprocessing
SavedModel's `bert_pack_inputs`, so in-graph serving reproduces these features exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from albert_tf.errors import ConfigError
from albert_tf.finetune.data import ChoiceExample, TagExample, TextExample
from albert_tf.preprocess.tokenizer import AlbertTokenizer

# The encoder's inputs, each int32 [B, S] (the TF-Hub encoder contract).
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")

IGNORE_LABEL = -100  # tag label of pieces that do not start a word, and of padding


@dataclass
class Encoded:
    """Model inputs as int32 arrays ([N, S], or [N, C, S] for multiple choice) and labels.

    `truncated` counts examples that lost tokens to `max_seq_length`; for tagging,
    `word_index[n, s]` is the word whose first piece sits at position s (-1 elsewhere).
    """

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    truncated: int = 0
    word_index: np.ndarray | None = None
    extra: dict = field(default_factory=dict)


def trim_round_robin(
    a: list[int], b: list[int] | None, budget: int
) -> tuple[list[int], list[int] | None]:
    """Keeps `budget` tokens in total, taking one from each segment in turn."""
    if b is None:
        return a[:budget], None
    keep_a = keep_b = 0
    while keep_a + keep_b < budget and (keep_a < len(a) or keep_b < len(b)):
        if keep_a < len(a):
            keep_a += 1
        if keep_a + keep_b < budget and keep_b < len(b):
            keep_b += 1
    return a[:keep_a], b[:keep_b]


def pack(
    tokenizer: AlbertTokenizer, a: list[int], b: list[int] | None, max_seq_length: int
) -> tuple[list[int], list[int], list[int], bool]:
    """(word ids, mask, type ids, truncated) of one segment or pair, padded to max_seq_length."""
    budget = max_seq_length - (3 if b is not None else 2)
    trimmed_a, trimmed_b = trim_round_robin(a, b, budget)
    truncated = len(trimmed_a) < len(a) or (b is not None and len(trimmed_b) < len(b))
    ids = [tokenizer.cls_id, *trimmed_a, tokenizer.sep_id]
    types = [0] * len(ids)
    if trimmed_b is not None:
        ids += [*trimmed_b, tokenizer.sep_id]
        types += [1] * (len(trimmed_b) + 1)
    padding = max_seq_length - len(ids)
    return (
        ids + [tokenizer.pad_id] * padding,
        [1] * len(ids) + [0] * padding,
        types + [0] * padding,
        truncated,
    )


def check_max_seq_length(max_seq_length: int, max_position_embeddings: int) -> None:
    """ConfigError if sequences cannot fit the model's position table."""
    if max_seq_length > max_position_embeddings:
        raise ConfigError(
            f"--max-seq-length {max_seq_length} exceeds the model's max_position_embeddings "
            f"{max_position_embeddings}"
        )
    if max_seq_length < 4:
        raise ConfigError(f"--max-seq-length must be at least 4, got {max_seq_length}")


def _arrays(
    rows: list[tuple[list[int], list[int], list[int]]], shape: tuple[int, ...]
) -> dict[str, np.ndarray]:
    names = ("input_word_ids", "input_mask", "input_type_ids")
    return {
        name: np.asarray([r[i] for r in rows], np.int32).reshape(shape)
        for i, name in enumerate(names)
    }


def encode_text(
    examples: Sequence[TextExample], tokenizer: AlbertTokenizer, max_seq_length: int
) -> Encoded:
    """Features [N, S] of sentence (pair) examples (labels are the task's business)."""
    rows, truncated = [], 0
    for example in examples:
        b = tokenizer.encode(example.text_b) if example.text_b is not None else None
        *row, cut = pack(tokenizer, tokenizer.encode(example.text_a), b, max_seq_length)
        rows.append(row)
        truncated += cut
    return Encoded(_arrays(rows, (len(rows), max_seq_length)), None, truncated)


def choice_text(question: str, option: str) -> str:
    """RACE's question-option text: fill the blank "_" with the option, else append it."""
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def encode_choices(
    examples: Sequence[ChoiceExample], tokenizer: AlbertTokenizer, max_seq_length: int
) -> Encoded:
    """Features [N, C, S] of `[CLS] context [SEP] question+option [SEP]` for every option."""
    widths = {len(e.choices) for e in examples}
    if len(widths) > 1:
        raise ConfigError(
            f"every question needs the same number of options, found {sorted(widths)}"
        )
    num_choices = widths.pop() if widths else 0
    rows, truncated = [], 0
    for example in examples:
        context = tokenizer.encode(example.context)
        cut_any = False
        for option in example.choices:
            qa = tokenizer.encode(choice_text(example.question, option))
            *row, cut = pack(tokenizer, context, qa, max_seq_length)
            rows.append(row)
            cut_any |= cut
        truncated += cut_any
    targets = None
    if examples and all(e.label is not None for e in examples):
        targets = np.asarray([e.label for e in examples], np.int32)
    shape = (len(examples), num_choices, max_seq_length)
    return Encoded(_arrays(rows, shape), targets, truncated, extra={"num_choices": num_choices})


def word_pieces(tokenizer: AlbertTokenizer, word: str) -> list[int]:
    """A word's pieces; a word that normalizes to nothing becomes one `<unk>`."""
    return tokenizer.encode(word) or [tokenizer.unk_id]


def encode_tags(
    examples: Sequence[TagExample],
    tokenizer: AlbertTokenizer,
    max_seq_length: int,
    tags: Sequence[str] | None = None,
) -> Encoded:
    """Features of tagged sentences: each word tokenized alone, its first piece carries the tag.

    Words past `max_seq_length` - 2 pieces are cut (counted in `truncated`).
    """
    index = {tag: i for i, tag in enumerate(tags or [])}
    rows, label_rows, word_rows, truncated = [], [], [], 0
    labelled = bool(examples) and all(e.tags is not None for e in examples)
    for example in examples:
        ids, first, words = [], [], []
        for w, word in enumerate(example.words):
            pieces = word_pieces(tokenizer, word)
            if len(ids) + len(pieces) > max_seq_length - 2:
                truncated += 1
                break
            first += [index[example.tags[w]] if labelled else 0] + [IGNORE_LABEL] * (
                len(pieces) - 1
            )
            words += [w] + [-1] * (len(pieces) - 1)
            ids += pieces
        *row, _ = pack(tokenizer, ids, None, max_seq_length)
        rows.append(row)
        padding = max_seq_length - len(ids) - 1
        label_rows.append([IGNORE_LABEL, *first, *[IGNORE_LABEL] * padding])
        word_rows.append([-1, *words, *[-1] * padding])
    targets = (
        np.asarray(label_rows, np.int32).reshape(len(rows), max_seq_length) if labelled else None
    )
    word_index = np.asarray(word_rows, np.int32).reshape(len(rows), max_seq_length)
    return Encoded(_arrays(rows, (len(rows), max_seq_length)), targets, truncated, word_index)
