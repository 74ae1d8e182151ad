"""`AlbertEncoder`: factorized embeddings, grouped weight sharing, pooler; the TF-Hub contract."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.layers.attention import attention_bias
from albert_tf.layers.embeddings import AlbertEmbeddings, truncated_normal
from albert_tf.layers.transformer_block import TransformerBlock


def _build_blocks(config: AlbertConfig) -> list[list[TransformerBlock]]:
    """blocks[l][i]: the block that layer l applies as its i-th inner block.

    Layer l uses group `config.group_of_layer(l)`. With `shared_params="all"` every layer of a
    group reuses one block per inner group, named `transformer/group_G/inner_group_I` like the
    original. Otherwise each (layer, inner group) has its own block
    (`transformer/group_G/layer_L/inner_group_I`) that reuses the attention ("attention") or the
    FFN ("ffn") of its group's first layer, or nothing ("none").
    """
    share = config.shared_params
    first: dict[tuple[int, int], TransformerBlock] = {}
    blocks = []
    for layer in range(config.num_hidden_layers):
        group = config.group_of_layer(layer)
        row = []
        for inner in range(config.inner_group_num):
            owner = first.get((group, inner))
            if share == "all":
                block = owner or TransformerBlock(
                    config, name=f"transformer/group_{group}/inner_group_{inner}"
                )
            else:
                block = TransformerBlock(
                    config,
                    share_attention_with=owner if share == "attention" else None,
                    share_ffn_with=owner if share == "ffn" else None,
                    name=f"transformer/group_{group}/layer_{layer}/inner_group_{inner}",
                )
            first.setdefault((group, inner), block)
            row.append(block)
        blocks.append(row)
    return blocks


@keras.utils.register_keras_serializable(package="albert_tf")
class AlbertEncoder(keras.Model):
    """The ALBERT backbone with TF-Hub encoder inputs and outputs.

    Inputs: dict of int32 [B, S] `input_word_ids`, `input_mask` (1 = token, 0 = padding),
    `input_type_ids`. Outputs: dict of float32 `sequence_output [B, S, H]`,
    `pooled_output [B, H]` (dense+tanh of the first token) and `encoder_outputs`, a list with one
    [B, S, H] entry per block applied (num_hidden_layers * inner_group_num).

    Variables are created on construction and named after the original scopes under the model
    name (`encoder/embeddings/word_embeddings`, `encoder/embedding_hidden_mapping_in/kernel`,
    `encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel`,
    `encoder/pooler/dense/kernel`) when it is built outside any other name scope.
    """

    def __init__(self, config: AlbertConfig, **kwargs: Any) -> None:
        kwargs.setdefault("name", "encoder")
        super().__init__(**kwargs)
        self.config = config
        # === Layers ===
        self.embeddings = AlbertEmbeddings(config, name="embeddings")
        self.embedding_projection = None
        if config.embedding_size != config.hidden_size:
            self.embedding_projection = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=truncated_normal(config),
                name="embedding_hidden_mapping_in",
            )
        self.blocks = _build_blocks(config)
        self.pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=truncated_normal(config),
            name="pooler/dense",
        )
        self._create_variables()

    def _create_variables(self) -> None:
        # Runs the layers once on a [1, 1] input under the model's name scope, so every variable
        # exists (for the tied MLM decoder, checkpoints, counting) and carries its scoped name.
        # training=True: every block prepares its own weights, which builds its sublayers first.
        ones = tf.ones([1, 1], tf.int32)
        with tf.init_scope(), tf.name_scope(self.name):
            inputs = dict(input_word_ids=ones, input_mask=ones, input_type_ids=ones * 0)
            self.call(inputs, training=True)
        self.built = True

    # === Forward pass ===

    def call(self, inputs: dict[str, tf.Tensor], training: bool | None = None) -> dict[str, Any]:
        word_ids = tf.cast(inputs["input_word_ids"], tf.int32)
        type_ids = tf.cast(inputs["input_type_ids"], tf.int32)
        bias = attention_bias(inputs["input_mask"])  # [B, 1, 1, S]

        x = self.embeddings(word_ids, type_ids, training=training)  # [B, S, E]
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)  # [B, S, H]

        # Outside training, each shared block's weights are cast (and the QKV kernel assembled)
        # once per call instead of once per layer. Training keeps it per layer, so each layer's
        # weight gradient reaches float32 before the layers' gradients are summed. A symbolic
        # `training` (not a Python bool) takes the per-layer path, which is right either way.
        inference = training is None or training is False
        cache: dict[int, tuple[tf.Tensor, ...]] | None = {} if inference else None
        encoder_outputs = []
        for layer_blocks in self.blocks:
            for block in layer_blocks:
                prepared = None if cache is None else block.prepared_weights(cache)
                x = block(x, bias, training=training, prepared=prepared)
                encoder_outputs.append(tf.cast(x, tf.float32))

        sequence_output = encoder_outputs[-1]
        pooled_output = tf.cast(self.pooler(x[:, 0]), tf.float32)
        return dict(
            sequence_output=sequence_output,
            pooled_output=pooled_output,
            encoder_outputs=encoder_outputs,
        )

    # === Accessors and config ===

    def get_embedding_table(self) -> tf.Variable:
        """The [V, E] word-embedding variable (the MLM decoder is tied to it)."""
        return self.embeddings.word_embeddings

    def get_config(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: Any = None) -> AlbertEncoder:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
