"""The preprocessing SavedModel, tested the way users load it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)
import tf_keras

from albert_tf.errors import ExportError, OutputError, TokenizerError
from albert_tf.preprocess.preprocess_model import save_preprocess_model

pytestmark = pytest.mark.slow

SEQ_LENGTH = 16
KEYS = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def export(tmp_path_factory, fixtures_dir):
    """One SavedModel per session; the source .model is deleted before anything loads it."""
    root = tmp_path_factory.mktemp("preprocess")
    source = root / "source" / "albert.model"
    source.parent.mkdir()
    shutil.copy(fixtures_dir / "tokenizer" / "spm.model", source)
    path = save_preprocess_model(source, root / "preprocess", seq_length=SEQ_LENGTH)
    shutil.rmtree(source.parent)
    return path


@pytest.fixture(scope="module")
def loaded(export):
    return hub.load(str(export))


@pytest.fixture(scope="module")
def cases(fixtures_dir):
    path = fixtures_dir / "tokenizer" / "reference_tokenization.json"
    return json.loads(path.read_text())["cases"]


def _numpy(outputs):
    assert sorted(outputs) == sorted(KEYS)
    for key in KEYS:
        assert outputs[key].dtype == tf.int32, key
    return {key: outputs[key].numpy().tolist() for key in KEYS}


def _ragged(rows):
    return tf.ragged.constant(rows, dtype=tf.int32, row_splits_dtype=tf.int64)


def test_tokenize_equals_reference(loaded, cases):
    got = loaded.tokenize(tf.constant([c["text"] for c in cases]))
    assert isinstance(got, tf.RaggedTensor)
    assert got.dtype == tf.int32
    assert got.to_list() == [c["ids"] for c in cases]


def test_special_tokens_dict(loaded):
    special = loaded.tokenize.get_special_tokens_dict()
    assert {k: v.dtype for k, v in special.items()} == dict.fromkeys(
        ["vocab_size", "padding_id", "start_of_sequence_id", "end_of_segment_id", "mask_id"],
        tf.int32,
    )
    assert {k: int(v) for k, v in special.items()} == dict(
        vocab_size=1000, padding_id=0, start_of_sequence_id=2, end_of_segment_id=3, mask_id=4
    )


def test_pack_one_segment_pads_and_trims(loaded):
    out = _numpy(loaded.bert_pack_inputs([_ragged([[11, 12, 13], [21, 22, 23, 24, 25, 26]])], 6))
    assert out == {
        "input_word_ids": [[2, 11, 12, 13, 3, 0], [2, 21, 22, 23, 24, 3]],
        "input_mask": [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]],
        "input_type_ids": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]],
    }


def test_pack_two_segments_round_robin(loaded):
    a = _ragged([[11, 12, 13, 14, 15], [21]])
    b = _ragged([[31, 32], [41, 42, 43, 44, 45]])
    out = _numpy(loaded.bert_pack_inputs([a, b], seq_length=8))
    # Budget 5: row 0 takes 3 from A and 2 from B, row 1 all of A (1) and 4 from B.
    assert out == {
        "input_word_ids": [[2, 11, 12, 13, 3, 31, 32, 3], [2, 21, 3, 41, 42, 43, 44, 3]],
        "input_mask": [[1] * 8, [1] * 8],
        "input_type_ids": [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]],
    }
    default = _numpy(loaded.bert_pack_inputs([a, b]))  # the export's seq_length
    assert default["input_word_ids"][1] == [2, 21, 3, 41, 42, 43, 44, 45, 3] + [0] * 7
    assert default["input_mask"][1] == [1] * 9 + [0] * 7
    assert default["input_type_ids"][1] == [0, 0, 0] + [1] * 6 + [0] * 7


def test_pack_three_segments(loaded):
    a = _ragged([[11, 12, 13, 14, 15], [21]])
    b = _ragged([[31, 32], [41, 42, 43, 44]])
    c = _ragged([[51], [61, 62]])
    out = _numpy(loaded.bert_pack_inputs([a, b, c], seq_length=8))
    assert out == {
        "input_word_ids": [[2, 11, 12, 3, 31, 3, 51, 3], [2, 21, 3, 41, 42, 3, 61, 3]],
        "input_mask": [[1] * 8, [1] * 8],
        "input_type_ids": [[0, 0, 0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 1, 2, 2]],
    }


def test_root_call_equals_tokenize_and_pack(loaded, cases):
    texts = tf.constant([c["text"] for c in cases])
    root = _numpy(loaded(texts))
    assert root == _numpy(loaded.bert_pack_inputs([loaded.tokenize(texts)], SEQ_LENGTH))
    assert root["input_word_ids"][0] == [2, *cases[0]["ids"], 3, 0]
    serving = loaded.signatures["serving_default"](inputs=texts)
    assert _numpy(serving) == root


def test_edge_inputs(loaded):
    out = _numpy(loaded(tf.constant(["", " \t ", b"\xff\xfe", "the " * 25_000])))
    assert out["input_word_ids"][:3] == [[2, 3] + [0] * 14] * 3
    assert out["input_word_ids"][3] == [2] + [11] * 14 + [3]
    empty = loaded(tf.constant([], tf.string))
    assert [empty[k].shape.as_list() for k in KEYS] == [[0, SEQ_LENGTH]] * 3


def test_asset_packaged_and_no_temporary_paths(export, loaded):
    assert (export / "assets" / "albert.model").is_file()
    assert loaded.sp_model_file.asset_path.numpy().decode().startswith(str(export))
    pb = (export / "saved_model.pb").read_bytes()
    assert str(export.parent).encode() not in pb
    assert b".tmp-" not in pb
    assert not list(export.parent.glob(".*tmp*"))


def test_tf_keras_hub_keras_layer(export, loaded, cases):
    text = tf_keras.layers.Input(shape=(), dtype=tf.string)
    model = tf_keras.Model(text, hub.KerasLayer(str(export))(text))
    texts = tf.constant([c["text"] for c in cases[:4]])
    out = model(texts)
    assert _numpy(out) == _numpy(loaded(texts))

    first = tf_keras.layers.Input(shape=(), dtype=tf.string)
    second = tf_keras.layers.Input(shape=(), dtype=tf.string)
    tokenize = hub.KerasLayer(loaded.tokenize)
    pack = hub.KerasLayer(loaded.bert_pack_inputs, arguments=dict(seq_length=10))
    pair_model = tf_keras.Model([first, second], pack([tokenize(first), tokenize(second)]))
    pair = _numpy(pair_model([texts[:2], texts[2:]]))
    expected = loaded.bert_pack_inputs([loaded.tokenize(texts[:2]), loaded.tokenize(texts[2:])], 10)
    assert pair == _numpy(expected)


def test_tf_data_map(loaded, cases):
    texts = [c["text"] for c in cases[:10]]
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(4).map(loaded)
    got = np.concatenate([batch["input_word_ids"].numpy() for batch in dataset])
    np.testing.assert_array_equal(got, loaded(tf.constant(texts))["input_word_ids"].numpy())


def test_keras3_tfsm_layer(export, loaded):
    import keras

    layer = keras.layers.TFSMLayer(str(export), call_endpoint="serving_default")
    texts = tf.constant(["Hello, World!", "value 1, 2"])
    assert _numpy(layer(texts)) == _numpy(loaded(texts))


def test_bad_inputs(tmp_path, fixtures_dir, export):
    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    with pytest.raises(ExportError, match="seq_length 3 is too small"):
        save_preprocess_model(sp_model, tmp_path / "x", seq_length=3)
    with pytest.raises(TokenizerError, match="not found"):
        save_preprocess_model(tmp_path / "missing.model", tmp_path / "x")
    with pytest.raises(OutputError, match="already exists"):
        save_preprocess_model(sp_model, export)
    assert list(tmp_path.iterdir()) == []


def test_pack_seq_length_too_small(loaded):
    # A negative seq_length used to give [B, 4] for three segments (reshape inferred -1).
    a = _ragged([[11, 12], [21]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="seq_length must be at least 4"):
        loaded.bert_pack_inputs([a, a, a], seq_length=-1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="seq_length must be at least 2"):
        loaded.bert_pack_inputs([a], seq_length=1)
