"""tag: CoNLL files; each word tokenized alone, the head on `sequence_output` tags the word's first
piece; words past `max_seq_length` get the default tag ("O" when it is a tag).

CoNLL-2003 style files (`read_conll`): one token per line, tag in the last column, blank line
between sentences, `-DOCSTART-` lines ignored.

With `max_windows` > 1 a long sentence's pieces are read in windows (`finetune.windows`); every
window is a training row, and a word's tag comes from the mean of its first piece's logits over
the windows that hold that piece (the same mean pooling as `classify`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.errors import DataError
from albert_tf.finetune import data, features, metrics, windows
from albert_tf.finetune.data import TagExample
from albert_tf.finetune.tasks.base import Task, TaskData


def read_conll(path: str | os.PathLike, require_labels: bool = True) -> list[TagExample]:
    """Reads CoNLL-style tagging data: `word ... tag` per line, blank lines between sentences.

    With `require_labels` False a line holding only the word is allowed (tags None).
    """
    path = data.check_file(path)
    examples: list[TagExample] = []
    words: list[str] = []
    tags: list[str] = []
    start = 1

    def flush() -> None:
        if words:
            labelled = tags if len(tags) == len(words) else None
            examples.append(
                TagExample(
                    tuple(words), None if labelled is None else tuple(labelled), f"{path}:{start}"
                )
            )
        words.clear()
        tags.clear()

    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                flush()
                continue
            if fields[0] == "-DOCSTART-":
                flush()
                continue
            if not words:
                start = number
            if len(fields) < 2:
                if require_labels:
                    raise DataError(
                        f"{path}:{number}: expected 'word ... tag', got {line.strip()!r}"
                    )
            else:
                tags.append(fields[-1])
            words.append(fields[0])
    flush()
    return examples


class Tag(Task):
    name = "tag"
    best_metric = "f1"
    reads = "sequence_output"

    def default_tag(self) -> str:
        """The tag of words cut off by --max-seq-length."""
        labels = self.settings.labels
        return "O" if "O" in labels else labels[0]

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        return read_conll(path, require_labels=require_labels), {}

    def configure(self, examples: list, path: str) -> None:
        if self.settings.labels is None:
            labels = sorted({t for e in examples for t in e.tags})
            if not labels:
                raise DataError(f"{path}: no tags found")
            self.settings = self.settings.replace(labels=labels)

    def encode(self, examples: list, tokenizer: Any, training: bool) -> TaskData:
        for e in examples:
            data.check_labels([(e.source, t) for t in e.tags or ()], self.settings.labels)
        s = self.settings
        if s.max_windows > 1:
            encoded = windows.encode_tag_windows(
                examples,
                tokenizer,
                s.max_seq_length,
                s.max_windows,
                s.window_stride,
                s.labels,
                s.window_placement,
            )
            skipped = windows.cut_report(encoded.truncated, encoded.extra["tokens_cut"])
        else:
            encoded = features.encode_tags(examples, tokenizer, s.max_seq_length, s.labels)
            what = "truncated to --max-seq-length"
            skipped = {what: encoded.truncated} if encoded.truncated else {}
        return TaskData(
            encoded.inputs, encoded.labels, examples, skipped, word_index=encoded.word_index
        )

    def num_outputs(self) -> int:
        return len(self.settings.labels)

    def training_rows(self, task_data: TaskData) -> tuple[dict[str, np.ndarray], Any]:
        """With windows, every real window is a training row [W, S] with its pieces' tags."""
        if self.settings.max_windows == 1:
            return task_data.inputs, task_data.labels
        present = task_data.inputs["input_mask"][:, :, 0] > 0  # [N, K]
        return {k: v[present] for k, v in task_data.inputs.items()}, task_data.labels[present]

    def forward(self, encoder: Any, head: Any, inputs: dict, training: bool | None) -> dict:
        def logits(window_inputs: dict) -> Any:
            return head(encoder(window_inputs, training=training), training=training)

        if inputs["input_word_ids"].shape.rank == 3:  # windows [B, K, S] -> logits [B, K, S, T]
            return {"logits": windows.window_outputs(logits, inputs)}
        return {"logits": logits(inputs)}

    def loss(self, outputs: dict, labels: Any) -> Any:
        """Cross-entropy over the first pieces of words (label -100 elsewhere is ignored)."""
        labels = tf.cast(labels, tf.int32)
        weights = tf.cast(labels >= 0, tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
            tf.maximum(labels, 0), outputs["logits"]
        )
        return tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)

    def trim_batch(self, inputs: dict, targets: Any) -> tuple[dict, Any]:
        inputs, targets = super().trim_batch(inputs, targets)
        return inputs, targets[:, : tf.shape(inputs["input_mask"])[-1]]  # [B, L]

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        labels, records = self.settings.labels, []
        count = len(task_data.examples)
        logits = outputs["logits"].reshape(count, -1, len(labels))  # [N, K * S, T]
        word_index = task_data.word_index.reshape(count, -1)  # [N, K * S]
        for n, example in enumerate(task_data.examples):
            first = word_index[n] >= 0
            # mean of each word's first-piece logits over the windows that hold it
            sums = np.zeros((len(example.words), len(labels)))
            np.add.at(sums, word_index[n][first], logits[n][first])
            seen = np.bincount(word_index[n][first], minlength=len(example.words))
            tags = [
                labels[int(total.argmax())] if times else self.default_tag()
                for total, times in zip(sums / np.maximum(seen, 1)[:, None], seen, strict=True)
            ]
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
        fn = tf.function(lambda sentence: self.serve(module, sentence))
        return fn.get_concrete_function(sentence=tf.TensorSpec([None], tf.string))

    def serve(self, module: Any, sentence: Any) -> dict:
        words = tf.strings.split(sentence)  # [B, (W)]
        pieces = module.tokenizer.tokenize(words.flat_values)  # [N, (P)]
        # A word that normalizes to nothing becomes one <unk> (as features.word_pieces).
        empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unk = tf.fill([tf.reduce_sum(empty)], tf.constant(module.tokenizer.unk_id, pieces.dtype))
        pieces = tf.concat([pieces, tf.RaggedTensor.from_row_lengths(unk, empty)], axis=1)
        per_word = tf.RaggedTensor.from_row_splits(pieces, words.row_splits)  # [B, (W), (P)]
        if self.settings.max_windows > 1:
            tags = self.window_tags(module, per_word)
        else:
            tags = self.first_window_tags(module, per_word)
        return {
            "tags": tags.to_tensor(default_value=""),
            "num_words": tf.cast(words.row_lengths(), tf.int32),
        }

    def first_window_tags(self, module: Any, per_word: Any) -> Any:
        """string [B, (W)]: tags of the whole words that fit one window, the default after."""
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
        cut = per_word.row_lengths() - tags.row_lengths()
        filler = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(cut)], tf.constant(self.default_tag())), cut
        )
        return tf.concat([tags, filler], axis=1)

    def window_tags(self, module: Any, per_word: Any) -> Any:
        """string [B, (W)]: each word's tag from the mean of its first piece's logits over the
        windows holding that piece (`encode_tag_windows`); the default tag where no window is."""
        s, length = self.settings, self.settings.max_seq_length
        tokens = per_word.merge_dims(1, 2)  # [B, (T)]
        inputs = windows.graph_windows(
            None,
            tokens,
            length,
            s.max_windows,
            s.window_stride,
            None,
            module.pack,
            s.window_placement,
        )
        logits = module.call_model(inputs)["logits"]  # [B, K, S, T]
        room = tf.fill([tokens.nrows()], tf.constant(length - 2, tf.int64))  # [B]
        starts, exists = windows.graph_window_plan(
            tf.cast(tokens.row_lengths(), tf.int64),
            room,
            s.max_windows,
            s.window_stride,
            s.window_placement,
        )  # [B, K] each
        first = tf.cumsum(per_word.row_lengths(axis=2), axis=1, exclusive=True)  # [B, (W)]
        offset = first.to_tensor()[:, tf.newaxis, :] - starts[:, :, tf.newaxis]  # [B, K, W]
        held = (offset >= 0) & (offset < length - 2) & exists[:, :, tf.newaxis]  # [B, K, W]
        position = tf.clip_by_value(offset + 1, 0, length - 1)  # after [CLS]
        picked = tf.gather(logits, position, batch_dims=2)  # [B, K, W, T]
        weight = tf.cast(held, logits.dtype)[..., tf.newaxis]  # [B, K, W, 1]
        seen = tf.reduce_sum(weight, axis=1)  # [B, W, 1]
        mean = tf.reduce_sum(picked * weight, axis=1) / tf.maximum(seen, 1.0)  # [B, W, T]
        tag_ids = tf.argmax(mean, axis=-1, output_type=tf.int32)  # [B, W]
        default = tf.constant(self.default_tag())
        tags = tf.where(seen[..., 0] > 0, tf.gather(module.labels, tag_ids), default)  # [B, W]
        return tf.RaggedTensor.from_tensor(tags, lengths=per_word.row_lengths())
