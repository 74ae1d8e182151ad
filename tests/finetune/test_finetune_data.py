"""Task file readers: GLUE TSV, CSV, JSONL, RACE, CoNLL, and their error messages."""

from __future__ import annotations

import json

import pytest

from albert_tf.errors import DataError
from albert_tf.finetune import data
from albert_tf.finetune.tasks.multiple_choice import read_race
from albert_tf.finetune.tasks.tag import read_conll


def test_glue_tsv_sst2_and_pairs(tmp_path):
    sst = tmp_path / "sst.tsv"
    sst.write_text('sentence\tlabel\nit \'s a "charming" film\t1\nbad\t0\n', encoding="utf-8")
    examples = data.read_text_file(sst)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ('it \'s a "charming" film', None, "1"),
        ("bad", None, "0"),
    ]
    assert examples[1].source == f"{sst}:3"
    rte = tmp_path / "rte.tsv"
    rte.write_text("index\tsentence1\tsentence2\tlabel\n0\tA man.\tA person.\tentailment\n")
    (example,) = data.read_text_file(rte)
    assert (example.text_a, example.text_b, example.label) == ("A man.", "A person.", "entailment")
    sts = tmp_path / "sts.tsv"
    sts.write_text("genre\tsentence1\tsentence2\tscore\nx\ta\tb\t3.8\n")
    assert data.read_text_file(sts, task="regress")[0].label == pytest.approx(3.8)


def test_cola_without_header_by_index(tmp_path):
    cola = tmp_path / "cola.tsv"
    cola.write_text("gj04\t1\t\tOur friends won't buy this.\ngj04\t0\t*\tThey drank the pub.\n")
    examples = data.read_text_file(cola, text_column="3", label_column="1", has_header=False)
    assert [(e.text_a, e.label) for e in examples] == [
        ("Our friends won't buy this.", "1"),
        ("They drank the pub.", "0"),
    ]


def test_csv_and_jsonl_named_columns(tmp_path):
    csv_file = tmp_path / "reviews.csv"
    csv_file.write_text('review,title,stars\n"great, really",t1,pos\nmeh,t2,neg\n')
    examples = data.read_text_file(
        csv_file, text_column="review", text_pair_column="title", label_column="stars"
    )
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ("great, really", "t1", "pos"),
        ("meh", "t2", "neg"),
    ]
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text(
        json.dumps({"text": "a", "label": 1}) + "\n\n" + json.dumps({"text": "b"}) + "\n"
    )
    examples = data.read_text_file(jsonl, require_labels=False)
    assert [(e.text_a, e.label, e.source) for e in examples] == [
        ("a", "1", f"{jsonl}:1"),
        ("b", None, f"{jsonl}:3"),
    ]


def test_the_label_column_is_found_when_only_the_text_column_is_given(tmp_path):
    named = tmp_path / "named.tsv"
    named.write_text("review\tlabel\tid\ngreat\tpos\tr1\nmeh\tneg\tr2\n")
    examples = data.read_text_file(named, text_column="review")
    assert [(e.text_a, e.label, e.id) for e in examples] == [
        ("great", "pos", "r1"),
        ("meh", "neg", "r2"),
    ]
    headerless = tmp_path / "headerless.tsv"
    headerless.write_text("great\tpos\nmeh\tneg\n")
    examples = data.read_text_file(headerless, text_column="0", has_header=False)
    assert [(e.text_a, e.label, e.id) for e in examples] == [
        ("great", "pos", None),
        ("meh", "neg", None),
    ]
    # Without labels required (predict), a headerless file's other column is not taken for one.
    unlabelled = data.read_text_file(
        headerless, text_column="0", has_header=False, require_labels=False
    )
    assert [e.label for e in unlabelled] == [None, None]
    wide = tmp_path / "wide.tsv"
    wide.write_text("a\tx\tpos\n")
    with pytest.raises(DataError, match="which column is the label"):
        data.read_text_file(wide, text_column="0", has_header=False)
    jsonl = tmp_path / "named.jsonl"
    jsonl.write_text(json.dumps({"review": "a", "label": "pos", "idx": 4}) + "\n")
    (example,) = data.read_text_file(jsonl, text_column="review")
    assert (example.text_a, example.label, example.id) == ("a", "pos", "4")


def test_a_headerless_file_gets_the_no_header_hint(tmp_path):
    headerless = tmp_path / "headerless.tsv"
    headerless.write_text("a fine film\tpos\nawful\tneg\n")
    with pytest.raises(DataError, match="--no-header --text-column INDEX"):
        data.read_text_file(headerless)


def test_malformed_rows_name_file_and_line(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("sentence1\tsentence2\tlabel\na\tb\t1\nonly-one-field\n")
    with pytest.raises(DataError, match=rf"{tsv}:3: expected 3 fields like the header, got 1"):
        data.read_text_file(tsv)
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"text": "a", "label": 1}\n{"text": \n')
    with pytest.raises(DataError, match=rf"{jsonl}:2: invalid JSON"):
        data.read_text_file(jsonl)
    reg = tmp_path / "reg.tsv"
    reg.write_text("sentence\tlabel\nok\t1.5\nno\tlots\n")
    with pytest.raises(DataError, match=rf"{reg}:3: label 'lots' is not a number"):
        data.read_text_file(reg, task="regress")
    with pytest.raises(DataError, match="does not exist"):
        data.read_text_file(tmp_path / "missing.tsv")


def test_labels_unseen_in_training():
    known = data.label_list(["b", "a", "b"], "train.tsv")
    assert known == ["a", "b"]
    with pytest.raises(DataError, match=r"dev.tsv:7: label 'c' was not seen in training"):
        data.check_labels([("dev.tsv:6", "a"), ("dev.tsv:7", "c")], known)
    with pytest.raises(DataError, match="at least two distinct labels"):
        data.label_list(["a", "a"], "train.tsv")


RACE_RECORD = {
    "answers": ["B", "A"],
    "options": [["red", "blue", "green", "black"], ["yes", "no", "maybe", "never"]],
    "questions": ["The sky is _ .", "Is water wet?"],
    "article": "The sky is blue. Water is wet.",
    "id": "high1.txt",
}


def test_race_directory_tree(tmp_path):
    tree = tmp_path / "RACE" / "dev" / "high"
    tree.mkdir(parents=True)
    (tree / "1.txt").write_text(json.dumps(RACE_RECORD))
    examples = read_race(tmp_path / "RACE" / "dev")
    assert [(e.qid, e.question, e.label) for e in examples] == [
        ("high1.txt-0", "The sky is _ .", 1),
        ("high1.txt-1", "Is water wet?", 0),
    ]
    assert examples[0].choices == ("red", "blue", "green", "black")
    bad = dict(RACE_RECORD, answers=["B", "Q"])
    (tree / "2.txt").write_text(json.dumps(bad))
    with pytest.raises(DataError, match=r"2.txt:1: answer 'Q' of question 1"):
        read_race(tree)


def test_conll_2003(tmp_path):
    conll = tmp_path / "train.txt"
    conll.write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\n"
        "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n"
    )
    examples = read_conll(conll)
    assert [(e.words, e.tags, e.source) for e in examples] == [
        (("EU", "rejects", "German"), ("B-ORG", "O", "B-MISC"), f"{conll}:3"),
        (("Peter", "Blackburn"), ("B-PER", "I-PER"), f"{conll}:7"),
    ]
    conll.write_text("EU B-ORG\nrejects\n")
    with pytest.raises(DataError, match=rf"{conll}:2: expected 'word ... tag'"):
        read_conll(conll)
    assert read_conll(conll, require_labels=False)[0].tags is None
