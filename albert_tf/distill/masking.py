"""Single-token masking of the student's input for the masked-LM loss: 15% of the pieces
between [CLS] and [SEP], at least one; of those 80% [MASK], 10% a random piece, 10% kept; drawn
from a seeded generator so a resumed run draws the same masks.

NumPy alone, no TensorFlow: experiments/distill_gpu.py draws the same masks under torch on a
machine without TensorFlow.
"""

from __future__ import annotations

import numpy as np


def mask_tokens(
    ids: np.ndarray,
    lengths: np.ndarray,
    rng: np.random.Generator,
    *,
    mask_id: int,
    vocab_size: int,
    probability: float = 0.15,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Masks a padded int32 batch `ids` [B, S] whose row i holds `lengths[i]` tokens ([CLS] ...
    [SEP]). Returns (masked ids [B, S], positions [B, P], labels [B, P], weights [B, P]) with P
    the most positions any row masked; padding positions have weight 0."""
    masked = ids.copy()
    rows = []
    for length in lengths:
        inner = np.arange(1, max(int(length) - 1, 1))  # between [CLS] and [SEP]
        if int(length) < 3:
            rows.append(np.zeros([0], np.int64))
            continue
        count = max(1, int(round(len(inner) * probability)))
        rows.append(np.sort(rng.choice(inner, size=count, replace=False)))
    width = max(1, max(len(r) for r in rows))
    positions = np.zeros([len(ids), width], np.int32)
    labels = np.zeros([len(ids), width], np.int32)
    weights = np.zeros([len(ids), width], np.float32)
    for i, chosen in enumerate(rows):
        positions[i, : len(chosen)] = chosen
        labels[i, : len(chosen)] = ids[i, chosen]
        weights[i, : len(chosen)] = 1.0
        draw = rng.random(len(chosen))
        masked[i, chosen[draw < 0.8]] = mask_id
        random_pos = chosen[(draw >= 0.8) & (draw < 0.9)]
        masked[i, random_pos] = rng.integers(5, vocab_size, size=len(random_pos))
    return masked, positions, labels, weights
