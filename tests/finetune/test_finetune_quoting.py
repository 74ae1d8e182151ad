"""TSV files read as their writer meant them: Python's csv module and pandas quote, GLUE does
not; and a model trained on quoted rows (with windows) predicts the same through `predict`,
evaluation and the serving SavedModel on the raw strings."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.errors import DataError
from albert_tf.finetune import data
from albert_tf.finetune.inference import batched_outputs
from albert_tf.finetune.predict import load_finetuned, predict_file
from tests.helpers import finetune_files

HARD_ROWS = [
    ('She said "no" twice.', 'Is it "no"?', "no"),
    ("a tab\there and\ttwo", "plain", "yes"),
    ("line one\nline two\r\nline three", 'ends with a quote"', "yes"),
    ('"fully quoted"', "", "no"),
    ("  padded  ", "x\ty", "no"),
]


def write_csv_tsv(path, rows, lineterminator="\r\n"):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator=lineterminator)
        writer.writerow(["sentence1", "sentence2", "label"])
        writer.writerows(rows)


def read_back(path, **kwargs):
    return [(e.text_a, e.text_b, e.label) for e in data.read_text_file(path, **kwargs)]


@pytest.mark.parametrize("lineterminator", ["\r\n", "\n"])
def test_csv_written_tsv_round_trips(tmp_path, lineterminator):
    path = tmp_path / "written.tsv"
    write_csv_tsv(path, HARD_ROWS, lineterminator)
    assert read_back(path) == HARD_ROWS
    assert read_back(path, quoting="csv") == HARD_ROWS
    # the third record spans three lines: errors and sources name the line a record starts on
    assert [e.source for e in data.read_text_file(path)][3] == f"{path}:7"


def test_a_quoted_field_past_128_kib_reads_whole(tmp_path):
    rows = [('a "long" document: ' + "word " * 40_000, "", "yes")]  # 200 kB, csv's limit 128 KiB
    write_csv_tsv(tmp_path / "long.tsv", rows)
    assert read_back(tmp_path / "long.tsv") == rows


def test_pandas_written_tsv_round_trips(tmp_path):
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "pandas.tsv"
    frame = pandas.DataFrame(HARD_ROWS, columns=["sentence1", "sentence2", "label"])
    frame.to_csv(path, sep="\t", index=False)
    assert read_back(path) == HARD_ROWS


GLUE_LINES = [
    "index\tsentence1\tsentence2\tlabel",
    '0\t"Yes," he said, "it is."\tHe agreed.\tentailment',
    '1\tit \'s a "charming" film\t"whole field in quotes"\tneutral',
    '2\t"unclosed quote\tplain\tcontradiction',
    '3\t""\t"\tneutral',
]


def test_glue_tsv_reads_exactly_as_written(tmp_path):
    path = tmp_path / "mnli.tsv"
    path.write_text("\n".join(GLUE_LINES) + "\n", encoding="utf-8")
    expected = [tuple(line.split("\t")[1:]) for line in GLUE_LINES[1:]]
    assert read_back(path) == expected
    assert read_back(path, quoting="none") == expected
    with pytest.raises(DataError, match=rf"{path}:2: malformed quoted field .*--quoting"):
        data.read_text_file(path, quoting="csv")


def test_ragged_rows_name_their_line(tmp_path):
    path = tmp_path / "written.tsv"
    write_csv_tsv(path, HARD_ROWS, "\n")
    # read without quoting, the embedded tab of record 2 (line 3) makes a fourth field
    with pytest.raises(DataError, match=rf"^{path}:3: expected 3 fields like the header, got 5$"):
        data.read_text_file(path, quoting="none")
    headless = tmp_path / "headless.tsv"
    headless.write_text("a\t1\nb\t0\textra\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{headless}:2: expected 2 fields like line 1, got 3"):
        data.read_text_file(headless, text_column="0", label_column="1", has_header=False)


def quoted_pairs(count, seed):
    """Sentence pairs whose label shows in the second text; quotes, tabs and line breaks in both,
    and second texts long enough for several windows."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in range(count):
        label = ["no", "yes"][int(rng.integers(2))]
        word = "good" if label == "yes" else "bad"
        filler = " ".join(["more\twords,", 'a "quoted" bit\nand'] * int(rng.integers(1, 6)))
        rows.append((f'Q{n}: is it "worth it"?\tmaybe', f"{filler} it was {word}.", label))
    return rows


@pytest.mark.slow
def test_predict_evaluation_and_serving_agree_on_quoted_rows(tmp_path, fixtures_dir):
    write_csv_tsv(tmp_path / "train.tsv", quoted_pairs(24, seed=0))
    dev_rows = quoted_pairs(10, seed=1)
    write_csv_tsv(tmp_path / "dev.tsv", dev_rows)
    result = finetune_files(
        tmp_path,
        "classify",
        max_seq_length=24,
        max_windows=3,
        window_stride=8,
        epochs=1,
        batch_size=8,
        learning_rate=1e-3,
        dtype="float32",
    )
    meta = json.loads((tmp_path / "model" / "finetune.json").read_text())
    assert meta["skipped"]["eval"]["tokens in no window"] > 0
    # evaluation: the in-memory model on the file's features, as the trainer scores each epoch
    dev = result.task.load(str(tmp_path / "dev.tsv"), result.tokenizer)
    assert dev.inputs["input_word_ids"].shape == (10, 3, 24)
    logits = batched_outputs(result.model, dev.inputs, 4)["logits"]
    records, scores, _ = predict_file(load_finetuned(tmp_path / "model"), str(tmp_path / "dev.tsv"))
    assert scores == meta["history"][-1]["eval"]
    probabilities = [list(r["probabilities"].values()) for r in records]
    np.testing.assert_allclose(probabilities, tf.nn.softmax(logits).numpy(), atol=1e-5)
    serving = tf.saved_model.load(str(tmp_path / "model" / "serving")).signatures["serving_default"]
    got = serving(
        text=tf.constant([a for a, _, _ in dev_rows]),
        text_pair=tf.constant([b for _, b, _ in dev_rows]),
    )
    np.testing.assert_allclose(got["logits"].numpy(), logits, atol=1e-5)
    np.testing.assert_allclose(got["probabilities"].numpy(), probabilities, atol=1e-5)
