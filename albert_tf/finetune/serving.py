"""Serving SavedModel of a fine-tuned task: raw strings in, labels and probabilities out.

Preprocessing runs inside the graph (`albert_tf.preprocess.graph_tokenizer.GraphTokenizer`, round-robin
trimming and packing by the preprocessing SavedModel's `bert_pack_inputs`, and for long texts
the windows of `finetune.windows`), so `tf.saved_model.load(path).signatures["serving_default"]` (and TF
Serving) need only `import tensorflow_text`. Each task's `serving_function` documents its
signature: classify `text` (+ `text_pair`) -> `label`, `label_id`, `probabilities`, `logits`;
regress -> `prediction`; multiple-choice `context`, `question`, `options` -> `label`,
`label_id`, `probabilities`; tag `sentence` -> `tags`, `num_words`; squad `question`,
`context` -> `answer`, `start_token`, `end_token`, `null_score_diff`, `start_logits`,
`end_logits`.
"""

from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.finetune.models import TaskModel
from albert_tf.io_utils import atomic_dir
from albert_tf.preprocess.graph_tokenizer import GraphTokenizer
from albert_tf.preprocess.preprocess_model import bert_pack_inputs
from albert_tf.preprocess.tokenizer import WORD_START, AlbertTokenizer


class ServingModule(tf.Module):
    """Tokenizer + fine-tuned model, what every task's serving function is built from."""

    def __init__(self, model: TaskModel, tokenizer: AlbertTokenizer):
        super().__init__(name="serving")
        # The model is called through a closure and only its variables are tracked: saving then
        # skips Keras's per-layer tracing, which would triple the export time.
        self.call_model = lambda features: model(features, training=False)
        self.model_variables = list(model.variables)
        self.tokenizer = GraphTokenizer(tokenizer, tokenizer.do_lower_case)
        self.detokenizer = tf_text.SentencepieceTokenizer(model=tokenizer.model_proto)
        self.length = model.task.settings.max_seq_length
        self.labels = tf.constant(model.task.settings.labels or [""])
        # The bare word-start piece "▁" (-1 when the vocabulary has none): it stands for no
        # character, so a span of nothing else is an empty answer.
        blank = tokenizer.sp_model.piece_to_id(WORD_START)
        self.blank_id = blank if tokenizer.sp_model.id_to_piece(blank) == WORD_START else -1

    def pack(self, segments: list[tf.RaggedTensor]) -> dict[str, tf.Tensor]:
        """`pack_segments` at the model's sequence length."""
        return pack_segments(segments, self.tokenizer, self.length)


def pack_segments(
    segments: list[tf.RaggedTensor], tokenizer: GraphTokenizer, length: int
) -> dict[str, tf.Tensor]:
    """[CLS] A [SEP] (B [SEP]) with round-robin trimming, padded: int32 [B, length] each;
    `bert_pack_inputs` (the preprocessing SavedModel's packing) with `tokenizer`'s ids."""
    return bert_pack_inputs(
        segments, length, tokenizer.cls_id, tokenizer.sep_id, padding_id=tokenizer.pad_id
    )


def export_serving_model(
    model: TaskModel,
    tokenizer: AlbertTokenizer,
    output_dir: str | os.PathLike,
    overwrite: bool = False,
) -> None:
    """Writes the serving SavedModel (signature `serving_default`) atomically to `output_dir`."""
    module = ServingModule(model, tokenizer)
    signature = model.task.serving_function(module)
    with atomic_dir(output_dir, overwrite=overwrite) as tmp:
        tf.saved_model.save(module, str(tmp), signatures={"serving_default": signature})
