"""`AlbertPretrainingModel`: the encoder with its masked-LM and sentence-order heads."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.heads import MaskedLMHead, SentenceOrderHead


@keras.utils.register_keras_serializable(package="albert_tf")
class AlbertPretrainingModel(keras.Model):
    """Encoder + MLM head (tied to the word embeddings) + SOP head.

    Inputs: dict of int32 `input_word_ids, input_mask, input_type_ids` [B, S] and
    `masked_lm_positions` [B, P] (optional: without it the MLM head scores all S positions).
    Outputs: the encoder's dict plus float32 `mlm_logits [B, P, V]` and `sop_logits [B, 2]`.
    """

    def __init__(self, config: AlbertConfig, **kwargs: Any) -> None:
        kwargs.setdefault("name", "albert_pretraining")
        super().__init__(**kwargs)
        self.config = config
        self.encoder = AlbertEncoder(config)
        self.mlm_head = MaskedLMHead(config, embedding_table=self.encoder.get_embedding_table())
        self.sop_head = SentenceOrderHead(config)
        self.built = True

    def call(self, inputs: dict[str, tf.Tensor], training: bool | None = None) -> dict[str, Any]:
        outputs = dict(self.encoder(inputs, training=training))
        outputs["mlm_logits"] = self.mlm_head(
            outputs["sequence_output"], inputs.get("masked_lm_positions")
        )
        outputs["sop_logits"] = self.sop_head(outputs["pooled_output"])
        return outputs

    def get_config(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(
        cls, config: dict[str, Any], custom_objects: Any = None
    ) -> AlbertPretrainingModel:
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
