"""The preprocessing SavedModel: the contract of TF-Hub's `albert_en_preprocess/3`.

Root object (load with `hub.load` or `hub.KerasLayer`; `tensorflow_text` must be imported):

- `__call__(strings)`: tf.string [B] -> dict `input_word_ids, input_mask, input_type_ids`, int32
  [B, seq_length]: `[CLS] tokens [SEP]`, padded with `<pad>`.
- `tokenize(strings)`: tf.string [B] -> tf.RaggedTensor int32 [B, (tokens)], ALBERT's
  tokenization (`GraphTokenizer`); `tokenize.get_special_tokens_dict()` -> int32 scalars
  `vocab_size, padding_id, start_of_sequence_id, end_of_segment_id, mask_id`.
- `bert_pack_inputs(segments, seq_length=N)`: a list of 1-3 RaggedTensors int32 [B, (tokens)]
  -> the three encoder inputs, int32 [B, N]:
  `[CLS] A [SEP] B [SEP] C [SEP]`, round-robin trimmed to fit, type ids 0 for `[CLS]`, A and
  its `[SEP]`, 1 for B and its `[SEP]`, 2 for C and its `[SEP]`, 0 on padding.
- `signatures["serving_default"]`: `inputs` tf.string [B] -> the three encoder inputs (for TF
  Serving and Keras 3 `keras.layers.TFSMLayer(path, call_endpoint="serving_default")`).
- `sp_model_file`: the SentencePiece model as a `tf.saved_model.Asset` (under `assets/`).
"""

from __future__ import annotations

import os
from pathlib import Path

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.errors import ExportError
from albert_tf.io_utils import atomic_dir, check_output_path
from albert_tf.preprocess.graph_tokenizer import GraphTokenizer
from albert_tf.preprocess.tokenizer import AlbertTokenizer, as_tokenizer

MAX_SEGMENTS = 3


def bert_pack_inputs(
    segments: list[tf.RaggedTensor],
    seq_length: int | tf.Tensor,
    start_of_sequence_id: int,
    end_of_segment_id: int,
    padding_id: int,
) -> dict[str, tf.Tensor]:
    """Packs 1-3 token segments into encoder inputs; see the module docstring for the layout.

    Args:
      segments: RaggedTensors int32 [B, (tokens)] or [B, (words), (tokens)], same batch size
        (the SavedModel's `bert_pack_inputs` is traced for [B, (tokens)]).
      seq_length: output length N (Python int or int32 scalar tensor), at least
        `len(segments) + 1` (room for [CLS] and each [SEP]); InvalidArgumentError if less.
    Returns:
      dict `input_word_ids, input_mask, input_type_ids`, each int32 [B, N].
    """
    tf.debugging.assert_greater_equal(
        tf.cast(seq_length, tf.int32),
        len(segments) + 1,
        message=f"bert_pack_inputs: seq_length must be at least {len(segments) + 1} "
        f"([CLS] and a [SEP] per segment) for {len(segments)} segment(s)",
    )
    segments = [s.merge_dims(1, -1) if s.shape.rank > 2 else s for s in segments]
    budget = seq_length - len(segments) - 1  # room left after [CLS] and one [SEP] per segment
    trimmed = tf_text.RoundRobinTrimmer(budget).trim(segments)
    word_ids, type_ids = tf_text.combine_segments(
        trimmed, start_of_sequence_id=start_of_sequence_id, end_of_segment_id=end_of_segment_id
    )
    word_ids, mask = tf_text.pad_model_inputs(word_ids, seq_length, pad_value=padding_id)
    type_ids, _ = tf_text.pad_model_inputs(type_ids, seq_length, pad_value=0)
    shape = tf.stack([segments[0].nrows(out_type=tf.int32), tf.cast(seq_length, tf.int32)])
    return {
        name: tf.reshape(tf.cast(t, tf.int32), shape)  # [B, N]
        for name, t in (
            ("input_word_ids", word_ids),
            ("input_mask", mask),
            ("input_type_ids", type_ids),
        )
    }


class _SpecialTokens(tf.Module):
    """`tokenize.get_special_tokens_dict`: a callable returning int32 scalars."""

    def __init__(self, tokens: dict[str, int]):
        super().__init__()
        self._tokens = dict(tokens)

    @tf.function(input_signature=[])
    def __call__(self) -> dict[str, tf.Tensor]:
        return {k: tf.constant(v, tf.int32) for k, v in self._tokens.items()}


class _Tokenize(tf.Module):
    """`tokenize`: tf.string [B] -> RaggedTensor int32 [B, (tokens)]."""

    def __init__(self, tokenizer: GraphTokenizer, special_tokens: dict[str, int]):
        super().__init__()
        self._tokenizer = tokenizer
        self.get_special_tokens_dict = _SpecialTokens(special_tokens)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, strings: tf.Tensor) -> tf.RaggedTensor:
        return self._tokenizer.tokenize(strings)


class _BertPackInputs(tf.Module):
    """`bert_pack_inputs(segments, seq_length=default)`, traced for 1-3 segments int32
    [B, (tokens)] (what `tokenize` returns) with `seq_length` an int32 scalar (Python ints
    convert on call)."""

    def __init__(self, seq_length: int, special_tokens: dict[str, int]):
        super().__init__()
        ids = dict(
            start_of_sequence_id=special_tokens["start_of_sequence_id"],
            end_of_segment_id=special_tokens["end_of_segment_id"],
            padding_id=special_tokens["padding_id"],
        )

        @tf.function(autograph=False)
        def pack(inputs, seq_length=seq_length):
            return bert_pack_inputs(list(inputs), seq_length, **ids)

        # The loader makes a restored object callable through its `__call__` function, which
        # keeps the Python default `seq_length` of the tf.function (as tf-models' export does).
        self.__call__ = pack
        spec = tf.RaggedTensorSpec([None, None], tf.int32)
        for num_segments in range(1, MAX_SEGMENTS + 1):
            pack.get_concrete_function(
                [spec] * num_segments, seq_length=tf.TensorSpec([], tf.int32)
            )


class PreprocessModule(tf.Module):
    """The root object of the preprocessing SavedModel (see the module docstring)."""

    def __init__(
        self,
        sp_model: str | os.PathLike | AlbertTokenizer,
        seq_length: int,
        do_lower_case: bool,
    ):
        super().__init__()
        reference = as_tokenizer(sp_model, do_lower_case)
        tokenizer = GraphTokenizer(reference, do_lower_case=do_lower_case)
        self.seq_length = seq_length
        self.special_tokens = dict(
            vocab_size=tokenizer.vocab_size,
            padding_id=tokenizer.pad_id,
            start_of_sequence_id=tokenizer.cls_id,
            end_of_segment_id=tokenizer.sep_id,
            mask_id=tokenizer.mask_id,
        )
        self.sp_model_file = tf.saved_model.Asset(str(reference.sp_model_path))
        self.tokenize = _Tokenize(tokenizer, self.special_tokens)
        self.bert_pack_inputs = _BertPackInputs(seq_length, self.special_tokens)
        self._tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def __call__(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        s = self.special_tokens
        return bert_pack_inputs(
            [self._tokenizer.tokenize(inputs)],
            self.seq_length,
            start_of_sequence_id=s["start_of_sequence_id"],
            end_of_segment_id=s["end_of_segment_id"],
            padding_id=s["padding_id"],
        )


def check_seq_length(seq_length: int) -> None:
    """ExportError unless `seq_length` leaves room for [CLS], a [SEP] per segment and a token
    (`bert_pack_inputs` with `MAX_SEGMENTS` segments)."""
    if seq_length < MAX_SEGMENTS + 2:
        raise ExportError(
            f"seq_length {seq_length} is too small: it must be at least {MAX_SEGMENTS + 2}"
        )


def save_preprocess_model(
    sp_model: str | os.PathLike | AlbertTokenizer,
    output_dir: str | os.PathLike,
    seq_length: int = 128,
    do_lower_case: bool = True,
    overwrite: bool = False,
) -> Path:
    """Writes the preprocessing SavedModel to `output_dir` atomically; returns its path.
    `sp_model`: the SentencePiece model file, or an `AlbertTokenizer` that has loaded it.

    Raises TokenizerError (missing/corrupt model, no ALBERT specials), ExportError (seq_length
    too small), OutputError (exists and not `overwrite`).
    """
    check_seq_length(seq_length)
    check_output_path(output_dir, overwrite)
    module = PreprocessModule(sp_model, seq_length, do_lower_case)
    with atomic_dir(output_dir, overwrite=overwrite) as tmp:
        tf.saved_model.save(
            module,
            str(tmp),
            signatures={"serving_default": module.__call__.get_concrete_function()},
        )
    return Path(output_dir)
