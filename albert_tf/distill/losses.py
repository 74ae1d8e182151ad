"""The losses a student learns by.

- `embedding_loss`: the squared distance between the projected pooled output and the teacher's
  normalized embedding, summed over the embedding and averaged over the batch (Reimers and
  Gurevych 2020's MSE, per sentence; a distance of 2 is opposite, 0 equal).
- `soft_target_loss`: Hinton et al. 2015: cross-entropy of the student's softmax(logits / T)
  against the teacher's, times T² so its gradients keep their size as T changes.
- `label_loss`: the hard-label term beside it, for the texts that come with a label (a fine-tuned
  teacher's own training data).

The masking of the student's input for the masked-LM loss is `albert_tf.distill.masking`'s.
"""

from __future__ import annotations

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
