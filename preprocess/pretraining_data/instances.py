"""Sentence-order-prediction pairs from one tokenized document (the original's chunking).

A document is a list of sentences, each an int array of token ids. Sentences are gathered into a
chunk until it reaches a target length; a random prefix of the chunk is segment A, the rest is
segment B (the actual next text), and A and B are swapped with probability 0.5 (label 1 =
swapped, the original's `next_sentence_labels` convention for ALBERT).

Where the original falls back to a random *other* document (a chunk of a single sentence, an NSP
remnant that always gets label 1), we split that sentence at a random token instead and apply the
same swap, so SOP labels stay balanced and a document never needs another one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SentencePair:
    """One unmasked instance: `tokens_a`, `tokens_b` (int32 ids, already truncated) and the SOP
    label (1 if A and B were swapped)."""

    tokens_a: np.ndarray
    tokens_b: np.ndarray
    label: int


def truncated_lengths(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """Lengths after the original `truncate_seq_pair`: repeatedly drop one token from the longer
    segment (from B on a tie) until `len_a + len_b <= max_num_tokens`."""
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return len_a, len_b
    first = min(excess, abs(len_a - len_b))
    if len_a > len_b:
        len_a -= first
    else:
        len_b -= first
    rest = excess - first
    return len_a - rest // 2, len_b - (rest + 1) // 2


def _truncate(tokens: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
    """Drops tokens one at a time from the front or the back with p = 0.5 each (as the original);
    the number dropped from the front is therefore Binomial(removed, 0.5)."""
    removed = len(tokens) - length
    if removed <= 0:
        return tokens
    front = int(rng.binomial(removed, 0.5))
    return tokens[front : front + length]


def create_sentence_pairs(
    sentences: list[np.ndarray],
    max_seq_length: int,
    short_seq_prob: float,
    rng: np.random.Generator,
) -> list[SentencePair]:
    """SOP pairs from one document, as the original `create_instances_from_document` (SOP mode).

    Args:
      sentences: the document's non-empty sentences as int32 id arrays.
      max_seq_length: the length of `[CLS] A [SEP] B [SEP]` after truncation is at most this.
      short_seq_prob: probability of drawing a shorter target length in [2, max_seq_length - 3]
        for the whole document.
      rng: the document's generator (all randomness comes from it).
    """
    max_num_tokens = max_seq_length - 3
    target = max_num_tokens
    if rng.random() < short_seq_prob:
        target = int(rng.integers(2, max_num_tokens + 1))
    pairs = []
    chunk: list[np.ndarray] = []
    length = 0
    for i, sentence in enumerate(sentences):
        chunk.append(sentence)
        length += len(sentence)
        if i < len(sentences) - 1 and length < target:
            continue
        if len(chunk) >= 2:
            a_end = int(rng.integers(1, len(chunk)))
            tokens_a = np.concatenate(chunk[:a_end])
            tokens_b = np.concatenate(chunk[a_end:])
        elif len(chunk[0]) >= 2:
            split = int(rng.integers(1, len(chunk[0])))
            tokens_a, tokens_b = chunk[0][:split], chunk[0][split:]
        else:
            chunk, length = [], 0
            continue
        label = int(rng.random() < 0.5)
        if label:
            tokens_a, tokens_b = tokens_b, tokens_a
        len_a, len_b = truncated_lengths(len(tokens_a), len(tokens_b), max_num_tokens)
        pairs.append(
            SentencePair(_truncate(tokens_a, len_a, rng), _truncate(tokens_b, len_b, rng), label)
        )
        chunk, length = [], 0
    return pairs
