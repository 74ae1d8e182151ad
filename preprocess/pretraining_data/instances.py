"""Instances of one tokenized document for each sentence task (the original's chunking).

A document is a list of sentences, each an int array of token ids. Sentences are gathered into a
chunk until it reaches a target length; what a chunk becomes depends on the sentence task
(`--sentence-task` of create-pretraining-data):

- "sop" (ALBERT, `create_sentence_pairs`): a random prefix of the chunk is segment A, the rest is
  segment B (the actual next text), and A and B are swapped with probability 0.5 (label 1 =
  swapped, the original's `next_sentence_labels` convention for ALBERT). Where the original falls
  back to a random *other* document (a chunk of a single sentence, an NSP remnant that always
  gets label 1), we split that sentence at a random token instead and apply the same swap, so
  SOP labels stay balanced and a document never needs another one.
- "nsp" (BERT, `create_nsp_pairs`): A is a random prefix of the chunk; with probability 0.5 B is
  the rest of the chunk (label 0), otherwise B is text from a random position of another
  document (label 1 = random next) and the chunk's unused sentences are put back.
- "none" (`create_single_segments`): the chunk is one segment, `[CLS] A [SEP]`, for MLM alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SentencePair:
    """One unmasked instance: `tokens_a`, `tokens_b` (int32 ids, already truncated; None for a
    single-segment instance) and the label (SOP: 1 if A and B were swapped; NSP: 1 if B is
    random next text; single segment: 0)."""

    tokens_a: np.ndarray
    tokens_b: np.ndarray | None
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


def _target_length(max_num_tokens: int, short_seq_prob: float, rng: np.random.Generator) -> int:
    """The document's chunk length: `max_num_tokens`, or with probability `short_seq_prob` a
    uniform draw in [2, max_num_tokens]."""
    if rng.random() < short_seq_prob:
        return int(rng.integers(2, max_num_tokens + 1))
    return max_num_tokens


def _chunks(sentences: list[np.ndarray], target: int) -> Iterator[list[np.ndarray]]:
    """Consecutive sentences gathered until they hold `target` tokens (the last chunk: what is
    left), as the original's `create_instances_from_document` gathers its segments."""
    chunk: list[np.ndarray] = []
    length = 0
    for i, sentence in enumerate(sentences):
        chunk.append(sentence)
        length += len(sentence)
        if i == len(sentences) - 1 or length >= target:
            yield chunk
            chunk, length = [], 0


def _pair(
    tokens_a: np.ndarray,
    tokens_b: np.ndarray,
    label: int,
    max_num_tokens: int,
    rng: np.random.Generator,
) -> SentencePair:
    """A and B truncated together to `max_num_tokens` (`truncated_lengths`, random ends)."""
    len_a, len_b = truncated_lengths(len(tokens_a), len(tokens_b), max_num_tokens)
    return SentencePair(_truncate(tokens_a, len_a, rng), _truncate(tokens_b, len_b, rng), label)


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
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    pairs = []
    for chunk in _chunks(sentences, target):
        if len(chunk) >= 2:
            a_end = int(rng.integers(1, len(chunk)))
            tokens_a = np.concatenate(chunk[:a_end])
            tokens_b = np.concatenate(chunk[a_end:])
        elif len(chunk[0]) >= 2:
            split = int(rng.integers(1, len(chunk[0])))
            tokens_a, tokens_b = chunk[0][:split], chunk[0][split:]
        else:
            continue
        label = int(rng.random() < 0.5)
        if label:
            tokens_a, tokens_b = tokens_b, tokens_a
        pairs.append(_pair(tokens_a, tokens_b, label, max_num_tokens, rng))
    return pairs


def _random_text(
    documents: Sequence[list[np.ndarray]], own: int, length: int, rng: np.random.Generator
) -> np.ndarray:
    """Text of a uniformly chosen document other than `documents[own]`, from a uniformly chosen
    sentence on, sentence by sentence until at least `length` tokens (or the document's end)."""
    index = int(rng.integers(len(documents) - 1))
    other = documents[index + (index >= own)]
    taken = []
    total = 0
    for sentence in other[int(rng.integers(len(other))) :]:
        taken.append(sentence)
        total += len(sentence)
        if total >= length:
            break
    return np.concatenate(taken)


def create_nsp_pairs(
    documents: Sequence[list[np.ndarray]],
    own: int,
    max_seq_length: int,
    short_seq_prob: float,
    rng: np.random.Generator,
) -> tuple[list[SentencePair], int]:
    """Next-sentence-prediction pairs from `documents[own]`, as BERT's
    `create_instances_from_document`.

    For each chunk, a fair coin decides the label. Label 0: A is a random prefix of the chunk
    and B the rest of it. Label 1 (random next): A is the same random prefix, B is text from a
    random sentence of a uniformly chosen *other* document of `documents`, filled up to the
    chunk's target length, and the chunk's sentences after A are put back to start the next
    chunk, so no text is wasted. A chunk of one sentence has no prefix to split off: with label
    1 the whole sentence is A (as BERT); with label 0 it is split at a random token (as
    `create_sentence_pairs` does), where BERT would always make it a random-next pair, so the
    labels stay balanced.

    `documents` are the candidates for random text: create-pretraining-data passes the
    documents of the current batch (about 1 MB of text, composed the same way whatever the
    number of workers, so the output does not depend on it). When there is no other document,
    a chunk whose coin says "random next" gets its true continuation (label 0) instead; the
    second returned value counts those chunks.

    Args:
      documents: the candidate documents, each a non-empty list of non-empty int32 sentences.
      own: the index in `documents` of the document to make pairs from.
      max_seq_length: the length of `[CLS] A [SEP] B [SEP]` after truncation is at most this.
      short_seq_prob: as `create_sentence_pairs`.
      rng: the document's generator (all randomness comes from it).

    Returns the pairs, and how many of them got a true continuation for lack of another document.
    """
    sentences = documents[own]
    max_num_tokens = max_seq_length - 3
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    pairs = []
    no_other = 0
    chunk: list[np.ndarray] = []
    length = 0
    i = 0
    while i < len(sentences):
        chunk.append(sentences[i])
        length += len(sentences[i])
        i += 1
        if i < len(sentences) and length < target:
            continue
        random_next = bool(rng.random() < 0.5)
        forced = random_next and len(documents) < 2
        random_next = random_next and not forced
        if len(chunk) >= 2 or random_next:
            a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
            tokens_a = np.concatenate(chunk[:a_end])
            if random_next:
                tokens_b = _random_text(documents, own, target - len(tokens_a), rng)
                i -= len(chunk) - a_end  # the unused sentences start the next chunk
            else:
                tokens_b = np.concatenate(chunk[a_end:])
        elif len(chunk[0]) >= 2:
            split = int(rng.integers(1, len(chunk[0])))
            tokens_a, tokens_b = chunk[0][:split], chunk[0][split:]
        else:
            chunk, length = [], 0
            continue
        no_other += forced
        pairs.append(_pair(tokens_a, tokens_b, int(random_next), max_num_tokens, rng))
        chunk, length = [], 0
    return pairs, no_other


def create_single_segments(
    sentences: list[np.ndarray],
    max_seq_length: int,
    short_seq_prob: float,
    rng: np.random.Generator,
) -> list[SentencePair]:
    """Single-segment instances (`[CLS] A [SEP]`, label 0) from one document, for MLM alone:
    every chunk is one segment of at most `max_seq_length - 2` tokens (a longer chunk is
    truncated at random ends, as pairs are). Arguments as `create_sentence_pairs`."""
    max_num_tokens = max_seq_length - 2
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    segments = []
    for chunk in _chunks(sentences, target):
        tokens = np.concatenate(chunk)
        segments.append(SentencePair(_truncate(tokens, max_num_tokens, rng), None, 0))
    return segments
