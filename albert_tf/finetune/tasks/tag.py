"""tag: CoNLL files; each word tokenized alone, the head on `sequence_output` tags the word's first
piece; words past `max_seq_length` get the default tag ("O" when it is a tag)."""

from __future__ import annotations

from typing import Any

import numpy as np

from albert_tf.errors import DataError
from albert_tf.finetune import data, features, metrics
from albert_tf.finetune.tasks.base import Task, TaskData


class Tag(Task):
    name = "tag"
    best_metric = "f1"
    reads = "sequence_output"

    def default_tag(self) -> str:
        """The tag of words cut off by --max-seq-length."""
        labels = self.settings.labels
        return "O" if "O" in labels else labels[0]

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        return data.read_conll(path, require_labels=require_labels), {}

    def configure(self, examples: list, path: str) -> None:
        if self.settings.labels is None:
            self.settings.labels = sorted({t for e in examples for t in e.tags})
            if not self.settings.labels:
                raise DataError(f"{path}: no tags found")

    def encode(self, examples: list, tokenizer: Any, training: bool) -> TaskData:
        for e in examples:
            data.check_labels([(e.source, t) for t in e.tags or ()], self.settings.labels)
        encoded = features.encode_tags(
            examples, tokenizer, self.settings.max_seq_length, self.settings.labels
        )
        skipped = {"truncated to --max-seq-length": encoded.truncated} if encoded.truncated else {}
        return TaskData(
            encoded.inputs, encoded.labels, examples, skipped, word_index=encoded.word_index
        )

    def num_outputs(self) -> int:
        return len(self.settings.labels)

    def loss(self, outputs: dict, labels: Any) -> Any:
        """Cross-entropy over the first pieces of words (label -100 elsewhere is ignored)."""
        import tensorflow as tf

        labels = tf.cast(labels, tf.int32)
        weights = tf.cast(labels >= 0, tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
            tf.maximum(labels, 0), outputs["logits"]
        )
        return tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)

    def trim_batch(self, inputs: dict, targets: Any) -> tuple[dict, Any]:
        import tensorflow as tf

        inputs, targets = super().trim_batch(inputs, targets)
        return inputs, targets[:, : tf.shape(inputs["input_mask"])[-1]]  # [B, L]

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        logits, labels, records = outputs["logits"], self.settings.labels, []
        for n, example in enumerate(task_data.examples):
            tags = [self.default_tag()] * len(example.words)
            for position in np.nonzero(task_data.word_index[n] >= 0)[0]:
                tags[task_data.word_index[n, position]] = labels[int(logits[n, position].argmax())]
            records.append({"words": list(example.words), "tags": tags})
        return records

    def evaluate(self, records: list[dict], task_data: TaskData) -> dict[str, float]:
        gold = [t for e in task_data.examples for t in e.tags]
        predicted = [t for r in records for t in r["tags"]]
        outside = "O" if "O" in self.settings.labels else None
        tp = sum(g == p and g != outside for g, p in zip(gold, predicted, strict=True))
        n_pred = sum(p != outside for p in predicted)
        n_gold = sum(g != outside for g in gold)
        f1 = 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0
        return {"accuracy": metrics.accuracy(gold, predicted), "f1": f1}

    def has_labels(self, task_data: TaskData) -> bool:
        return all(e.tags is not None for e in task_data.examples)

    def serving_function(self, module: Any) -> Any:
        """`sentence` [B] (words separated by spaces) -> `tags` string [B, W] ("" past each
        sentence's words), `num_words` int32 [B]."""
        import tensorflow as tf

        fn = tf.function(lambda sentence: self.serve(module, sentence))
        return fn.get_concrete_function(sentence=tf.TensorSpec([None], tf.string))

    def serve(self, module: Any, sentence: Any) -> dict:
        import tensorflow as tf

        words = tf.strings.split(sentence)  # [B, (W)]
        pieces = module.tokenizer.tokenize(words.flat_values)  # [N, (P)]
        # A word that normalizes to nothing becomes one <unk> (as features.word_pieces).
        empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unk = tf.fill([tf.reduce_sum(empty)], tf.constant(module.tokenizer.unk_id, pieces.dtype))
        pieces = tf.concat([pieces, tf.RaggedTensor.from_row_lengths(unk, empty)], axis=1)
        per_word = tf.RaggedTensor.from_row_splits(pieces, words.row_splits)  # [B, (W), (P)]
        counts = per_word.row_lengths(axis=2)  # [B, (W)]
        kept = tf.cumsum(counts, axis=1) <= self.settings.max_seq_length - 2  # whole words that fit
        kept_words = tf.ragged.boolean_mask(per_word, kept)  # [B, (W'), (P)]
        packed = module.pack([kept_words.merge_dims(1, 2)])  # [B, S]
        logits = module.call_model(packed)["logits"]  # [B, S, T]
        # Position of each kept word's first piece in the packed sequence (after [CLS]).
        positions = tf.cumsum(kept_words.row_lengths(axis=2), axis=1, exclusive=True) + 1
        tag_ids = tf.argmax(
            tf.gather(logits, positions.to_tensor(), batch_dims=1), axis=-1, output_type=tf.int32
        )
        tags = tf.RaggedTensor.from_tensor(
            tf.gather(module.labels, tag_ids), lengths=positions.row_lengths()
        )
        num_words = words.row_lengths()
        cut = num_words - tags.row_lengths()
        filler = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(cut)], tf.constant(self.default_tag())), cut
        )
        return {
            "tags": tf.concat([tags, filler], axis=1).to_tensor(default_value=""),
            "num_words": tf.cast(num_words, tf.int32),
        }
