"""`AlbertEncoder`: factorized embeddings, grouped weight sharing, pooler; the TF-Hub contract.

`plain_forward` (the end of this file) is ALBERT's inference forward pass written out top to
bottom on the encoder's variables: separate query/key/value matmuls, softmax and LayerNorm as in
the paper, float32, no caching. `AlbertEncoder.call` runs the same arithmetic through the speed
paths of `layers/fast.py` (one [H, 3H] QKV kernel with the scale folded in, weights cast once
per call for blocks reused across layers, 2-D matmuls) and `layers/fused.py` (oneDNN's fused
LayerNorm and softmax inside `fused_cpu_inference()`); each is tested equal to `plain_forward`
(tests/model/test_plain_forward.py).
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.layers import fast
from albert_tf.layers.attention import MASK_LOGIT, attention_bias
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
                prepared = None if cache is None else fast.block_weights(block, cache)
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


# === The forward pass, plainly (the reference for the layers' speed paths) ===


def _layer_norm(x: tf.Tensor, norm: keras.layers.LayerNormalization) -> tf.Tensor:
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) / tf.sqrt(variance + norm.epsilon) * norm.gamma + norm.beta


def _dense(x: tf.Tensor, dense: keras.layers.Dense) -> tf.Tensor:
    return tf.einsum("bsi,io->bso", x, dense.kernel) + dense.bias


def plain_forward(encoder: AlbertEncoder, inputs: dict[str, tf.Tensor]) -> dict[str, Any]:
    """The encoder's inference outputs (float32, no dropout) computed plainly from its variables.

    Same inputs and outputs as `AlbertEncoder.call`. Slow (every block's weights are read per
    layer, three attention matmuls); for tests and for reading.
    """
    config = encoder.config
    word_ids = tf.cast(inputs["input_word_ids"], tf.int32)  # [B, S]
    type_ids = tf.cast(inputs["input_type_ids"], tf.int32)  # [B, S]
    mask = tf.cast(inputs["input_mask"], tf.float32)  # [B, S]
    batch, seq = tf.shape(word_ids)[0], tf.shape(word_ids)[1]

    # Embeddings: word + token type + position (width E), LayerNorm, projection E -> H.
    embeddings = encoder.embeddings
    x = tf.gather(embeddings.word_embeddings, word_ids)  # [B, S, E]
    x += tf.gather(embeddings.token_type_embeddings, type_ids)  # [B, S, E]
    x += embeddings.position_embeddings[tf.newaxis, :seq]  # [1, S, E]
    x = _layer_norm(x, embeddings.layer_norm)
    if encoder.embedding_projection is not None:
        x = _dense(x, encoder.embedding_projection)  # [B, S, H]

    # Attention bias: -10000 on the logits of padding keys.
    bias = (1.0 - mask[:, tf.newaxis, tf.newaxis, :]) * MASK_LOGIT  # [B, 1, 1, S]
    heads, head_size = config.num_attention_heads, config.head_size

    def split_heads(t: tf.Tensor) -> tf.Tensor:
        t = tf.reshape(t, [batch, seq, heads, head_size])  # [B, S, N, D]
        return tf.transpose(t, [0, 2, 1, 3])  # [B, N, S, D]

    encoder_outputs = []
    for layer_blocks in encoder.blocks:
        for block in layer_blocks:
            attention = block.attention
            q = split_heads(_dense(x, attention.query))
            k = split_heads(_dense(x, attention.key))
            v = split_heads(_dense(x, attention.value))
            logits = tf.matmul(q, k, transpose_b=True) / math.sqrt(head_size)  # [B, N, S, S]
            probs = tf.nn.softmax(logits + bias, axis=-1)
            context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, S, N, D]
            context = tf.reshape(context, [batch, seq, config.hidden_size])  # [B, S, H]
            x = _layer_norm(x + _dense(context, attention.output_dense), block.attention_norm)

            ffn = block.ffn
            hidden = ffn.intermediate.activation(_dense(x, ffn.intermediate))  # [B, S, F]
            x = _layer_norm(x + _dense(hidden, ffn.output_dense), block.ffn_norm)
            encoder_outputs.append(x)

    pooled_output = tf.tanh(tf.matmul(x[:, 0], encoder.pooler.kernel) + encoder.pooler.bias)
    return dict(sequence_output=x, pooled_output=pooled_output, encoder_outputs=encoder_outputs)
