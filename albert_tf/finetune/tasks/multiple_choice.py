"""multiple-choice: RACE files; one `[CLS] article [SEP] question+option [SEP]` per option, the
pooled output of each scored by the head, softmax over the options.

RACE JSON is read as in the released RACE tree: one JSON object per file (`read_race`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.errors import DataError
from albert_tf.finetune import data, features, metrics
from albert_tf.finetune.data import ChoiceExample
from albert_tf.finetune.metrics import softmax
from albert_tf.finetune.tasks.base import Task, TaskData

LETTERS = "ABCDEFGHIJ"


def _race_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".txt", ".json"))
        if not files:
            raise DataError(f"{path}: no RACE .txt/.json files inside")
        return files
    return [data.check_file(path)]


def read_race(path: str | os.PathLike, require_labels: bool = True) -> list[ChoiceExample]:
    """Reads RACE: a file or a directory tree of files holding `{"article", "questions",
    "options", "answers", "id"}` objects (one per file, or one per line)."""
    examples = []
    for file in _race_files(Path(path)):
        with open(file, encoding="utf-8") as f:
            lines = [(n, line) for n, line in enumerate(f, 1) if line.strip()]
        if (
            len(lines) > 1
            and lines[0][1].lstrip().startswith("{")
            and lines[0][1].rstrip().endswith("}")
        ):
            records = lines
        else:
            records = [(lines[0][0] if lines else 1, "".join(line for _, line in lines))]
        for number, text in records:
            source = f"{file}:{number}"
            try:
                record = json.loads(text)
                article, questions = record["article"], record["questions"]
                options, answers = record["options"], record.get("answers")
            except json.JSONDecodeError as e:
                raise DataError(f"{source}: invalid JSON ({e.msg})") from None
            except (KeyError, TypeError):
                raise DataError(
                    f"{source}: a RACE record needs article, questions, options"
                ) from None
            if len(options) != len(questions) or (
                answers is not None and len(answers) != len(questions)
            ):
                raise DataError(f"{source}: questions, options and answers differ in length")
            for i, (question, choices) in enumerate(zip(questions, options, strict=True)):
                label = None
                if answers is not None:
                    letter = str(answers[i]).strip().upper()
                    if len(letter) != 1 or not 0 <= ord(letter) - ord("A") < len(choices):
                        raise DataError(
                            f"{source}: answer {answers[i]!r} of question {i} is not an option letter"
                        )
                    label = ord(letter) - ord("A")
                elif require_labels:
                    raise DataError(f"{source}: missing answers")
                qid = f"{record.get('id', file.name)}-{i}"
                examples.append(
                    ChoiceExample(qid, article, question, tuple(choices), label, source)
                )
    return examples


class MultipleChoice(Task):
    name = "multiple-choice"
    best_metric = "accuracy"

    def read(self, path: str, training: bool, require_labels: bool) -> tuple[list, dict[str, int]]:
        return read_race(path, require_labels=require_labels), {}

    def encode(self, examples: list, tokenizer: Any, training: bool) -> TaskData:
        encoded = features.encode_choices(examples, tokenizer, self.settings.max_seq_length)
        skipped = {"truncated to --max-seq-length": encoded.truncated} if encoded.truncated else {}
        return TaskData(encoded.inputs, encoded.labels, examples, skipped)

    def input_shape(self) -> list[int]:
        return [1, 1, self.settings.max_seq_length]

    def forward(self, encoder: Any, head: Any, inputs: dict, training: bool | None) -> dict:
        shape = tf.shape(inputs["input_word_ids"])  # [B, C, S]
        flat = {k: tf.reshape(v, [-1, shape[2]]) for k, v in inputs.items()}  # [B * C, S]
        logits = head(encoder(flat, training=training), training=training)  # [B * C, 1]
        return {"logits": tf.reshape(logits, [-1, shape[1]])}  # [B, C]

    def decode(self, outputs: dict[str, np.ndarray], task_data: TaskData) -> list[dict]:
        return [
            {"id": e.qid, "label": LETTERS[int(p.argmax())], "probabilities": p.tolist()}
            for e, p in zip(task_data.examples, softmax(outputs["logits"]), strict=True)
        ]

    def evaluate(self, records: list[dict], task_data: TaskData) -> dict[str, float]:
        gold = [e.label for e in task_data.examples]
        predicted = [LETTERS.index(r["label"]) for r in records]
        return {"accuracy": metrics.accuracy(gold, predicted)}

    def serving_function(self, module: Any) -> Any:
        """`context` [B], `question` [B], `options` [B, C] -> `label` ("A", "B", ...) [B],
        `label_id` [B], `probabilities` [B, C]."""
        string = tf.TensorSpec([None], tf.string)
        fn = tf.function(
            lambda context, question, options: self.serve(module, context, question, options)
        )
        return fn.get_concrete_function(
            context=string, question=string, options=tf.TensorSpec([None, None], tf.string)
        )

    def serve(self, module: Any, context: Any, question: Any, options: Any) -> dict:
        length = self.settings.max_seq_length
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
        packed = module.pack([module.tokenizer.tokenize(contexts), module.tokenizer.tokenize(qa)])
        packed = {k: tf.reshape(v, [shape[0], shape[1], length]) for k, v in packed.items()}
        logits = module.call_model(packed)["logits"]  # [B, C]
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "label": tf.gather(tf.constant(list(LETTERS)), label_id),
            "label_id": label_id,
            "probabilities": tf.nn.softmax(logits),
        }
