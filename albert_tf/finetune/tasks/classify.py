"""classify: one label per text or text pair (GLUE TSV, CSV, JSONL), optionally over windows.

With `max_windows` > 1 a long text is read as up to that many windows (`finetune.windows`).
Training: every window is a training example with its text's label. Prediction (evaluation,
`predict`, serving): the encoder and head run on each real window of a text and the window
logits are pooled into the text's, by their mean unless `window_pooling` is "max".

Why these two. A window whose text says nothing about the label learns to be unsure (logits near
0), so it barely moves the mean, while the window that holds the evidence decides; yet no single
overconfident window can outvote all the others, as it can under max pooling, and the mean is the
natural rule for regression too. Putting the loss on the pooled logits instead divides each
window's gradient by the number of windows: on the synthetic long documents of
tests/finetune/test_finetune_windows.py (initializer_range 0.02, one run each) that training needed
7 epochs to reach accuracy 0.95 where per-window labels needed 3.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.finetune import data, features, metrics, windows
from albert_tf.finetune.metrics import softmax
from albert_tf.finetune.tasks.base import Task, TaskData


class Classify(Task):
    name = "classify"
    best_metric = "accuracy"

    # === Files ===

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        s = self.settings
        examples = data.read_text_file(
            path,
            task=self.name,
            text_column=s.text_column,
            text_pair_column=s.text_pair_column,
            label_column=s.label_column,
            has_header=s.has_header,
            quoting=s.quoting,
            require_labels=require_labels,
        )
        return examples, {}

    def configure(self, examples: list, path: str) -> None:
        labels = self.settings.labels or data.label_list([e.label for e in examples], path)
        has_pair = any(e.text_b is not None for e in examples)
        self.settings = self.settings.replace(labels=labels, has_pair=has_pair)

    def targets(self, examples: list) -> np.ndarray | None:
        """Label ids [N] (DataError for a label unseen in training); None if any is missing."""
        data.check_labels([(e.source, e.label) for e in examples], self.settings.labels)
        if not all(e.label is not None for e in examples):
            return None
        index = {label: i for i, label in enumerate(self.settings.labels)}
        return np.asarray([index[e.label] for e in examples], np.int32)

    def encode(self, examples: list, tokenizer: Any, training: bool) -> TaskData:
        s = self.settings
        targets = self.targets(examples)
        if s.max_windows > 1:
            windowed = windows.encode_windows(
                examples,
                tokenizer,
                s.max_seq_length,
                s.max_windows,
                s.window_stride,
                s.max_first_segment_length,
                s.window_placement,
            )
            return TaskData(windowed.inputs, targets, examples, windowed.skipped())
        encoded = features.encode_text(examples, tokenizer, s.max_seq_length)
        skipped = {"truncated to --max-seq-length": encoded.truncated} if encoded.truncated else {}
        return TaskData(encoded.inputs, targets, examples, skipped)

    # === Model ===

    def training_rows(self, task_data: TaskData) -> tuple[dict[str, np.ndarray], Any]:
        """With windows, every real window is a training row [W, S] with its text's label."""
        if self.settings.max_windows == 1:
            return task_data.inputs, task_data.labels
        present = task_data.inputs["input_mask"][:, :, 0] > 0  # [N, K]
        inputs = {k: v[present] for k, v in task_data.inputs.items()}  # [W, S]
        return inputs, np.repeat(task_data.labels, present.sum(axis=1), axis=0)

    def num_outputs(self) -> int:
        return len(self.settings.labels)

    def forward(self, encoder: Any, head: Any, inputs: dict, training: bool | None) -> dict:
        def logits(window_inputs: dict) -> Any:
            return head(encoder(window_inputs, training=training), training=training)

        if inputs["input_word_ids"].shape.rank == 3:  # windows [B, K, S]
            return self.outputs(windows.pool_windows(logits, inputs, self.settings.window_pooling))
        return self.outputs(logits(inputs))

    def outputs(self, logits: Any) -> dict:
        """The model's outputs from the (pooled) head logits [B, num_outputs]."""
        return {"logits": logits}

    # === Predictions ===

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        labels = self.settings.labels
        return [
            {
                "label": labels[int(p.argmax())],
                "probabilities": dict(zip(labels, p.tolist(), strict=True)),
            }
            for p in softmax(outputs["logits"])
        ]

    def evaluate(self, records: list[dict], task_data: TaskData) -> dict[str, float]:
        index = {label: i for i, label in enumerate(self.settings.labels)}
        gold = [index[e.label] for e in task_data.examples]
        predicted = [index[r["label"]] for r in records]
        scores = {
            "accuracy": metrics.accuracy(gold, predicted),
            "mcc": metrics.matthews_corrcoef(gold, predicted),
        }
        if len(index) == 2:
            scores["f1"] = metrics.f1_binary(gold, predicted)
        else:
            scores["f1_macro"] = metrics.f1_macro(gold, predicted)
        return scores

    # === Serving ===

    def serving_function(self, module: Any) -> Any:
        """`text` [B] (+ `text_pair` [B] for pair tasks) -> `label` string [B], `label_id`
        int32 [B], `probabilities` float32 [B, L], `logits` [B, L]."""
        string = tf.TensorSpec([None], tf.string)
        if self.settings.has_pair:
            fn = tf.function(lambda text, text_pair: self.serve(module, text, text_pair))
            return fn.get_concrete_function(text=string, text_pair=string)
        return tf.function(lambda text: self.serve(module, text)).get_concrete_function(text=string)

    def serve(self, module: Any, text: Any, text_pair: Any = None) -> dict:
        """Serving outputs of raw strings: the same features (windows) as `encode`."""
        s = self.settings
        segments = [module.tokenizer.tokenize(text)]
        if text_pair is not None:
            segments.append(module.tokenizer.tokenize(text_pair))
        if s.max_windows > 1:
            first, text_tokens = (None, *segments) if len(segments) == 1 else segments
            inputs = windows.graph_windows(
                first,
                text_tokens,
                s.max_seq_length,
                s.max_windows,
                s.window_stride,
                s.max_first_segment_length,
                module.pack,
                s.window_placement,
            )
        else:
            inputs = module.pack(segments)
        return self.serving_outputs(module, module.call_model(inputs))

    def serving_outputs(self, module: Any, outputs: dict) -> dict:
        logits = outputs["logits"]
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "label": tf.gather(module.labels, label_id),
            "label_id": label_id,
            "probabilities": tf.nn.softmax(logits),
            "logits": logits,
        }
