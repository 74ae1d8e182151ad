"""The losses a student learns by, and the masking of its masked-LM loss.

- `embedding_loss`: the squared distance between the projected pooled output and the teacher's
  normalized embedding, summed over the embedding and averaged over the batch (Reimers and
  Gurevych 2020's MSE, per sentence; a distance of 2 is opposite, 0 equal).
- `soft_target_loss`: Hinton et al. 2015: cross-entropy of the student's softmax(logits / T)
  against the teacher's, times T² so its gradients keep their size as T changes.
- `label_loss`: the hard-label term beside it, for the texts that come with a label (a fine-tuned
  teacher's own training data).
- `mask_tokens`: single-token masking of the student's input for the masked-LM loss (15% of the
  pieces between [CLS] and [SEP], at least one; of those 80% [MASK], 10% a random piece, 10%
  kept), drawn from a seeded generator so a resumed run draws the same masks.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def embedding_loss(projected: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """Mean over the batch of sum((projected - target)²): float32 [B, H_t] each -> scalar."""
    return tf.reduce_mean(tf.reduce_sum(tf.square(projected - target), axis=-1))


def cosine(projected: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """Mean cosine similarity of the rows of two [B, H_t] tensors."""
    return tf.reduce_mean(
        tf.reduce_sum(tf.math.l2_normalize(projected, -1) * tf.math.l2_normalize(target, -1), -1)
    )


def soft_target_loss(logits: tf.Tensor, teacher_logits: tf.Tensor, temperature: float) -> tf.Tensor:
    """T² · mean over the batch of cross-entropy(softmax(teacher / T), softmax(student / T))."""
    targets = tf.nn.softmax(teacher_logits / temperature, axis=-1)
    log_probs = tf.nn.log_softmax(logits / temperature, axis=-1)
    return temperature**2 * tf.reduce_mean(-tf.reduce_sum(targets * log_probs, axis=-1))


def label_loss(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Sum over the batch of cross-entropy(labels, softmax(logits)) where a label is given,
    divided by the batch size: int32 labels [B], -1 for a text without one."""
    given = labels >= 0
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.maximum(labels, 0), logits=tf.cast(logits, tf.float32)
    )
    return tf.reduce_sum(tf.where(given, losses, 0.0)) / tf.cast(tf.size(labels), tf.float32)


def mlm_loss(logits: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """(weighted mean cross-entropy, accuracy) of MLM logits [B, P, V] against labels [B, P]."""
    weights = tf.cast(weights, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    total = tf.maximum(tf.reduce_sum(weights), 1.0)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    return tf.reduce_sum(losses * weights) / total, tf.reduce_sum(correct * weights) / total


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
