"""create-pretraining-data: pairing, n-gram masking, records, the pipeline end to end."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from albert_tf.errors import DataError, OutputError, TokenizerError
from albert_tf.preprocess.pretraining_data import create_pretraining_data, pipeline
from albert_tf.preprocess.pretraining_data.documents import resolve_inputs, split_sentences
from albert_tf.preprocess.pretraining_data.format import feature_lengths
from albert_tf.preprocess.pretraining_data.instances import create_sentence_pairs, truncated_lengths
from albert_tf.preprocess.pretraining_data.masking import NgramMasker
from albert_tf.preprocess.pretraining_data.records import (
    crc32c,
    encode_example,
    frame_records,
)
from tests import helpers

MASK_ID = 4
GOLDEN_TEXT = """The quick brown fox jumps over the lazy dog. It was not amused.
Then the dog barked twice and ran away into the forest.

A second document starts here. It has three sentences. This is the last one.

Numbers like 1,000 and 3.14 appear in text. Whole words are masked together!
"""


def pydoc_topics() -> list[str]:
    """English prose every CPython carries (about 0.8 MB)."""
    import pydoc_data.topics

    return list(pydoc_data.topics.topics.values())


def reference_truncate(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def test_truncated_lengths_match_the_original_loop():
    for len_a in range(1, 30):
        for len_b in range(1, 30):
            for max_num_tokens in (2, 3, 7, 20, 61):
                assert truncated_lengths(len_a, len_b, max_num_tokens) == reference_truncate(
                    len_a, len_b, max_num_tokens
                )


def test_split_sentences():
    assert split_sentences(
        'Hi there. This is Mr. Smith, said J. Doe. "Really?" Yes! e.g. 3 more'
    ) == [
        "Hi there.",
        "This is Mr. Smith, said J. Doe.",
        '"Really?"',
        "Yes! e.g. 3 more",
    ]
    assert split_sentences("version 3.11 is out. lower case does not split.  ") == [
        "version 3.11 is out. lower case does not split."
    ]
    assert split_sentences("   ") == []


def test_sentence_pairs_are_consecutive_text_and_swaps_are_labelled():
    rng = np.random.default_rng(0)
    sentences = [
        np.arange(i * 100, i * 100 + rng.integers(1, 9), dtype=np.int32) for i in range(40)
    ]
    text = np.concatenate(sentences)
    labels = []
    for seed in range(30):
        for pair in create_sentence_pairs(sentences, 64, 0.1, np.random.default_rng(seed)):
            assert len(pair.tokens_a) >= 1 and len(pair.tokens_b) >= 1
            assert len(pair.tokens_a) + len(pair.tokens_b) <= 61
            first, second = (
                (pair.tokens_b, pair.tokens_a) if pair.label else (pair.tokens_a, pair.tokens_b)
            )
            # Each segment is contiguous text and the first precedes the second (truncation
            # trims either end of the longer segment, so they need not touch).
            starts = []
            for segment in (first, second):
                start = int(np.flatnonzero(text == segment[0])[0])
                np.testing.assert_array_equal(text[start : start + len(segment)], segment)
                starts.append(start)
            assert starts[0] + len(first) <= starts[1]
            labels.append(pair.label)
    assert 0.4 < np.mean(labels) < 0.6


def test_single_sentence_document_is_split_not_dropped():
    pairs = create_sentence_pairs(
        [np.arange(10, 20, dtype=np.int32)], 32, 0.0, np.random.default_rng(1)
    )
    assert len(pairs) == 1
    pair = pairs[0]
    joined = np.concatenate(
        [pair.tokens_b, pair.tokens_a] if pair.label else [pair.tokens_a, pair.tokens_b]
    )
    np.testing.assert_array_equal(joined, np.arange(10, 20))
    assert create_sentence_pairs([np.array([7], np.int32)], 32, 0.0, np.random.default_rng(1)) == []


def test_masking_is_whole_word_sorted_and_within_budget():
    rng = np.random.default_rng(3)
    word_start = rng.random(200) < 0.6
    masker = NgramMasker(word_start, MASK_ID, max_predictions_per_seq=7, masked_lm_prob=0.15)
    for _ in range(300):
        length = int(rng.integers(5, 80))
        tokens = rng.integers(10, 200, length).astype(np.int32)
        sep = int(rng.integers(2, length - 2))
        maskable = np.concatenate([np.arange(1, sep), np.arange(sep + 1, length - 1)])
        out = masker.mask(tokens, maskable, rng)
        positions = out.positions
        assert 1 <= len(positions) <= 7
        assert np.all(np.diff(positions) > 0)
        assert set(positions.tolist()) <= set(maskable.tolist())
        np.testing.assert_array_equal(out.labels, tokens[positions])
        unmasked = np.setdiff1d(np.arange(length), positions)
        np.testing.assert_array_equal(out.input_ids[unmasked], tokens[unmasked])
        # Whole words: a masked continuation piece's predecessor (same word) is masked too,
        # and the piece after a masked piece is masked unless it starts a word.
        chosen = set(positions.tolist())
        for p in positions:
            if p - 1 in set(maskable.tolist()) and not word_start[tokens[p]]:
                assert p - 1 in chosen
            if p + 1 in set(maskable.tolist()) and not word_start[tokens[p + 1]]:
                assert p + 1 in chosen
        assert sum(out.ngram_lengths) == sum(
            word_start[tokens[p]] or p - 1 not in set(maskable.tolist()) for p in positions
        )


def test_encoded_example_parses_with_tensorflow():
    import tensorflow as tf

    values = [0, 1, 127, 128, 300, 16383, 16384, 2**31 + 5, 2**40]
    ids = np.random.default_rng(0).integers(0, 30000, 100)
    example = tf.train.Example.FromString(
        encode_example(
            {
                "small": ("int64", np.array(values)),
                "long": ("int64", ids),
                "w": ("float", np.array([1.0, 0.5, 0.0])),
            }
        )
    )
    feature = example.features.feature
    assert list(feature["small"].int64_list.value) == values
    assert list(feature["long"].int64_list.value) == ids.tolist()
    assert list(feature["w"].float_list.value) == [1.0, 0.5, 0.0]


def test_tfrecord_frames_equal_tensorflows_writer(tmp_path):
    import tensorflow as tf

    assert crc32c([b"123456789", b""]).tolist() == [0xE3069283, 0]
    rng = np.random.default_rng(0)
    records = [bytes(rng.integers(0, 256, int(n), dtype=np.uint8)) for n in (0, 1, 7, 300, 2999)]
    path = tmp_path / "ref.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    assert b"".join(frame_records(records)) == path.read_bytes()


@pytest.fixture(scope="module")
def spm_model(fixtures_dir) -> str:
    return str(fixtures_dir / "tokenizer" / "spm.model")


def test_golden_output_for_a_fixed_seed(tmp_path, spm_model):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(GOLDEN_TEXT)
    out = tmp_path / "out"
    stats = create_pretraining_data(
        str(corpus),
        spm_model,
        out,
        max_seq_length=24,
        max_predictions_per_seq=4,
        dupe_factor=2,
        seed=7,
        progress=False,
    )
    records = helpers.read_pretraining_records(out)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["num_instances"] == stats["num_instances"] == len(records["input_ids"])
    assert (meta["max_seq_length"], meta["max_predictions_per_seq"], meta["vocab_size"]) == (
        24,
        4,
        1000,
    )
    assert list(meta["features"]) == [
        "input_ids",
        "input_mask",
        "segment_ids",
        "masked_lm_positions",
        "masked_lm_ids",
        "masked_lm_weights",
        "next_sentence_labels",
    ]
    assert records["next_sentence_labels"].ravel().tolist() == [0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0]
    np.testing.assert_array_equal(
        records["input_ids"][:2],
        [
            [2, 8, 94, 62, 37, 3, 145, 8, 405, 10, 58, 4, 4, 4, 941, 643, 3, 0, 0, 0, 0, 0, 0, 0],
            [
                2,
                64,
                26,
                8,
                18,
                94,
                96,
                19,
                25,
                8,
                35,
                87,
                4,
                4,
                3,
                49,
                248,
                68,
                13,
                34,
                193,
                26,
                9,
                3,
            ],
        ],
    )
    np.testing.assert_array_equal(records["input_mask"][0], [1] * 17 + [0] * 7)
    np.testing.assert_array_equal(records["segment_ids"][0], [0] * 6 + [1] * 11 + [0] * 7)
    np.testing.assert_array_equal(records["segment_ids"][1], [0] * 15 + [1] * 9)
    np.testing.assert_array_equal(
        records["masked_lm_positions"][:2], [[11, 12, 13, 0], [12, 13, 0, 0]]
    )
    np.testing.assert_array_equal(records["masked_lm_ids"][:2], [[8, 953, 26, 0], [13, 548, 0, 0]])
    np.testing.assert_array_equal(records["masked_lm_weights"][:2], [[1, 1, 1, 0], [1, 1, 0, 0]])
    assert meta["sp_model"]["sha256"] == hashlib.sha256(Path(spm_model).read_bytes()).hexdigest()


def test_statistics_on_10k_instances(tmp_path, spm_model):
    """Real English text (the stdlib's pydoc topics), 64-token instances."""
    # One document per topic (its blank lines dropped), as a real corpus has long documents.
    topics = ("\n".join(x for x in t.splitlines() if x.strip()) for t in pydoc_topics())
    corpus = tmp_path / "topics.txt"
    corpus.write_text("\n\n".join(topics))
    out = tmp_path / "out"
    stats = create_pretraining_data(
        str(corpus),
        spm_model,
        out,
        max_seq_length=64,
        max_predictions_per_seq=20,
        dupe_factor=5,
        num_shards=3,
        seed=1,
        progress=False,
    )
    records = helpers.read_pretraining_records(out)
    count = len(records["input_ids"])
    assert count == stats["num_instances"] >= 10_000
    assert sum(stats["shard_instances"]) == count and min(stats["shard_instances"]) > 0.3 * count
    ngrams = np.array([stats["ngram_counts"][str(n)] for n in (1, 2, 3)])
    np.testing.assert_allclose(ngrams / ngrams.sum(), [6 / 11, 3 / 11, 2 / 11], atol=0.02)
    weights = records["masked_lm_weights"]
    masked_fraction = weights.sum() / records["input_mask"].sum()
    assert abs(masked_fraction - 0.15) < 0.01
    assert masked_fraction == pytest.approx(stats["masked_fraction"], rel=1e-9)
    real = weights > 0
    rows = np.nonzero(real)[0]
    now = np.take_along_axis(records["input_ids"], records["masked_lm_positions"], 1)[real]
    labels = records["masked_lm_ids"][real]
    is_mask = now == MASK_ID
    kept = ~is_mask & (now == labels)
    np.testing.assert_allclose(
        [is_mask.mean(), (~is_mask & ~kept).mean(), kept.mean()], [0.8, 0.1, 0.1], atol=0.02
    )
    # Every instance has a prediction unless all its words are longer than the cap (rare).
    assert len(np.unique(rows)) >= 0.999 * count
    assert abs(records["next_sentence_labels"].mean() - 0.5) < 0.02
    # Never a special token at a masked position; padding is zero everywhere.
    assert not np.isin(labels, [0, 2, 3]).any()
    assert (records["input_ids"][records["input_mask"] == 0] == 0).all()


def test_output_is_identical_with_one_and_two_workers(tmp_path, spm_model, monkeypatch):
    corpus = tmp_path / "topics.txt"
    corpus.write_text("\n\n".join(pydoc_topics()[:40]))
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 8 * 1024)  # many batches in flight
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        create_pretraining_data(
            str(corpus),
            spm_model,
            out,
            max_seq_length=128,
            dupe_factor=2,
            num_shards=2,
            num_workers=workers,
            shuffle_buffer=50,
            progress=False,
        )
        outputs.append(out)
    names = sorted(p.name for p in outputs[0].iterdir())
    assert names == sorted(p.name for p in outputs[1].iterdir())
    for name in names:
        if name.endswith(".tfrecord"):
            assert (outputs[0] / name).read_bytes() == (outputs[1] / name).read_bytes(), name
    meta = [json.loads((o / "metadata.json").read_text()) for o in outputs]
    for m in meta:
        del m["statistics"]["seconds"], m["statistics"]["mb_per_second"]
    assert meta[0]["settings"].pop("num_workers", None) is None
    assert meta[0] == meta[1]


def run_cli(*args: str) -> int:
    from albert_tf.cli import main

    return main(["create-pretraining-data", *args])


def test_cli_writes_data(tmp_path, spm_model, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(GOLDEN_TEXT)
    out = tmp_path / "data"
    code = run_cli(
        "--input",
        str(corpus),
        "--sp-model",
        spm_model,
        "--output",
        str(out),
        "--max-seq-length",
        "32",
        "--dupe-factor",
        "1",
        "--workers",
        "1",
        "--quiet",
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_instances"] == len(helpers.read_pretraining_records(out)["input_ids"]) > 0


@pytest.mark.parametrize(
    "case, message",
    [
        ("no_match", "no input file matches"),
        ("empty", "holds no text"),
        ("tiny", "no training instance"),
        ("exists", "already exists"),
        ("bad_model", "SentencePiece model"),
        ("binary", "not UTF-8"),
        ("bad_setting", "--max-seq-length must be at least 5"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(
    tmp_path, spm_model, capsys, case, message
):
    corpus = tmp_path / "in" / "c.txt"
    corpus.parent.mkdir()
    corpus.write_text(GOLDEN_TEXT)
    out = tmp_path / "out"
    args = ["--input", str(corpus), "--sp-model", spm_model, "--output", str(out), "--quiet"]
    if case == "no_match":
        args[1] = str(tmp_path / "in" / "*.nothing")
    elif case == "empty":
        corpus.write_text("\n\n  \n")
    elif case == "tiny":
        corpus.write_text("a\n")
    elif case == "exists":
        out.mkdir()
        (out / "keep.txt").write_text("another run")
    elif case == "bad_model":
        args[3] = str(corpus)
    elif case == "binary":
        corpus.write_bytes(b"text\n\xff\xfe\x00 more\n")
    elif case == "bad_setting":
        args += ["--max-seq-length", "4"]
    assert run_cli(*args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == (["in", "out"] if case == "exists" else ["in"])
    if case == "exists":
        assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_library_errors_are_typed(tmp_path, spm_model):
    with pytest.raises(DataError):
        resolve_inputs([str(tmp_path / "missing-*.txt")])
    (tmp_path / "out").mkdir()
    with pytest.raises(OutputError):
        create_pretraining_data(str(tmp_path), spm_model, tmp_path / "out", progress=False)
    with pytest.raises(TokenizerError):
        create_pretraining_data(
            str(tmp_path), str(tmp_path / "no.model"), tmp_path / "o2", progress=False
        )


def test_feature_lengths():
    assert feature_lengths(8, 2) == {
        "input_ids": ("int64", 8),
        "input_mask": ("int64", 8),
        "segment_ids": ("int64", 8),
        "masked_lm_positions": ("int64", 2),
        "masked_lm_ids": ("int64", 2),
        "masked_lm_weights": ("float", 2),
        "next_sentence_labels": ("int64", 1),
    }
