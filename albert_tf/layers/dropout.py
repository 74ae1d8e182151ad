"""Dropout whose randomness can be a pure function of a seed: exact resume and replay.

Keras' Dropout draws from a stateful generator whose state is not part of any checkpoint, so a
resumed run draws other masks than the uninterrupted one. Inside `seeded_dropout(seed)`, every
`Dropout` call made while tracing in this thread (with `training=True`) instead uses
`tf.nn.experimental.stateless_dropout` with a seed folded from `seed` and the number of dropout
calls traced before it in that context. The pretraining step passes a seed derived from
(run seed, step, replica, micro-batch), so each call site of each layer, including a shared
block applied once per layer, gets its own mask, and the masks depend on nothing else: not on the
process, steps per loop, XLA or when the run was interrupted.

Outside the context (Keras `fit`, a TF-Hub module called with `training=True`, fine-tuning) the
layer is exactly keras.layers.Dropout. It has no variables, so checkpoints are unaffected.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import tensorflow as tf
import tf_keras as keras

# Per thread: tf.distribute's MirroredStrategy traces each replica's step in its own thread.
_state = threading.local()


class _Seeds:
    """Hands out one stateless seed per dropout call, in call order."""

    def __init__(self, seed: tf.Tensor) -> None:
        self.seed = seed
        self.calls = 0

    def next(self) -> tf.Tensor:
        self.calls += 1
        return tf.random.experimental.stateless_fold_in(self.seed, self.calls)


def fold_seed(seed: int | tf.Tensor, *values: int | tf.Tensor) -> tf.Tensor:
    """A stateless seed (int32 [2]) from a run seed and any number of integers, in order."""
    folded = tf.stack([tf.cast(seed, tf.int64), tf.constant(0, tf.int64)])
    for value in values:
        folded = tf.random.experimental.stateless_fold_in(folded, tf.cast(value, tf.int64))
    return folded


@contextlib.contextmanager
def seeded_dropout(seed: tf.Tensor) -> Iterator[None]:
    """Within this context (in this thread), `Dropout(training=True)` is stateless; see module."""
    previous = getattr(_state, "seeds", None)
    _state.seeds = _Seeds(seed)
    try:
        yield
    finally:
        _state.seeds = previous


@keras.utils.register_keras_serializable(package="albert_tf")
class Dropout(keras.layers.Dropout):
    """keras.layers.Dropout, stateless inside `seeded_dropout` (see the module docstring)."""

    def call(self, inputs: tf.Tensor, training: Any = None) -> tf.Tensor:
        seeds = getattr(_state, "seeds", None)
        if seeds is None or training is not True or self.rate == 0:
            return super().call(inputs, training=training)
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seeds.next())
