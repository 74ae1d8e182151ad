"""Dynamic masking in tf.data over `--no-mask` pretraining records."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.preprocess.pretraining_data import create_pretraining_data
from albert_tf.preprocess.pretraining_data.dynamic_masking import dynamically_masked
from albert_tf.preprocess.pretraining_data.format import feature_lengths, parse_unmasked

SEQ, PRED = 64, 10


@pytest.fixture(scope="module")
def unmasked_dir(tmp_path_factory, fixtures_dir):
    import pydoc_data.topics

    tmp = tmp_path_factory.mktemp("dynamic")
    topics = list(pydoc_data.topics.topics.values())[:12]
    (tmp / "corpus.txt").write_text("\n\n".join(topics))
    create_pretraining_data(
        str(tmp / "corpus.txt"), fixtures_dir / "tokenizer" / "spm.model", tmp / "out",
        max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=1, mask=False,
        progress=False,
    )  # fmt: skip
    return tmp / "out"


def masked_stream(directory, seed, epochs=1):
    meta = json.loads((directory / "metadata.json").read_text())
    ids = meta["special_ids"]
    files = sorted(str(p) for p in directory.glob("*.tfrecord"))
    raw = tf.data.TFRecordDataset(files).map(lambda r: parse_unmasked(r, SEQ))
    masked = dynamically_masked(
        raw.repeat(epochs), seed=seed, vocab_size=meta["vocab_size"], mask_id=ids["mask"], cls_id=ids["cls"],
        sep_id=ids["sep"], max_predictions_per_seq=PRED,
    )  # fmt: skip
    return raw, masked, ids


def collect(dataset):
    return next(dataset.batch(100_000).as_numpy_iterator())


def test_unmasked_records(unmasked_dir):
    meta = json.loads((unmasked_dir / "metadata.json").read_text())
    assert meta["masked"] is False
    assert meta["features"] == {k: list(v) for k, v in feature_lengths(SEQ, PRED, False).items()}
    ids = meta["special_ids"]
    files = sorted(str(p) for p in unmasked_dir.glob("*.tfrecord"))
    raw = collect(tf.data.TFRecordDataset(files).map(lambda r: parse_unmasked(r, SEQ)))
    assert not (raw["input_ids"] == ids["mask"]).any()
    assert (raw["input_ids"][:, 0] == ids["cls"]).all()
    assert (raw["token_boundary"][:, 1] == 1).all()  # a segment starts a word


def test_dynamic_masks_are_valid_reproducible_and_new_each_epoch(unmasked_dir):
    raw, masked, ids = masked_stream(unmasked_dir, seed=5)
    raw = collect(raw)
    out = collect(masked)
    count = len(raw["input_ids"])
    assert count > 150
    expected = feature_lengths(SEQ, PRED)
    assert set(out) == set(expected)
    for name, (kind, length) in expected.items():
        assert out[name].shape == (count, length)
        assert out[name].dtype == (np.float32 if kind == "float" else np.int64)
    for name in ("input_mask", "segment_ids", "next_sentence_labels"):
        np.testing.assert_array_equal(out[name], raw[name])
    weights = out["masked_lm_weights"]
    for row in range(count):
        num = int(weights[row].sum())
        assert 1 <= num <= PRED
        positions = out["masked_lm_positions"][row, :num]
        assert (np.diff(positions) > 0).all() and (out["masked_lm_positions"][row, num:] == 0).all()
        original = raw["input_ids"][row]
        assert not np.isin(original[positions], [ids["cls"], ids["sep"], ids["pad"]]).any()
        np.testing.assert_array_equal(out["masked_lm_ids"][row, :num], original[positions])
        other = np.setdiff1d(np.arange(SEQ), positions)
        np.testing.assert_array_equal(out["input_ids"][row, other], original[other])
        # Whole words: a masked piece's continuation pieces are masked too.
        chosen = set(positions.tolist())
        boundary = raw["token_boundary"][row]
        for p in positions:
            nxt = p + 1
            if nxt < SEQ and nxt not in chosen and raw["input_mask"][row, nxt]:
                assert boundary[nxt] == 1 or original[nxt] in (ids["sep"],)
    now = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], 1)[weights > 0]
    labels = out["masked_lm_ids"][weights > 0]
    assert abs(weights.sum() / out["input_mask"].sum() - 0.15) < 0.015
    assert abs((now == ids["mask"]).mean() - 0.8) < 0.03
    assert abs(((now != ids["mask"]) & (now == labels)).mean() - 0.1) < 0.03
    # Same seed: same masks. Next epoch (repeat) or another seed: different masks.
    again = collect(masked_stream(unmasked_dir, seed=5)[1])
    np.testing.assert_array_equal(again["masked_lm_positions"], out["masked_lm_positions"])
    two_epochs = collect(masked_stream(unmasked_dir, seed=5, epochs=2)[1])
    first, second = (two_epochs["masked_lm_positions"][k * count : (k + 1) * count] for k in (0, 1))
    np.testing.assert_array_equal(first, out["masked_lm_positions"])
    assert (first != second).any(axis=1).mean() > 0.9
