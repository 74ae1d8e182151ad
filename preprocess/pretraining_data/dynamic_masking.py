"""Dynamic masking in the `tf.data` pipeline: masks re-drawn every epoch (RoBERTa-style).

Reads records written with `create_pretraining_data(..., mask=False)` (`--no-mask`: unmasked
`input_ids`, `input_mask`, `segment_ids`, `token_boundary`, `next_sentence_labels`) and produces
the seven features of masked records, with the same n-gram scheme as `masking.NgramMasker`
(whole words, p(n) ∝ 1/n kept, 80/10/10, sorted positions padded to max_predictions_per_seq),
drawn with stateless random ops from a per-example seed. Pure TensorFlow (no py_function), so it
runs in parallel `map` calls and serializes with the dataset.

    ds = tf.data.TFRecordDataset(files).map(lambda r: format.parse_unmasked(r, 128))
    ds = dynamically_masked(ds.repeat(), seed=1, vocab_size=30000, mask_id=4, cls_id=2,
                            sep_id=3, max_predictions_per_seq=20)
"""

from __future__ import annotations

import tensorflow as tf


def _fits(cum_covered: tf.Tensor, bounds: tf.Tensor, n: tf.Tensor, room: tf.Tensor) -> tf.Tensor:
    """bool [W + 1 - n]: start words of n-grams that are uncovered and hold <= room pieces."""
    free = tf.equal(cum_covered[n:], cum_covered[:-n])
    small = bounds[n:] - bounds[:-n] <= room
    return free & small


def dynamic_mask(
    features: dict[str, tf.Tensor],
    seed: tf.Tensor,
    *,
    vocab_size: int,
    mask_id: int,
    cls_id: int,
    sep_id: int,
    max_predictions_per_seq: int,
    masked_lm_prob: float = 0.15,
    ngram: int = 3,
) -> dict[str, tf.Tensor]:
    """Masks one unbatched example.

    Args:
      features: `format.parse_unmasked` output: int64 `input_ids`, `input_mask`, `segment_ids`,
        `token_boundary` [S] (1 where a piece begins a word) and `next_sentence_labels` [1].
      seed: int32/int64 [2], the example's stateless seed (a new one per epoch gives new masks).

    Returns int64 `input_ids` (masked), `input_mask`, `segment_ids` [S], `masked_lm_positions`,
    `masked_lm_ids` [P], float32 `masked_lm_weights` [P] and `next_sentence_labels` [1], the
    features of masked records.
    """
    ids = tf.cast(features["input_ids"], tf.int64)
    input_mask = tf.cast(features["input_mask"], tf.int64)
    boundary = tf.cast(features["token_boundary"], tf.int64)
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=4)

    maskable = (input_mask > 0) & tf.not_equal(ids, cls_id) & tf.not_equal(ids, sep_id)
    word_of, num_words, sizes, bounds = _words(maskable, boundary)

    covered = _covered_words(
        input_mask, sizes, bounds, num_words, seeds, max_predictions_per_seq, masked_lm_prob, ngram
    )
    covered_pos = tf.gather(
        tf.concat([covered, [False]], 0), tf.where(maskable, word_of, num_words)
    )
    positions = tf.where(covered_pos)[:, 0]  # [K] ascending
    masked_ids, positions, labels, weights = _replaced(
        ids, positions, seeds, vocab_size, mask_id, max_predictions_per_seq
    )
    return {
        "input_ids": masked_ids,
        "input_mask": input_mask,
        "segment_ids": tf.cast(features["segment_ids"], tf.int64),
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "next_sentence_labels": tf.cast(features["next_sentence_labels"], tf.int64),
    }


def _covered_words(
    input_mask: tf.Tensor,
    sizes: tf.Tensor,
    bounds: tf.Tensor,
    num_words: tf.Tensor,
    seeds: tf.Tensor,
    max_predictions_per_seq: int,
    masked_lm_prob: float,
    ngram: int,
) -> tf.Tensor:
    """Which of the `num_words` words (`_words`) the n-grams cover, bool [W]: n drawn with
    p(n) ∝ 1/n by `seeds[0]`, placed where they fit by `seeds[1]`, until the budget of
    `masked_lm_prob` of the tokens (at most `max_predictions_per_seq`) is reached."""
    num_tokens = tf.reduce_sum(input_mask)
    wanted = tf.maximum(
        tf.constant(1.0, tf.float64), tf.round(tf.cast(num_tokens, tf.float64) * masked_lm_prob)
    )
    budget = tf.minimum(tf.cast(wanted, tf.int32), max_predictions_per_seq)
    if masked_lm_prob <= 0:
        budget = tf.constant(0)
    size_f = tf.cast(sizes, tf.float64)
    mean = tf.reduce_mean(size_f)
    var = tf.reduce_mean(tf.square(size_f)) - tf.square(mean)
    p = [1.0 / n for n in range(1, ngram + 1)]
    size_biased_n = (ngram + 1) / 2  # E[n^2] / E[n] when p(n) ∝ 1/n (see masking.NgramMasker)
    stop_at = tf.cast(budget, tf.float64) - (var / mean + size_biased_n * mean) / 2
    drawn = (
        tf.random.stateless_categorical(
            tf.math.log([p]), max_predictions_per_seq + 1, seed=seeds[0], dtype=tf.int32
        )[0]
        + 1
    )

    def condition(i, count, covered, done):
        first = tf.equal(i, 0)
        go_on = first | (tf.cast(count, tf.float64) < stop_at)
        return (i <= budget) & ~done & go_on & (budget > 0) & (num_words > 0)

    lengths = tf.range(1, ngram + 1)

    def body(i, count, covered, done):
        n = drawn[i]
        room = max_predictions_per_seq - count
        cum = tf.concat([[0], tf.cumsum(tf.cast(covered, tf.int32))], axis=0)  # [W + 1]
        has_place = tf.stack(
            [tf.reduce_any(_fits(cum, bounds, k, room)) for k in range(1, ngram + 1)]
        )  # [ngram]
        # Only the first n-gram may shrink (so every instance gets a prediction); a later one
        # that fits nowhere ends the masking.
        first = tf.equal(i, 0)
        shrunk = tf.reduce_max(tf.where(has_place & (lengths <= n), lengths, 0))
        k = tf.where(first, shrunk, tf.where(has_place[n - 1], n, 0))
        ok = k > 0
        k = tf.maximum(k, 1)
        places = tf.cast(tf.where(_fits(cum, bounds, k, room))[:, 0], tf.int32)
        u = tf.random.stateless_uniform(
            [], seed=tf.random.experimental.stateless_fold_in(seeds[1], i)
        )
        pick = tf.cast(tf.floor(u * tf.cast(tf.size(places), tf.float32)), tf.int32)
        w = tf.gather(places, tf.clip_by_value(pick, 0, tf.maximum(tf.size(places) - 1, 0)))
        w = tf.where(ok, w, 0)
        words = tf.range(num_words)
        new = (words >= w) & (words < w + k) & ok
        added = tf.where(ok, bounds[w + k] - bounds[w], 0)
        return i + 1, count + added, covered | new, ~ok | (first & (k < n))

    _, _, covered, _ = tf.while_loop(
        condition,
        body,
        (tf.constant(0), tf.constant(0), tf.zeros([num_words], tf.bool), tf.constant(False)),
        maximum_iterations=max_predictions_per_seq + 1,
    )
    return covered


def _words(maskable: tf.Tensor, boundary: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """The whole words among the `maskable` positions [S] (`boundary` 1 where a piece begins a
    word): (each position's word index [S], the number of words W, each word's size [W], the
    words' bounds [W + 1]: word w is positions [bounds[w], bounds[w + 1]) among the maskable)."""
    previous = tf.concat([[False], maskable[:-1]], axis=0)
    starts = maskable & ((boundary > 0) | ~previous)
    word_of = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # word index of each position
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32))
    sizes = tf.math.unsorted_segment_sum(
        tf.cast(maskable, tf.int32), tf.where(maskable, word_of, num_words), num_words + 1
    )[:num_words]
    bounds = tf.concat([[0], tf.cumsum(sizes)], axis=0)  # word w: [bounds[w], bounds[w+1])
    return word_of, num_words, sizes, bounds


def _replaced(
    ids: tf.Tensor,
    positions: tf.Tensor,
    seeds: tf.Tensor,
    vocab_size: int,
    mask_id: int,
    max_predictions_per_seq: int,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """(`ids` [S] with the chosen `positions` [K] replaced 80% [MASK] / 10% random / 10% kept
    by `seeds[2]` and `seeds[3]`; the positions, their original ids and float32 weights 1.0,
    each padded with zeros to [max_predictions_per_seq])."""
    labels = tf.gather(ids, positions)
    num = tf.size(positions)
    u = tf.random.stateless_uniform([num], seed=seeds[2])
    random_ids = tf.random.stateless_uniform(
        [num], seed=seeds[3], minval=0, maxval=vocab_size, dtype=tf.int64
    )
    replacement = tf.where(
        u < 0.8, tf.cast(mask_id, tf.int64), tf.where(u < 0.9, labels, random_ids)
    )
    pad = max_predictions_per_seq - num
    return (
        tf.tensor_scatter_nd_update(ids, positions[:, None], replacement),
        tf.pad(positions, [[0, pad]]),
        tf.pad(labels, [[0, pad]]),
        tf.pad(tf.ones([num], tf.float32), [[0, pad]]),
    )


def dynamically_masked(dataset: tf.data.Dataset, seed: int, **mask_args) -> tf.data.Dataset:
    """Maps `dynamic_mask` over a dataset of `format.parse_unmasked` examples (unbatched).

    Each element gets its own seed from `tf.data.Dataset.random(seed)`, so a repeated dataset
    gets new masks every epoch and the whole stream is reproducible. `mask_args` are the
    keyword arguments of `dynamic_mask`.
    """
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    return tf.data.Dataset.zip((dataset, seeds)).map(
        lambda features, s: dynamic_mask(features, s, **mask_args),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
