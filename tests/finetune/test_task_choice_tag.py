"""Multiple choice (RACE files) and tagging (CoNLL files) end to end, with serving."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import cli
from albert_tf.finetune.inference import batched_outputs
from tests.helpers import finetune_files

pytestmark = pytest.mark.slow

FAST = dict(epochs=1, batch_size=4, learning_rate=1e-3, dtype="float32", seed=4)


def write_race(directory, count, seed):
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    colours = ["red", "blue", "green", "black"]
    for n in range(count):
        colour = rng.choice(colours)
        record = {
            "answers": ["ABCD"[colours.index(colour)], "A"],
            "options": [colours, ["yes", "no", "maybe", "never"]],
            "questions": ["The car is _ .", "Is the car real?"],
            "article": f"Tom has a {colour} car. It is real.",
            "id": f"high{n}.txt",
        }
        (directory / f"{n}.txt").write_text(json.dumps(record))


def test_multiple_choice_race(tmp_path, fixtures_dir):
    write_race(tmp_path / "RACE" / "train" / "high", 6, seed=0)
    write_race(tmp_path / "RACE" / "dev" / "high", 2, seed=1)
    result = finetune_files(
        tmp_path,
        "multiple-choice",
        max_seq_length=24,
        **FAST,
        train_file="RACE/train",
        eval_file="RACE/dev",
    )
    assert result.record.best_metric == "accuracy"
    dev = result.task.load(str(tmp_path / "RACE" / "dev"), result.tokenizer)
    assert dev.inputs["input_word_ids"].shape == (4, 4, 24)
    outputs = batched_outputs(result.model, dev.inputs, 8)
    expected = result.task.decode(outputs, dev)
    out = tmp_path / "pred.jsonl"
    argv = [
        "predict",
        "--checkpoint",
        tmp_path / "model",
        "--input",
        tmp_path / "RACE" / "dev",
        "--output",
        out,
    ]
    assert cli.main(list(map(str, argv))) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == json.loads(
        json.dumps(expected)
    )
    serving = tf.saved_model.load(str(tmp_path / "model" / "serving")).signatures["serving_default"]
    got = serving(
        context=tf.constant([e.context for e in dev.examples]),
        question=tf.constant([e.question for e in dev.examples]),
        options=tf.constant([list(e.choices) for e in dev.examples]),
    )
    np.testing.assert_allclose(
        got["probabilities"].numpy(), [r["probabilities"] for r in expected], atol=1e-5
    )
    assert [x.decode() for x in got["label"].numpy()] == [r["label"] for r in expected]


def write_conll(path, count, seed):
    rng = random.Random(seed)
    names, places = ["Peter", "Maria", "Chen"], ["Paris", "Lagos", "Lima"]
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(count):
        name, place = rng.choice(names), rng.choice(places)
        words = [
            (name, "B-PER"),
            ("Blackburn", "I-PER"),
            ("visited", "O"),
            (place, "B-LOC"),
            ("yesterday", "O"),
        ]
        lines += [f"{w} NNP B-NP {t}" for w, t in words] + [""]
    path.write_text("\n".join(lines))


def test_tagging_conll(tmp_path, fixtures_dir):
    write_conll(tmp_path / "train.txt", 8, seed=0)
    write_conll(tmp_path / "dev.txt", 3, seed=1)
    # 12 positions: the 5-word sentences lose their last words, so the cut is exercised too
    result = finetune_files(
        tmp_path,
        "tag",
        max_seq_length=12,
        **FAST,
        train_file="train.txt",
        eval_file="dev.txt",
    )
    assert result.settings.labels == ("B-LOC", "B-PER", "I-PER", "O")
    assert result.record.skipped["train"]["truncated to --max-seq-length"] == 8
    dev = result.task.load(str(tmp_path / "dev.txt"), result.tokenizer)
    expected = result.task.decode(batched_outputs(result.model, dev.inputs, 8), dev)
    assert all(len(r["tags"]) == 5 and r["tags"][-1] == "O" for r in expected)
    serving = tf.saved_model.load(str(tmp_path / "model" / "serving")).signatures["serving_default"]
    got = serving(sentence=tf.constant([" ".join(e.words) for e in dev.examples]))
    assert got["num_words"].numpy().tolist() == [5, 5, 5]
    assert [[t.decode() for t in row] for row in got["tags"].numpy()] == [
        r["tags"] for r in expected
    ]


def test_tagging_long_sentences_over_windows(tmp_path):
    write_conll(tmp_path / "train.txt", 8, seed=0)
    rng = random.Random(2)
    long_lines = []
    for _ in range(3):  # 2 sentences of 5 words run together: 10 words, ~56 pieces each
        words = []
        for _ in range(2):
            words += [(rng.choice(["Peter", "Maria"]), "B-PER"), ("Blackburn", "I-PER")]
            words += [("visited", "O"), (rng.choice(["Paris", "Lima"]), "B-LOC"), ("today", "O")]
        long_lines += [f"{w} {t}" for w, t in words] + [""]
    (tmp_path / "dev.txt").write_text("\n".join(long_lines))
    windows = dict(max_seq_length=12, max_windows=12, window_stride=6)
    result = finetune_files(
        tmp_path, "tag", **windows, **FAST, eval_file="dev.txt", train_file="train.txt"
    )
    dev = result.task.load(str(tmp_path / "dev.txt"), result.tokenizer)
    assert dev.inputs["input_word_ids"].shape == (3, 12, 12)
    assert "tokens in no window" not in dev.skipped  # 12 windows reach piece 76
    expected = result.task.decode(batched_outputs(result.model, dev.inputs, 2), dev)
    assert [len(r["tags"]) for r in expected] == [10, 10, 10]
    serving = tf.saved_model.load(str(tmp_path / "model" / "serving")).signatures["serving_default"]
    got = serving(sentence=tf.constant([" ".join(e.words) for e in dev.examples]))
    assert [[t.decode() for t in row] for row in got["tags"].numpy()] == [
        r["tags"] for r in expected
    ]
