"""Factorized embeddings: word, position and token-type tables of width E, LayerNorm, dropout."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.layers import fused
from albert_tf.layers.dropout import Dropout

LAYER_NORM_EPSILON = 1e-12


def truncated_normal(config: AlbertConfig) -> keras.initializers.Initializer:
    """The original's initializer: truncated normal with stddev `initializer_range`."""
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


@keras.utils.register_keras_serializable(package="albert_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """LayerNormalization over the last axis with Keras's variables (`gamma`, `beta`), computed
    as `(x - mean) * (gamma / sqrt(var + eps)) + beta` with the variance taken from the centered
    values: five elementwise passes instead of Keras's seven (its fused kernel needs
    eps >= 1e-5; ALBERT's is 1e-12), and no cancellation in the variance. In a graph traced
    inside `fused.fused_cpu_inference()`, one oneDNN kernel instead."""

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        x = tf.cast(inputs, self.compute_dtype)
        if fused.active() and x.shape.rank in (2, 3):
            gamma, beta = tf.cast(self.gamma, x.dtype), tf.cast(self.beta, x.dtype)
            return fused.layer_norm(x, gamma, beta, self.epsilon)
        centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
        variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
        scale = tf.math.rsqrt(variance + self.epsilon) * tf.cast(self.gamma, x.dtype)
        return centered * scale + tf.cast(self.beta, x.dtype)


def layer_norm(name: str) -> LayerNorm:
    """LayerNorm over the last axis, computed in float32 even under a mixed-precision policy."""
    return LayerNorm(axis=-1, epsilon=LAYER_NORM_EPSILON, dtype="float32", name=name)


class AlbertEmbeddings(keras.layers.Layer):
    """Sum of word, position and token-type embeddings (width E), then LayerNorm and dropout.

    Variables mirror `bert/embeddings/*`: `word_embeddings [V,E]`, `token_type_embeddings [T,E]`,
    `position_embeddings [P,E]`, `LayerNorm/{gamma,beta}`. Output: [B, S, E] in the compute dtype.
    """

    def __init__(self, config: AlbertConfig, **kwargs: Any) -> None:
        kwargs.setdefault("name", "embeddings")
        super().__init__(**kwargs)
        self.config = config
        self.layer_norm = layer_norm("LayerNorm")
        self.dropout = Dropout(config.hidden_dropout_prob)

    def build(self, input_shape: Any) -> None:
        e = self.config.embedding_size
        self.word_embeddings = self.add_weight(
            "word_embeddings",
            shape=[self.config.vocab_size, e],
            initializer=truncated_normal(self.config),
        )
        self.token_type_embeddings = self.add_weight(
            "token_type_embeddings",
            shape=[self.config.type_vocab_size, e],
            initializer=truncated_normal(self.config),
        )
        self.position_embeddings = self.add_weight(
            "position_embeddings",
            shape=[self.config.max_position_embeddings, e],
            initializer=truncated_normal(self.config),
        )
        super().build(input_shape)

    def call(
        self, input_word_ids: tf.Tensor, input_type_ids: tf.Tensor, training: bool | None = None
    ) -> tf.Tensor:
        seq_length = tf.shape(input_word_ids)[1]
        x = tf.gather(self.word_embeddings, input_word_ids)  # [B, S, E]
        x += tf.gather(self.token_type_embeddings, input_type_ids)
        x += self.position_embeddings[tf.newaxis, :seq_length]  # [1, S, E]
        x = tf.cast(self.layer_norm(x), self.compute_dtype)
        return self.dropout(x, training=training)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> AlbertEmbeddings:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
