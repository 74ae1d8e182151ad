"""Windows over long texts (classify, regress, tag): in Python for files, in the graph for serving.

A text of n tokens becomes windows of `room` tokens, at most `max_windows` (K) of them: window w
holds tokens [start_w, start_w + room). At `stride` tokens between starts a text needs
1 + ceil(max(n - room, 0) / stride) windows; a text that needs at most K gets exactly those
(start_w = w * stride), whatever the placement. A longer text gets K windows placed by
`window_placement` (`window_starts` holds the formulas): `head` (the first K, the rest of the
text is cut), `spread` (K evenly spaced from the first token to the last) or `head-tail` (half
at the head, half ending on the last token). Tokens in no window are counted and reported.

Each window is packed as `[CLS] window [SEP]` (room = max_seq_length - 2); for a text pair, text
A is cut to `first_segment_bound` tokens and kept whole in every window of text B,
`[CLS] A [SEP] window of B [SEP]` (room = max_seq_length - 3 - len(A)). Features are
[N, max_windows, S]; windows a text does not need are all zeros (input_mask 0), which is how the
model tells them apart.

Tagging windows a sentence's word pieces the same way (`encode_tag_windows`). The stride
defaults to half the room: every token away from the text's ends then sits in the
middle half of some window, with context on both sides of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from albert_tf.errors import ConfigError
from albert_tf.finetune.data import TagExample, TextExample
from albert_tf.finetune.features import IGNORE_LABEL, INPUT_NAMES, Encoded, pack, word_pieces
from albert_tf.finetune.settings import WINDOW_PLACEMENTS


def first_segment_bound(max_seq_length: int, bound: int | None) -> int:
    """Tokens of text A kept in a windowed pair: `bound` (at most max_seq_length - 4, checked
    by `FinetuneSettings`), by default half the packed room."""
    return (max_seq_length - 3) // 2 if bound is None else bound


def window_stride(room: int, stride: int | None) -> int:
    """The stride used for a text with `room` tokens per window (never past the room)."""
    return min(stride, room) if stride else max(room // 2, 1)


def window_starts(
    num_tokens: int, room: int, stride: int, max_windows: int, placement: str
) -> list[int]:
    """First token of each window a text of `num_tokens` tokens gets (the one definition: the
    graph's `graph_window_plan`, its ONNX twin `albert_tf.export.onnx.windows.window_plan` and any other
    runtime compute exactly these integers).

    With n = num_tokens, K = max_windows, s = stride and needed = 1 + ceil(max(n - room, 0) / s):
    - needed <= K, or K = 1 (any placement): start_w = w * s for w < min(needed, K);
    - head:      start_w = w * s for w < K (tokens from (K - 1) * s + room on are cut);
    - spread:    start_w = floor(w * (n - room) / (K - 1)) for w < K: the first window starts on
      the first token, the last ends on the last, the stride is (n - room) / (K - 1);
    - head-tail: h = ceil(K / 2) windows at the head, start_w = w * s for w < h, and K - h at the
      tail ending on the last token, start_w = n - room - (K - 1 - w) * s for w >= h.
    All integers are >= 0 and the starts strictly increase.
    """
    needed = 1 + -(-max(num_tokens - room, 0) // stride)
    if needed <= max_windows or max_windows == 1 or placement == "head":
        return [w * stride for w in range(min(needed, max_windows))]
    span = num_tokens - room  # start of a window ending on the last token
    if placement == "spread":
        return [w * span // (max_windows - 1) for w in range(max_windows)]
    if placement == "head-tail":
        head = -(-max_windows // 2)
        return [
            w * stride if w < head else span - (max_windows - 1 - w) * stride
            for w in range(max_windows)
        ]
    raise ConfigError(
        f"--window-placement must be one of {', '.join(WINDOW_PLACEMENTS)}, got {placement!r}"
    )


def tokens_outside(num_tokens: int, room: int, starts: Sequence[int]) -> int:
    """How many of a text's `num_tokens` tokens are in none of the windows at `starts`."""
    covered, end = 0, 0
    for start in starts:
        stop = min(start + room, num_tokens)
        covered += max(stop - max(start, end), 0)
        end = max(end, stop)
    return num_tokens - covered


@dataclass
class Windowed:
    """Window features int32 [N, max_windows, S] each, the number of texts that lost tokens
    (in no window, or of text A past `first_bound`), and how many tokens those were."""

    inputs: dict[str, np.ndarray]
    texts_cut: int
    tokens_cut: int

    def skipped(self) -> dict[str, int]:
        """The counts as `TaskData.skipped` reports them (finetune.json, stderr)."""
        return cut_report(self.texts_cut, self.tokens_cut)


def cut_report(texts: int, tokens: int) -> dict[str, int]:
    """What windows left out, as `TaskData.skipped` reports it (finetune.json, stderr)."""
    if not texts:
        return {}
    return {"texts with tokens in no window": texts, "tokens in no window": tokens}


def _zero_features(count: int, max_windows: int, max_seq_length: int) -> dict[str, np.ndarray]:
    return {name: np.zeros((count, max_windows, max_seq_length), np.int32) for name in INPUT_NAMES}


def _put(features: dict[str, np.ndarray], n: int, w: int, packed: tuple) -> None:
    """Stores `features.pack`'s (ids, mask, type ids, _) as window w of text n."""
    for name, value in zip(INPUT_NAMES, packed[:3], strict=True):
        features[name][n, w] = value


def encode_windows(
    examples: Sequence[TextExample],
    tokenizer,
    max_seq_length: int,
    max_windows: int,
    stride: int | None,
    first_bound: int | None,
    placement: str,
) -> Windowed:
    """The window features of every example, and what no window holds."""
    inputs = _zero_features(len(examples), max_windows, max_seq_length)
    bound = first_segment_bound(max_seq_length, first_bound)
    texts_cut = tokens_cut = 0
    for n, example in enumerate(examples):
        first, text = None, tokenizer.encode(example.text_a)
        room, cut_first = max_seq_length - 2, 0
        if example.text_b is not None:
            cut_first = max(len(text) - bound, 0)
            first, text = text[:bound], tokenizer.encode(example.text_b)
            room = max_seq_length - 3 - len(first)
        starts = window_starts(len(text), room, window_stride(room, stride), max_windows, placement)
        cut = cut_first + tokens_outside(len(text), room, starts)
        texts_cut, tokens_cut = texts_cut + (cut > 0), tokens_cut + cut
        for w, start in enumerate(starts):
            window = text[start : start + room]
            a, b = (window, None) if first is None else (first, window)
            _put(inputs, n, w, pack(tokenizer, a, b, max_seq_length))
    return Windowed(inputs, texts_cut, tokens_cut)


def encode_tag_windows(
    examples: Sequence[TagExample],
    tokenizer,
    max_seq_length: int,
    max_windows: int,
    stride: int | None,
    tags: Sequence[str] | None,
    placement: str,
) -> Encoded:
    """Tagging features over windows of a sentence's word pieces: inputs, labels and word_index
    [N, max_windows, S] (as `features.encode_tags`: the first piece of a word carries its tag
    and its word's index, in every window that holds that piece). `truncated` counts sentences
    with pieces in no window, `extra["tokens_cut"]` those pieces."""
    inputs = _zero_features(len(examples), max_windows, max_seq_length)
    shape = (len(examples), max_windows, max_seq_length)
    labels, words = np.full(shape, IGNORE_LABEL, np.int32), np.full(shape, -1, np.int32)
    index = {tag: i for i, tag in enumerate(tags or [])}
    labelled = bool(examples) and all(e.tags is not None for e in examples)
    room, truncated, tokens_cut = max_seq_length - 2, 0, 0
    for n, example in enumerate(examples):
        ids, piece_labels, piece_words = [], [], []
        for w, word in enumerate(example.words):
            pieces = word_pieces(tokenizer, word)
            ids += pieces
            piece_labels += [index[example.tags[w]] if labelled else IGNORE_LABEL]
            piece_labels += [IGNORE_LABEL] * (len(pieces) - 1)
            piece_words += [w] + [-1] * (len(pieces) - 1)
        starts = window_starts(len(ids), room, window_stride(room, stride), max_windows, placement)
        cut = tokens_outside(len(ids), room, starts)
        truncated, tokens_cut = truncated + (cut > 0), tokens_cut + cut
        for k, start in enumerate(starts):
            window = slice(start, start + room)
            size = len(ids[window])
            _put(inputs, n, k, pack(tokenizer, ids[window], None, max_seq_length))
            labels[n, k, 1 : 1 + size] = piece_labels[window]
            words[n, k, 1 : 1 + size] = piece_words[window]
    encoded = Encoded(inputs, labels if labelled else None, truncated, words)
    encoded.extra["tokens_cut"] = tokens_cut
    return encoded


def graph_window_plan(num_tokens, room, max_windows: int, stride: int | None, placement: str):
    """`window_starts` in the graph, per text: int64 [B] token counts and rooms in; first token
    of every window int64 [B, K] and whether the text has that window bool [B, K] out."""
    given = tf.constant(stride or 1, tf.int64)
    steps = tf.minimum(given, room) if stride else tf.maximum(room // 2, 1)  # [B]
    needed = 1 + (tf.maximum(num_tokens - room, 0) + steps - 1) // steps  # [B]
    window = tf.range(max_windows, dtype=tf.int64)[tf.newaxis]  # [1, K]
    starts = window * steps[:, tf.newaxis]  # [B, K]: head
    if placement != "head" and max_windows > 1:
        span = (num_tokens - room)[:, tf.newaxis]  # [B, 1]
        if placement == "spread":
            placed = window * span // (max_windows - 1)  # [B, K]
        else:  # head-tail
            tail = span - (max_windows - 1 - window) * steps[:, tf.newaxis]  # [B, K]
            placed = tf.where(window < (max_windows + 1) // 2, starts, tail)
        starts = tf.where((needed > max_windows)[:, tf.newaxis], placed, starts)
    return starts, window < tf.minimum(needed, max_windows)[:, tf.newaxis]


def graph_windows(
    first,
    text,
    max_seq_length: int,
    max_windows: int,
    stride: int | None,
    first_bound: int | None,
    pack_segments: Callable[[list], dict],
    placement: str,
) -> dict:
    """The features of `encode_windows` in the graph: token ids tf.RaggedTensor [B, (n)] of text
    A (None for single texts) and of the windowed text in; int32 [B, max_windows, S] each out.
    `pack_segments` packs a list of [M, (n)] segments into int32 [M, S] features."""
    text = tf.cast(text, tf.int64)
    batch = text.nrows()
    length, windows = max_seq_length, max_windows
    if first is None:
        room = tf.fill([batch], tf.constant(length - 2, tf.int64))  # [B]
    else:
        first = tf.cast(first, tf.int64)[:, : first_segment_bound(length, first_bound)]
        room = length - 3 - first.row_lengths()  # [B]
    num_tokens = text.row_lengths()  # [B]
    starts, exists = graph_window_plan(num_tokens, room, windows, stride, placement)  # [B, K]
    offset = tf.range(length, dtype=tf.int64)[tf.newaxis, tf.newaxis]  # [1, 1, S]
    positions = starts[:, :, tf.newaxis] + offset  # [B, K, S]
    keep = (
        (offset < room[:, tf.newaxis, tf.newaxis])
        & (positions < num_tokens[:, tf.newaxis, tf.newaxis])
        & exists[:, :, tf.newaxis]
    )  # [B, K, S]
    dense = tf.pad(text.to_tensor(), [[0, 0], [0, 1]])  # [B, n_max + 1]: never empty
    safe = tf.minimum(positions, tf.shape(dense, out_type=tf.int64)[1] - 1)
    ids = tf.gather(dense, tf.reshape(safe, [batch, -1]), batch_dims=1)  # [B, K * S]
    ids = tf.reshape(ids, [batch, windows, length])  # [B, K, S]
    pieces = tf.ragged.boolean_mask(ids, keep).merge_dims(0, 1)  # [B * K, (room)]
    segments = [pieces]
    if first is not None:
        segments = [tf.gather(first, tf.repeat(tf.range(batch), windows)), pieces]
    packed = pack_segments(segments)  # [B * K, S] each
    present = tf.cast(tf.reshape(exists, [-1, 1]), tf.int32)  # [B * K, 1]
    return {k: tf.reshape(v * present, [-1, windows, length]) for k, v in packed.items()}


def window_outputs(encode: Callable[[dict], object], inputs: dict):
    """Runs `encode` (features [W, S] -> outputs [W, ...]) on the real windows of inputs
    [B, K, S] only; outputs [B, K, ...], zeros for the windows a text does not have."""
    shape = tf.shape(inputs["input_word_ids"])  # [B, K, S]
    flat = {k: tf.reshape(v, [-1, shape[2]]) for k, v in inputs.items()}  # [B * K, S]
    present = flat["input_mask"][:, 0] > 0  # [B * K]; [CLS] is in every real window
    outputs = encode({k: tf.boolean_mask(v, present) for k, v in flat.items()})  # [W, ...]
    inner = tf.shape(outputs)[1:]
    full = tf.scatter_nd(
        tf.where(present), outputs, tf.cast(tf.concat([[shape[0] * shape[1]], inner], 0), tf.int64)
    )  # [B * K, ...]
    return tf.reshape(full, tf.concat([shape[:2], inner], 0))  # [B, K, ...]


def pool_windows(encode: Callable[[dict], object], inputs: dict, pooling: str):
    """`window_outputs` of outputs [W, D], pooled over each text's real windows: float [B, D]."""
    outputs = window_outputs(encode, inputs)  # [B, K, D]
    present = inputs["input_mask"][:, :, :1] > 0  # [B, K, 1]
    if pooling == "max":
        return tf.reduce_max(tf.where(present, outputs, outputs.dtype.min), axis=1)
    count = tf.reduce_sum(tf.cast(present, outputs.dtype), axis=1)  # [B, 1]
    return tf.reduce_sum(outputs, axis=1) / tf.maximum(count, 1.0)
