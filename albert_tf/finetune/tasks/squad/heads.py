"""ALBERT's SQuAD 2.0 head, as google-research/albert computes it (squad_utils.create_v2_model).

On the encoder's `sequence_output` h [B, S, H] and the mask p [B, S] of positions that cannot
hold an answer (1 at the question, the [SEP]s and padding; 0 at [CLS] and the context), with
`masked(x) = x * (1 - p) - 1e30 * p`:

- start: `start_log_probs = log_softmax(masked(h . w_s + b_s))`;
- end, given a start state h_s: `log_softmax(masked(LayerNorm(tanh([h_j ; h_s] . W0 + b0)) .
  w1 + b1))` over j. Training conditions it on the gold start (teacher forcing); inference on
  each of the `start_n_top` best starts and keeps the `end_n_top` best ends of each, so
  entry i * end_n_top + j of `end_top_*` is the j-th end of the i-th start;
- answer class: `cls_logits = tanh([sum_j softmax(masked start)_j h_j ; h_0] . Wa + ba) . wa`
  (dropout before the last product, no bias): the logit that the window holds no answer.

The sublayers carry the original's variable scopes (`start_logits/dense`, `end_logits/dense_0`,
`end_logits/LayerNorm`, `end_logits/dense_1`, `answer_class/dense_0`, `answer_class/dense_1`),
so converting a run_squad_v2.py checkpoint is a table (`tf1_variables`). The head computes in
float32 whatever the model's dtype policy: -1e30 does not fit in float16.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

START_N_TOP = 5  # run_squad_v2.py's defaults
END_N_TOP = 5
ANSWER_CLASS_DROPOUT = 0.1  # run_squad_v2.py's dropout_prob
MASKED = 1e30  # what a masked logit loses


def answer_mask(inputs: dict[str, tf.Tensor]) -> tf.Tensor:
    """p_mask float32 [B, S] of packed `[CLS] question [SEP] context [SEP]` inputs (int32
    [B, S] each): 0 at [CLS] and the context (type id 1 before the last real token), else 1."""
    positions = tf.range(tf.shape(inputs["input_mask"])[1])[tf.newaxis]  # [1, S]
    length = tf.reduce_sum(inputs["input_mask"], axis=-1, keepdims=True)  # [B, 1]
    context = (inputs["input_type_ids"] == 1) & (positions < length - 1)  # [B, S]
    return 1.0 - tf.cast(context | (positions == 0), tf.float32)


def _masked(logits: tf.Tensor, p_mask: tf.Tensor) -> tf.Tensor:
    return logits * (1.0 - p_mask) - MASKED * p_mask


def _dense(units: int, initializer_range: float, name: str, **kwargs: Any) -> keras.layers.Dense:
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
    return keras.layers.Dense(
        units, kernel_initializer=initializer, name=name, dtype="float32", **kwargs
    )


def _build(layer: keras.layers.Layer, width: int) -> None:
    """Builds a sublayer for inputs [N, width] under its own name scope, as a call would (so
    its variables are named `.../end_logits/dense_0/kernel`, not `.../end_logits/kernel`)."""
    with tf.name_scope(layer.name):
        layer.build([None, width])


class EndLogits(keras.layers.Layer):
    """The end net: position states [..., S, H] and start states [..., 1, H] (broadcast) in,
    end logits [..., S] out. `dense_0` reads [position ; start], the position's state first."""

    def __init__(self, initializer_range: float = 0.02, **kwargs: Any) -> None:
        kwargs.setdefault("name", "end_logits")
        super().__init__(dtype="float32", **kwargs)
        self.initializer_range = initializer_range

    def build(self, input_shape: Any) -> None:
        self.hidden_size = int(input_shape[-1])
        self.dense_0 = _dense(self.hidden_size, self.initializer_range, "dense_0")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, name="LayerNorm", dtype="float32"
        )
        self.dense_1 = _dense(1, self.initializer_range, "dense_1")
        _build(self.dense_0, 2 * self.hidden_size)
        _build(self.layer_norm, self.hidden_size)
        _build(self.dense_1, self.hidden_size)
        super().build(input_shape)

    def call(self, states: tf.Tensor, start_states: tf.Tensor) -> tf.Tensor:
        # [h_j ; h_s] . W0 as h_j . W0[:H] + h_s . W0[H:]: the [..., S, 2H] concatenation of
        # every start with every position is never built.
        kernel = self.dense_0.kernel  # [2H, H]
        x = tf.einsum("...h,hk->...k", states, kernel[: self.hidden_size]) + tf.einsum(
            "...h,hk->...k", start_states, kernel[self.hidden_size :]
        )  # [..., S, H]
        shape = tf.shape(x)
        # One LayerNorm for training's [B, S, H] and the beam's [B, K, S, H]: on rows [N, H].
        x = self.layer_norm(tf.reshape(tf.tanh(x + self.dense_0.bias), [-1, self.hidden_size]))
        return tf.reshape(self.dense_1(x), shape[:-1])  # [..., S]

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "initializer_range": self.initializer_range}


class AnswerClass(keras.layers.Layer):
    """The answer-class net: start-weighted state and [CLS] state [B, H] each in, logit [B]."""

    def __init__(
        self, dropout: float = ANSWER_CLASS_DROPOUT, initializer_range: float = 0.02, **kwargs: Any
    ) -> None:
        kwargs.setdefault("name", "answer_class")
        super().__init__(dtype="float32", **kwargs)
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout, dtype="float32")
        self.dense_1 = _dense(1, initializer_range, "dense_1", use_bias=False)

    def build(self, input_shape: Any) -> None:
        hidden = int(input_shape[-1])
        self.dense_0 = _dense(hidden, self.initializer_range, "dense_0", activation="tanh")
        _build(self.dense_0, 2 * hidden)
        super().build(input_shape)

    def call(self, start_state: tf.Tensor, cls_state: tf.Tensor, training: Any = None):
        x = self.dense_0(tf.concat([start_state, cls_state], axis=-1))  # [B, H]
        return tf.squeeze(self.dense_1(self.dropout(x, training=training)), -1)  # [B]

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "dropout": self.dropout_rate,
            "initializer_range": self.initializer_range,
        }


class SquadV2Head(keras.layers.Layer):
    """The whole head (see the module docstring), saved as the task model's `task_head`.

    `call(encoder_outputs, p_mask, start_positions=None, training=None)`: `sequence_output`
    [B, S, H] of `encoder_outputs` and p_mask float32 [B, S] (`answer_mask`) in. With
    `start_positions` int32 [B] (training): `start_log_probs`, `end_log_probs` [B, S] and
    `cls_logits` [B]. Without: `start_top_log_probs`, `start_top_index` [B, K],
    `end_top_log_probs`, `end_top_index` [B, K * K'] and `cls_logits` [B] (K = start_n_top,
    K' = end_n_top). Float32 outputs, int32 indices; masked positions hold about -1e30.
    """

    def __init__(
        self,
        start_n_top: int = START_N_TOP,
        end_n_top: int = END_N_TOP,
        dropout: float = ANSWER_CLASS_DROPOUT,
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", "task_head")
        super().__init__(dtype="float32", **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.start_logits = _dense(1, initializer_range, "start_logits")
        self.end_logits = EndLogits(initializer_range)
        self.answer_class = AnswerClass(dropout, initializer_range)

    def call(
        self,
        encoder_outputs: dict[str, tf.Tensor],
        p_mask: tf.Tensor,
        start_positions: tf.Tensor | None = None,
        training: Any = None,
    ) -> dict[str, tf.Tensor]:
        states = tf.cast(encoder_outputs["sequence_output"], tf.float32)  # [B, S, H]
        start_logits = _masked(tf.squeeze(self.start_logits(states), -1), p_mask)  # [B, S]
        start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
        weights = tf.nn.softmax(start_logits, axis=-1)  # [B, S]
        cls_logits = self.answer_class(
            tf.einsum("bs,bsh->bh", weights, states), states[:, 0], training=training
        )  # [B]
        if start_positions is not None:
            start_states = tf.gather(states, start_positions, batch_dims=1)  # [B, H]
            end_logits = self.end_logits(states, start_states[:, tf.newaxis])  # [B, S]
            return {
                "start_log_probs": start_log_probs,
                "end_log_probs": tf.nn.log_softmax(_masked(end_logits, p_mask), axis=-1),
                "cls_logits": cls_logits,
            }
        return {**self._beam(states, p_mask, start_log_probs), "cls_logits": cls_logits}

    def _beam(self, states: tf.Tensor, p_mask: tf.Tensor, start_log_probs: tf.Tensor) -> dict:
        """The start_n_top best starts and the end_n_top best ends of each."""
        batch = tf.shape(states)[0]
        start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, self.start_n_top)
        start_states = tf.gather(states, start_top_index, batch_dims=1)  # [B, K, H]
        end_logits = self.end_logits(
            states[:, tf.newaxis], start_states[:, :, tf.newaxis]
        )  # [B, K, S]
        end_log_probs = tf.nn.log_softmax(_masked(end_logits, p_mask[:, tf.newaxis]), axis=-1)
        end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, self.end_n_top)
        beam = self.start_n_top * self.end_n_top
        return {
            "start_top_log_probs": start_top_log_probs,
            "start_top_index": start_top_index,
            "end_top_log_probs": tf.reshape(end_top_log_probs, [batch, beam]),  # [B, K * K']
            "end_top_index": tf.reshape(end_top_index, [batch, beam]),
        }

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "start_n_top": self.start_n_top,
            "end_n_top": self.end_n_top,
            "dropout": self.dropout_rate,
            "initializer_range": self.initializer_range,
        }
