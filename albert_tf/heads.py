"""Pretraining heads: masked-LM (decoder tied to the word embeddings) and sentence order."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.activations import get_activation
from albert_tf.config import AlbertConfig
from albert_tf.layers.embeddings import layer_norm, truncated_normal


@keras.utils.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """`cls/predictions`: dense H->E with `hidden_act` (`transform/dense`), `transform/LayerNorm`,
    logits = x · embedding_tableᵀ + `output_bias`.

    Call: `sequence_output [B, S, H]`, `masked_lm_positions` int32 [B, P] or None (all S
    positions) -> float32 logits [B, P, V]. `embedding_table` is the encoder's [V, E] word
    embeddings (tracked here too, so this layer's own weights include it). Without one (a head
    rebuilt by `from_config`: a variable cannot be serialized) the head makes its own [V, E]
    table, untied, in the same place among its weights, so `set_weights` fills it.
    """

    def __init__(
        self, config: AlbertConfig, embedding_table: tf.Variable | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("name", "cls/predictions")
        super().__init__(**kwargs)
        self.config = config
        if embedding_table is None:
            with tf.init_scope(), tf.name_scope(self.name):
                embedding_table = self.add_weight(
                    "embedding_table",
                    shape=[config.vocab_size, config.embedding_size],
                    initializer=truncated_normal(config),
                )
        self.embedding_table = embedding_table
        self.transform = keras.layers.Dense(
            config.embedding_size,
            activation=get_activation(config.hidden_act),
            kernel_initializer=truncated_normal(config),
            name="transform/dense",
        )
        self.transform_norm = layer_norm("transform/LayerNorm")
        with tf.init_scope(), tf.name_scope(self.name):
            self.output_bias = self.add_weight(
                "output_bias", shape=[config.vocab_size], initializer="zeros"
            )
            self.call(tf.zeros([1, 1, config.hidden_size]))
        self.built = True

    def call(
        self, sequence_output: tf.Tensor, masked_lm_positions: tf.Tensor | None = None
    ) -> tf.Tensor:
        x = sequence_output
        if masked_lm_positions is not None:
            x = tf.gather(x, tf.cast(masked_lm_positions, tf.int32), batch_dims=1)  # [B, P, H]
        x = tf.cast(x, self.compute_dtype)
        x = tf.cast(self.transform_norm(self.transform(x)), self.compute_dtype)  # [B, P, E]
        table = tf.cast(self.embedding_table, self.compute_dtype)
        logits = tf.einsum("bpe,ve->bpv", x, table)  # [B, P, V]
        return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

    def get_config(self) -> dict[str, Any]:
        """The config without the table (a variable): from_config makes an untied one."""
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MaskedLMHead:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)


@keras.utils.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(keras.layers.Layer):
    """`cls/seq_relationship`: logits = pooled · `output_weights`ᵀ + `output_bias`.

    `output_weights` is [2, H] as in the original. Call: `pooled_output [B, H]` -> float32
    logits [B, 2]; label 1 means the two segments were swapped.
    """

    def __init__(self, config: AlbertConfig, **kwargs: Any) -> None:
        kwargs.setdefault("name", "cls/seq_relationship")
        super().__init__(**kwargs)
        self.config = config
        with tf.init_scope(), tf.name_scope(self.name):
            self.output_weights = self.add_weight(
                "output_weights",
                shape=[2, config.hidden_size],
                initializer=truncated_normal(config),
            )
            self.output_bias = self.add_weight("output_bias", shape=[2], initializer="zeros")
        self.built = True

    def call(self, pooled_output: tf.Tensor) -> tf.Tensor:
        x = tf.cast(pooled_output, self.compute_dtype)
        logits = tf.matmul(x, self.output_weights, transpose_b=True)  # [B, 2]
        return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> SentenceOrderHead:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
