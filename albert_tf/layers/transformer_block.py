"""The post-LayerNorm transformer block of ALBERT: attention, then feed-forward network."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.activations import gelu_tanh, get_activation, training_activation
from albert_tf.config import AlbertConfig
from albert_tf.layers import compiled, fast
from albert_tf.layers.attention import SelfAttention, build_dense
from albert_tf.layers.dropout import Dropout
from albert_tf.layers.embeddings import layer_norm, truncated_normal


class FeedForward(keras.layers.Layer):
    """`ffn_1`: dense H->F with `hidden_act` (`intermediate/dense`), dense F->H
    (`intermediate/output/dense`). [B, S, H] -> [B, S, H]."""

    def __init__(self, config: AlbertConfig, **kwargs: Any) -> None:
        kwargs.setdefault("name", "ffn_1")
        super().__init__(**kwargs)
        self.config = config
        self.intermediate = keras.layers.Dense(
            config.intermediate_size,
            activation=get_activation(config.hidden_act),
            kernel_initializer=truncated_normal(config),
            name="intermediate/dense",
        )
        self.output_dense = keras.layers.Dense(
            config.hidden_size,
            kernel_initializer=truncated_normal(config),
            name="intermediate/output/dense",
        )

    def build(self, input_shape: Any) -> None:
        build_dense([self.intermediate], self.config.hidden_size)
        build_dense([self.output_dense], self.config.intermediate_size)
        super().build(input_shape)

    def call(
        self,
        x: tf.Tensor,
        prepared: tuple[tf.Tensor, ...] | None = None,
        training: bool | None = None,
    ) -> tf.Tensor:
        weights = prepared if prepared is not None else fast.ffn_weights(self)
        activation = self.intermediate.activation
        if training is True:
            if activation is gelu_tanh and compiled.active(self.config.hidden_size):
                return fast.feed_forward(x, weights, bias_activation=compiled.bias_gelu)
            # The same activation values with a hand-written gradient.
            activation = training_activation(self.config.hidden_act)
        return fast.feed_forward(x, weights, activation)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> FeedForward:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)


class TransformerBlock(keras.layers.Layer):
    """One `inner_group_I`: `h = LayerNorm(x + drop(attention_1(x)))`,
    `out = LayerNorm_1(h + drop(ffn_1(h)))`.

    `share_attention_with` / `share_ffn_with` name another block whose attention (with
    `LayerNorm`) or FFN (with `LayerNorm_1`) this block reuses: the `shared_params` ablations.
    Call: `x [B, S, H]`, `bias [B, 1, 1, S]` float32, optionally `prepared` (from
    `fast.block_weights`) -> `[B, S, H]` in the compute dtype.
    """

    def __init__(
        self,
        config: AlbertConfig,
        share_attention_with: TransformerBlock | None = None,
        share_ffn_with: TransformerBlock | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config = config
        # Booleans, not the other block: tracking it would make it a sublayer of this one.
        self.shares_attention = share_attention_with is not None
        self.shares_ffn = share_ffn_with is not None
        if share_attention_with is None:
            self.attention = SelfAttention(config, name="attention_1")
            self.attention_norm = layer_norm("LayerNorm")
        else:
            self.attention = share_attention_with.attention
            self.attention_norm = share_attention_with.attention_norm
        if share_ffn_with is None:
            self.ffn = FeedForward(config, name="ffn_1")
            self.ffn_norm = layer_norm("LayerNorm_1")
        else:
            self.ffn = share_ffn_with.ffn
            self.ffn_norm = share_ffn_with.ffn_norm
        self.dropout = Dropout(config.hidden_dropout_prob)

    def call(
        self,
        x: tf.Tensor,
        bias: tf.Tensor,
        training: bool | None = None,
        prepared: tuple[Any, Any] | None = None,
    ) -> tf.Tensor:
        attention_weights, ffn_weights = prepared if prepared is not None else (None, None)
        attended = self.attention(x, bias, training=training, prepared=attention_weights)
        attended = self.dropout(attended, training=training)
        x = self._add_norm(x, attended, self.attention_norm, training)
        transformed = self.ffn(x, prepared=ffn_weights, training=training)
        transformed = self.dropout(transformed, training=training)
        return self._add_norm(x, transformed, self.ffn_norm, training)

    def _add_norm(
        self, x: tf.Tensor, residual: tf.Tensor, norm: keras.layers.Layer, training: bool | None
    ) -> tf.Tensor:
        """`norm(x + residual)` (float32 LayerNorm) in the compute dtype; training computes it
        as one compiled kernel and its gradient as another."""
        if training is True and compiled.active(self.config.hidden_size):
            if not norm.built:  # the encoder's variable-creating call: scoped as a call would
                with tf.name_scope(norm.name):
                    norm.build(x.shape)
            gamma, beta = tf.convert_to_tensor(norm.gamma), tf.convert_to_tensor(norm.beta)
            return compiled.residual_layer_norm(
                tf.cast(x, self.compute_dtype),
                tf.cast(residual, self.compute_dtype),
                gamma,
                beta,
                norm.epsilon,
            )
        return tf.cast(norm(x + residual), self.compute_dtype)

    def get_config(self) -> dict[str, Any]:
        """Serializable only unshared: sharing is structure the encoder rebuilds from its config."""
        if self.shares_attention or self.shares_ffn:
            raise NotImplementedError("a block that shares sublayers is rebuilt by its encoder")
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> TransformerBlock:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
