"""Serving SavedModel of a fine-tuned task: raw strings in, labels and probabilities out.

Preprocessing runs inside the graph (`preprocess.graph_tokenizer.GraphTokenizer`, round-robin
trimming and packing from tensorflow_text), so `tf.saved_model.load(path).signatures
["serving_default"]` (and TF Serving) need only `import tensorflow_text`. Signatures by task:

- classify: `text` [B] (+ `text_pair` [B] for pair tasks) -> `label` string [B], `label_id`
  int32 [B], `probabilities` float32 [B, L], `logits` [B, L].
- regress: `text` (+ `text_pair`) -> `prediction` float32 [B].
- multiple-choice: `context` [B], `question` [B], `options` [B, C] -> `label` ("A", "B", ...) [B],
  `label_id` [B], `probabilities` [B, C].
- tag: `sentence` [B] (words separated by spaces) -> `tags` string [B, W] ("" past each
  sentence's words), `num_words` int32 [B].
- squad: `question` [B], `context` [B] -> `answer` string [B] (normalized, i.e. lowercased text of
  the answer tokens; "" for no answer), `start_token`, `end_token` int32 [B] (positions in the
  packed sequence, 0 = [CLS] for no answer), `null_score_diff` float32 [B], `start_logits`,
  `end_logits` [B, S]. One window: contexts longer than the sequence are truncated (the
  Python `albert-tf predict` uses doc stride and returns character offsets).
"""

from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.finetune.models import TaskModel
from albert_tf.finetune.tasks import TaskSettings
from albert_tf.io_utils import atomic_dir
from preprocess.graph_tokenizer import GraphTokenizer
from preprocess.tokenizer import AlbertTokenizer

_CHOICE_LETTERS = list("ABCDEFGHIJ")


class ServingModule(tf.Module):
    """Tokenizer + fine-tuned model; `serve` is the `serving_default` function."""

    def __init__(self, model: TaskModel, tokenizer: AlbertTokenizer, settings: TaskSettings):
        super().__init__(name="serving")
        # The model is called through a closure and only its variables are tracked: saving then
        # skips Keras's per-layer tracing, which would triple the export time.
        self._call_model = lambda features: model(features, training=False)
        self.model_variables = list(model.variables)
        self.settings = settings
        self.tokenizer = GraphTokenizer(tokenizer.sp_model_path, tokenizer.do_lower_case)
        with open(tokenizer.sp_model_path, "rb") as f:
            self.detokenizer = tf_text.SentencepieceTokenizer(model=f.read())
        self.length = settings.max_seq_length
        self.labels = tf.constant(settings.labels or [""])
        self.default_tag = tf.constant(
            "O" if "O" in (settings.labels or []) else (settings.labels or [""])[0]
        )

    def _pack(self, segments: list[tf.RaggedTensor]) -> dict[str, tf.Tensor]:
        """[CLS] A [SEP] (B [SEP]) with round-robin trimming, padded: int32 [B, S] each."""
        budget = self.length - 1 - len(segments)
        trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
        ids, types = tf_text.combine_segments(
            trimmed,
            start_of_sequence_id=self.tokenizer.cls_id,
            end_of_segment_id=self.tokenizer.sep_id,
        )
        word_ids, mask = tf_text.pad_model_inputs(ids, self.length, pad_value=self.tokenizer.pad_id)
        type_ids, _ = tf_text.pad_model_inputs(types, self.length, pad_value=0)
        return {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32),
        }

    def classify(self, text: tf.Tensor, text_pair: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        segments = [self.tokenizer.tokenize(text)]
        if text_pair is not None:
            segments.append(self.tokenizer.tokenize(text_pair))
        outputs = self._call_model(self._pack(segments))
        if self.settings.task == "regress":
            return {"prediction": outputs["predictions"]}
        logits = outputs["logits"]
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "label": tf.gather(self.labels, label_id),
            "label_id": label_id,
            "probabilities": tf.nn.softmax(logits),
            "logits": logits,
        }

    def choose(
        self, context: tf.Tensor, question: tf.Tensor, options: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        shape = tf.shape(options)  # [B, C]
        questions = tf.reshape(tf.repeat(question[:, tf.newaxis], shape[1], axis=1), [-1])  # [B*C]
        flat_options = tf.reshape(options, [-1])  # [B*C]
        # Python's question.replace("_", option): split on "_", put the option after every part
        # but the last, join.
        parts = tf.strings.split(questions, "_")  # [B*C, (k)]
        part_index = tf.ragged.range(parts.row_lengths())
        is_last = (part_index == tf.expand_dims(parts.row_lengths() - 1, 1)).flat_values
        option_of_part = tf.gather(flat_options, parts.value_rowids())
        pieces = tf.strings.join([parts.flat_values, tf.where(is_last, "", option_of_part)])
        filled = tf.strings.reduce_join(parts.with_flat_values(pieces), axis=1)  # [B*C]
        blank = tf.strings.regex_full_match(questions, "(?s).*_.*")
        qa = tf.where(blank, filled, tf.strings.join([questions, flat_options], separator=" "))
        contexts = tf.reshape(tf.repeat(context[:, tf.newaxis], shape[1], axis=1), [-1])  # [B*C]
        packed = self._pack([self.tokenizer.tokenize(contexts), self.tokenizer.tokenize(qa)])
        packed = {
            k: tf.reshape(v, [shape[0], shape[1], self.length]) for k, v in packed.items()
        }  # [B, C, S]
        logits = self._call_model(packed)["logits"]
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "label": tf.gather(tf.constant(_CHOICE_LETTERS), label_id),
            "label_id": label_id,
            "probabilities": tf.nn.softmax(logits),
        }

    def tag(self, sentence: tf.Tensor) -> dict[str, tf.Tensor]:
        words = tf.strings.split(sentence)  # [B, (W)]
        pieces = self.tokenizer.tokenize(words.flat_values)  # [N, (P)]
        # A word that normalizes to nothing becomes one <unk> (as features.word_pieces).
        empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unk = tf.fill([tf.reduce_sum(empty)], tf.constant(self.tokenizer.unk_id, pieces.dtype))
        pieces = tf.concat([pieces, tf.RaggedTensor.from_row_lengths(unk, empty)], axis=1)
        per_word = tf.RaggedTensor.from_row_splits(pieces, words.row_splits)  # [B, (W), (P)]
        counts = per_word.row_lengths(axis=2)  # [B, (W)]
        kept = tf.cumsum(counts, axis=1) <= self.length - 2  # [B, (W)] whole words that fit
        kept_words = tf.ragged.boolean_mask(per_word, kept)  # [B, (W'), (P)]
        ids = kept_words.merge_dims(1, 2)  # [B, (T)]
        packed = self._pack([ids])
        logits = self._call_model(packed)["logits"]  # [B, S, T]
        # Position of each kept word's first piece in the packed sequence (after [CLS]).
        positions = (
            tf.cumsum(kept_words.row_lengths(axis=2), axis=1, exclusive=True) + 1
        )  # [B, (W')]
        tag_ids = tf.argmax(
            tf.gather(logits, positions.to_tensor(), batch_dims=1), axis=-1, output_type=tf.int32
        )
        tags = tf.RaggedTensor.from_tensor(
            tf.gather(self.labels, tag_ids), lengths=positions.row_lengths()
        )
        num_words = words.row_lengths()
        cut = num_words - tags.row_lengths()
        filler = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(cut)], self.default_tag), cut
        )
        all_tags = tf.concat([tags, filler], axis=1)
        return {
            "tags": all_tags.to_tensor(default_value=""),
            "num_words": tf.cast(num_words, tf.int32),
        }

    def answer(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        settings = self.settings
        query = self.tokenizer.tokenize(question)[:, : settings.max_query_length]
        doc = self.tokenizer.tokenize(context)
        budget = self.length - 3 - query.row_lengths()
        doc = tf.ragged.boolean_mask(
            doc, tf.ragged.range(doc.row_lengths()) < budget[:, tf.newaxis]
        )
        packed = self._pack([query, doc])
        outputs = self._call_model(packed)
        start, end = outputs["start_logits"], outputs["end_logits"]  # [B, S]
        offset = query.row_lengths() + 2  # first context position
        positions = tf.range(self.length, dtype=tf.int64)[tf.newaxis]  # [1, S]
        in_doc = (positions >= offset[:, tf.newaxis]) & (
            positions < (offset + doc.row_lengths())[:, tf.newaxis]
        )
        pair = start[:, :, tf.newaxis] + end[:, tf.newaxis, :]  # [B, S(start), S(end)]
        band = tf.linalg.band_part(
            tf.ones([self.length, self.length]), 0, settings.max_answer_length - 1
        )
        valid = (band > 0)[tf.newaxis] & in_doc[:, :, tf.newaxis] & in_doc[:, tf.newaxis, :]
        scores = tf.where(valid, pair, tf.fill(tf.shape(pair), -1e9))
        flat = tf.reshape(scores, [-1, self.length * self.length])  # [B, S*S]
        best = tf.argmax(flat, axis=-1, output_type=tf.int32)
        best_score = tf.reduce_max(flat, axis=-1)
        start_token, end_token = best // self.length, best % self.length
        diff = start[:, 0] + end[:, 0] - best_score
        has_answer = best_score > -1e8
        if settings.version_2_with_negative:
            has_answer &= diff <= settings.null_score_diff_threshold
        span = tf.ragged.range(start_token, end_token + 1)  # [B, (n)]
        answer_ids = tf.gather(packed["input_word_ids"], span, batch_dims=1)
        text = self.detokenizer.detokenize(answer_ids)
        return {
            "answer": tf.where(has_answer, text, ""),
            "start_token": tf.where(has_answer, start_token, 0),
            "end_token": tf.where(has_answer, end_token, 0),
            "null_score_diff": diff,
            "start_logits": start,
            "end_logits": end,
        }


def _signature(module: ServingModule, settings: TaskSettings):
    string = tf.TensorSpec([None], tf.string)
    task = settings.task
    if task in ("classify", "regress"):
        if settings.has_pair:
            fn = tf.function(lambda text, text_pair: module.classify(text, text_pair))
            return fn.get_concrete_function(text=string, text_pair=string)
        return tf.function(lambda text: module.classify(text)).get_concrete_function(text=string)
    if task == "multiple-choice":
        fn = tf.function(
            lambda context, question, options: module.choose(context, question, options)
        )
        return fn.get_concrete_function(
            context=string, question=string, options=tf.TensorSpec([None, None], tf.string)
        )
    if task == "tag":
        return tf.function(lambda sentence: module.tag(sentence)).get_concrete_function(
            sentence=string
        )
    fn = tf.function(lambda question, context: module.answer(question, context))
    return fn.get_concrete_function(question=string, context=string)


def export_serving_model(
    model: TaskModel,
    tokenizer: AlbertTokenizer,
    settings: TaskSettings,
    output_dir: str | os.PathLike,
    overwrite: bool = False,
) -> None:
    """Writes the serving SavedModel (signature `serving_default`) atomically to `output_dir`."""
    module = ServingModule(model, tokenizer, settings)
    signature = _signature(module, settings)
    with atomic_dir(output_dir, overwrite=overwrite) as tmp:
        tf.saved_model.save(module, str(tmp), signatures={"serving_default": signature})
