"""Whole-word n-gram masking for the masked-LM objective.

A word is a piece that starts a word ("▁" prefix, or the first piece of a segment) plus the
continuation pieces after it; [CLS] and [SEP] are never candidates. As in the original, n is
drawn in [1, ngram] with p(n) ∝ 1/n, each selected piece becomes [MASK] with p = 0.8, a
uniformly random vocabulary id with p = 0.1 and stays itself with p = 0.1, the budget is
min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob))), and positions are
returned sorted.

How n-grams are placed differs from the original on purpose. The original walks candidate starts
in random order and shrinks or skips an n-gram that overlaps an earlier one or overflows the
budget, so the n-grams it actually masks are shorter than p(n) says (about 65/24/11% instead of
55/27/18% at 64 tokens). Here each drawn n is kept: its n-gram is placed uniformly among the
starts where it fits without overlap and within `max_predictions_per_seq` pieces; drawing stops once the count reaches the budget minus the expected overshoot of the last
n-gram (after at least one n-gram), so the mean masked count is close to the budget. Whether another n-gram is drawn depends only on the ones before
it, hence the lengths of masked n-grams follow p(n). Only if an instance's first n-gram fits
nowhere (a very short instance) is n shrunk, so every instance gets at least one prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MaskedInstance:
    """`input_ids` after masking (int32 [L]), the sorted `positions` (int32 [K]), their original
    ids `labels` (int32 [K]) and the length in words of every n-gram masked (`ngram_lengths`)."""

    input_ids: np.ndarray
    positions: np.ndarray
    labels: np.ndarray
    ngram_lengths: list[int]


class NgramMasker:
    """Draws n-gram whole-word masks.

    Args:
      word_start: bool [vocab_size]; True where the piece begins a word.
      mask_id: the [MASK] id.
      max_predictions_per_seq: hard cap on masked pieces per instance.
      masked_lm_prob: fraction of an instance's tokens (specials included, as the original) to mask.
      ngram: the largest n.
    """

    def __init__(
        self,
        word_start: np.ndarray,
        mask_id: int,
        max_predictions_per_seq: int,
        masked_lm_prob: float = 0.15,
        ngram: int = 3,
    ):
        self.word_start = np.asarray(word_start, dtype=bool)
        self.vocab_size = len(self.word_start)
        self.mask_id = mask_id
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.ngram = ngram
        n = np.arange(1, ngram + 1)
        p = (1.0 / n) / (1.0 / n).sum()
        self.ngram_cdf = np.cumsum(p)
        # E[n^2] / E[n]: the size-biased mean n. Stopping at budget - E[n^2]/E[n] * pieces/2
        # centres the final count on the budget (renewal theory: the n-gram that crosses a
        # threshold is size-biased, and on average half of it lies beyond the threshold).
        self._size_biased_n = float((p * n * n).sum() / (p * n).sum())

    def budget(self, num_tokens: int) -> int:
        """How many pieces an instance of `num_tokens` tokens should get masked."""
        if self.masked_lm_prob <= 0:
            return 0
        wanted = max(1, int(round(num_tokens * self.masked_lm_prob)))
        return min(self.max_predictions_per_seq, wanted)

    def mask(
        self, tokens: np.ndarray, maskable: np.ndarray, rng: np.random.Generator
    ) -> MaskedInstance:
        """Masks one instance.

        Args:
          tokens: int32 [L], e.g. `[CLS] A [SEP] B [SEP]`.
          maskable: int positions (ascending) that may be masked; a position whose predecessor is
            not maskable (a segment start) always begins a word.
          rng: the instance's generator.
        """
        maskable = np.asarray(maskable)
        budget = self.budget(len(tokens))
        if budget == 0 or len(maskable) == 0:
            empty = np.zeros(0, np.int32)
            return MaskedInstance(tokens.copy(), empty, empty, [])
        starts = self.word_start[tokens[maskable]]
        starts[0] = True
        starts[1:] |= np.diff(maskable) > 1
        bounds = np.append(
            np.flatnonzero(starts), len(maskable)
        )  # word w: [bounds[w], bounds[w+1])
        num_words = len(bounds) - 1
        sizes = np.diff(bounds)
        mean = len(maskable) / num_words
        var = float(np.dot(sizes, sizes)) / num_words - mean * mean
        # Pieces X of an n-gram: E[X] = E[n] mean, E[X^2] = E[n] var + E[n^2] mean^2; the
        # expected overshoot past a threshold is about E[X^2] / (2 E[X]).
        stop_at = budget - (var / mean + self._size_biased_n * mean) / 2
        covered = np.zeros(num_words + 1, np.int32)  # cumulative count of covered words
        count = 0
        ngram_lengths: list[int] = []
        # Each round masks at least one piece or ends the loop: budget + 1 draws always suffice.
        drawn = (np.searchsorted(self.ngram_cdf, rng.random(budget + 1), side="right") + 1).tolist()
        for n in drawn:
            if ngram_lengths and count >= stop_at:
                break
            room = self.max_predictions_per_seq - count
            candidates = self._fits(bounds, covered, n, room)
            if len(candidates) == 0:
                if ngram_lengths:
                    break
                while len(candidates) == 0 and n > 1:
                    n -= 1
                    candidates = self._fits(bounds, covered, n, room)
                if len(candidates) == 0:
                    break
                stop_at = 0
            w = int(candidates[rng.integers(len(candidates))])
            covered[w + 1 : w + n] += np.arange(1, n, dtype=np.int32)
            covered[w + n :] += n
            count += int(bounds[w + n] - bounds[w])
            ngram_lengths.append(n)
        word_covered = np.diff(covered) > 0
        selected = np.repeat(word_covered, np.diff(bounds))
        positions = maskable[selected].astype(np.int32)
        labels = tokens[positions].astype(np.int32)
        output = tokens.copy()
        u = rng.random(len(positions))
        output[positions[u < 0.8]] = self.mask_id
        replaced = positions[u >= 0.9]
        output[replaced] = rng.integers(0, self.vocab_size, size=len(replaced))
        return MaskedInstance(output, positions, labels, ngram_lengths)

    @staticmethod
    def _fits(bounds: np.ndarray, covered: np.ndarray, n: int, room: int) -> np.ndarray:
        """Start words of n-grams that lie inside the instance, overlap no covered word and hold
        at most `room` pieces."""
        free = covered[n:] == covered[:-n]
        small = bounds[n:] - bounds[:-n] <= room
        return np.flatnonzero(free & small)
