"""Windows over long texts: the plan, Python features equal to the serving graph's, pooling, and
a model that learns a label only a late window can see."""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from albert_tf.errors import ConfigError
from albert_tf.finetune import windows
from albert_tf.finetune.data import TextExample
from albert_tf.finetune.predict import load_finetuned, predict_file
from albert_tf.finetune.serving import pack_segments
from albert_tf.finetune.settings import WINDOW_PLACEMENTS
from albert_tf.preprocess.graph_tokenizer import GraphTokenizer
from albert_tf.preprocess.tokenizer import AlbertTokenizer
from tests.helpers import finetune_files, write_config


def test_window_starts_cover_the_text_then_stop():
    assert windows.window_starts(0, room=10, stride=5, max_windows=4, placement="head") == [0]
    assert windows.window_starts(10, room=10, stride=5, max_windows=4, placement="head") == [0]
    assert windows.window_starts(11, room=10, stride=5, max_windows=4, placement="head") == [0, 5]
    assert windows.window_starts(100, room=10, stride=5, max_windows=4, placement="head") == [
        0,
        5,
        10,
        15,
    ]
    assert windows.tokens_outside(100, 10, [0, 5, 10, 15]) == 75
    assert windows.window_stride(room=10, stride=None) == 5
    assert windows.window_stride(room=10, stride=30) == 10  # never a gap between windows


def test_window_placements_on_a_long_text():
    # 1,300 tokens, 8 windows of 126 at stride 63: the reviews
    starts = {p: windows.window_starts(1300, 126, 63, 8, p) for p in WINDOW_PLACEMENTS}
    assert starts["head"] == [0, 63, 126, 189, 252, 315, 378, 441]
    assert starts["spread"] == [0, 167, 335, 503, 670, 838, 1006, 1174]  # floor(w * 1174 / 7)
    assert starts["head-tail"] == [0, 63, 126, 189, 985, 1048, 1111, 1174]
    outside = {p: windows.tokens_outside(1300, 126, s) for p, s in starts.items()}
    assert outside == {"head": 1300 - 567, "spread": 1300 - 8 * 126, "head-tail": 1300 - 2 * 315}
    for placement in WINDOW_PLACEMENTS:  # a text that fits in K windows keeps them
        assert windows.window_starts(567, 126, 63, 8, placement) == list(range(0, 442, 63))
        assert windows.window_starts(1300, 126, 63, 1, placement) == [0]
    with pytest.raises(ConfigError, match="--window-placement must be one of"):
        windows.window_starts(1300, 126, 63, 8, "middle")


@settings(max_examples=60)
@given(
    lengths=st.lists(st.integers(0, 2000), min_size=1, max_size=12),
    room=st.integers(1, 200),
    stride=st.one_of(st.none(), st.integers(1, 300)),
    max_windows=st.integers(1, 10),
    placement=st.sampled_from(WINDOW_PLACEMENTS),
)
def test_graph_places_windows_as_python_does(lengths, room, stride, max_windows, placement):
    step = windows.window_stride(room, stride)
    expected = [windows.window_starts(n, room, step, max_windows, placement) for n in lengths]
    starts, exists = windows.graph_window_plan(
        tf.constant(lengths, tf.int64),
        tf.fill([len(lengths)], tf.constant(room, tf.int64)),
        max_windows,
        stride,
        placement,
    )
    got = [row[keep].tolist() for row, keep in zip(starts.numpy(), exists.numpy(), strict=True)]
    assert got == expected
    for n, plan in zip(lengths, expected, strict=True):
        assert plan[0] == 0 and all(b > a for a, b in zip(plan, plan[1:], strict=False))
        fits = 1 + -(-max(n - room, 0) // step) <= max_windows
        if fits or placement == "head":
            assert plan == [w * step for w in range(len(plan))]
        if not fits and placement != "head" and max_windows > 1:
            assert plan[-1] + room == n  # the last window ends on the last token


@pytest.fixture(scope="module")
def tokenizers(fixtures_dir):
    path = fixtures_dir / "tokenizer" / "spm.model"
    return AlbertTokenizer(path), GraphTokenizer(path)


def _graph_features(graph_tokenizer, examples, length, max_windows, stride, bound, placement):
    pairs = examples[0].text_b is not None
    text = graph_tokenizer.tokenize(
        tf.constant([e.text_b if pairs else e.text_a for e in examples])
    )
    first = graph_tokenizer.tokenize(tf.constant([e.text_a for e in examples])) if pairs else None
    pack = functools.partial(pack_segments, tokenizer=graph_tokenizer, length=length)
    got = windows.graph_windows(first, text, length, max_windows, stride, bound, pack, placement)
    return {k: v.numpy() for k, v in got.items()}


@pytest.mark.parametrize(
    ("pairs", "stride", "bound", "placement"),
    [
        (False, None, None, "head"),
        (False, 7, None, "head"),
        (True, 5, 6, "head"),
        (False, None, None, "spread"),
        (True, 3, 6, "spread"),
        (False, 7, None, "head-tail"),
        (True, None, 5, "head-tail"),
    ],
)
def test_python_and_graph_windows_agree(tokenizers, pairs, stride, bound, placement):
    python_tokenizer, graph_tokenizer = tokenizers
    rng = random.Random(3)
    words = [
        "the",
        "film",
        "was",
        "a",
        "quiet",
        "study",
        "of",
        "time",
        ",",
        "loss",
        "and",
        "1,000",
        "small",
        "wonders",
    ]
    texts = ["", "short", *(" ".join(rng.choices(words, k=n)) for n in (9, 14, 40, 80))]
    examples = [
        TextExample(t, texts[-1 - i] if pairs else None, None, f"x:{i}")
        for i, t in enumerate(texts)
    ]
    windowed = windows.encode_windows(examples, python_tokenizer, 16, 4, stride, bound, placement)
    expected = windowed.inputs
    assert expected["input_word_ids"].shape == (len(texts), 4, 16)
    assert windowed.texts_cut > 0 and windowed.tokens_cut > windowed.texts_cut
    assert expected["input_mask"][:, :, 0].sum() > len(texts)  # several windows
    got = _graph_features(graph_tokenizer, examples, 16, 4, stride, bound, placement)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_pooling_skips_missing_windows():
    inputs = {
        "input_word_ids": tf.constant([[[2, 7, 3], [2, 8, 3]], [[2, 9, 3], [0, 0, 0]]]),
        "input_mask": tf.constant([[[1, 1, 1], [1, 1, 1]], [[1, 1, 1], [0, 0, 0]]]),
        "input_type_ids": tf.zeros([2, 2, 3], tf.int32),
    }

    def encode(features):  # one logit per window: its middle token
        assert features["input_word_ids"].shape[0] == 3  # the missing window never runs
        return tf.cast(features["input_word_ids"][:, 1:2], tf.float32)

    assert windows.pool_windows(encode, inputs, "mean").numpy().tolist() == [[7.5], [9.0]]
    assert windows.pool_windows(encode, inputs, "max").numpy().tolist() == [[8.0], [9.0]]


FILLER = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "it",
    "this",
    "be",
    "are",
]


def write_late_label_documents(path, count, seed):
    """Documents of 360 filler words (one piece each) whose label is decided by a word that
    only occurs past word 300: "turtle" (label a) or "widget" (b), 6 times in words 300-339."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        f.write("text\tlabel\n")
        for _ in range(count):
            label = rng.choice("ab")
            words = rng.choices(FILLER, k=360)
            for position in rng.sample(range(300, 340), 6):
                words[position] = "turtle" if label == "a" else "widget"
            f.write(f"{' '.join(words)}\t{label}\n")


@pytest.fixture(scope="module")
def late_label(tmp_path_factory, fixtures_dir):
    root = tmp_path_factory.mktemp("late_label")
    write_late_label_documents(root / "train.tsv", 192, seed=0)
    write_late_label_documents(root / "dev.tsv", 40, seed=1)
    tokenizer = AlbertTokenizer(fixtures_dir / "tokenizer" / "spm.model")
    with open(root / "dev.tsv", encoding="utf-8") as f:
        first_document = f.readlines()[1].split("\t")[0]
    words = first_document.split()
    position = next(i for i, w in enumerate(words) if w in ("turtle", "widget"))
    assert len(tokenizer.encode(" ".join(words[:position]))) > 300
    # A wider initialization than ALBERT's 0.02 gets a random tiny model off its plateau in
    # 2 epochs instead of 10 or more; the comparison with one window stays the same.
    return root, write_config(root, max_position_embeddings=64, initializer_range=0.1)


def _accuracy(root, config, fixtures_dir, max_windows):
    result = finetune_files(
        root,
        "classify",
        max_seq_length=64,
        max_windows=max_windows,
        window_stride=62,
        epochs=4,
        batch_size=16,
        learning_rate=5e-3,
        dtype="float32",
        seed=1,
        output=f"model-{max_windows}",
        config=str(config),
        export_serving=False,
    )
    return result.record.best_value


@pytest.mark.slow
def test_windows_learn_a_label_past_token_300(late_label, fixtures_dir):
    root, config = late_label
    # 6 windows of 62 tokens side by side reach token 372; one window sees tokens 0-61.
    assert _accuracy(root, config, fixtures_dir, max_windows=6) >= 0.9
    assert _accuracy(root, config, fixtures_dir, max_windows=1) <= 0.7


@pytest.mark.slow
@pytest.mark.parametrize("placement", ["spread", "head-tail"])
def test_regress_prediction_is_the_mean_over_windows_everywhere(tmp_path, placement):
    rng = random.Random(5)
    for name, count in (("train.tsv", 16), ("dev.tsv", 5)):
        lines = ["sentence\tscore"]
        for _ in range(count):
            n = rng.randint(3, 60)
            lines.append(f"{' '.join(rng.choices(FILLER, k=n))}\t{n / 10}")
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = finetune_files(
        tmp_path,
        "regress",
        max_seq_length=16,
        max_windows=3,
        window_placement=placement,
        epochs=1,
        batch_size=8,
        learning_rate=1e-3,
        dtype="float32",
    )
    records, scores, dev = predict_file(
        load_finetuned(tmp_path / "model"), str(tmp_path / "dev.tsv")
    )
    assert set(scores) == {"pearson", "spearman"}
    predicted = [r["prediction"] for r in records]
    present = dev.inputs["input_mask"][:, :, 0] > 0  # [N, K]
    assert present.sum(axis=1).tolist() != [1] * 5  # some texts have several windows
    assert dev.skipped["tokens in no window"] > 0  # and some have gaps the placement chose
    per_window = result.model({k: v[present] for k, v in dev.inputs.items()})["predictions"]
    document = np.repeat(np.arange(5), present.sum(axis=1))
    means = [per_window.numpy()[document == n].mean() for n in range(5)]
    np.testing.assert_allclose(predicted, means, atol=1e-5)
    serving = tf.saved_model.load(str(tmp_path / "model" / "serving")).signatures["serving_default"]
    got = serving(text=tf.constant([e.text_a for e in dev.examples]))["prediction"]
    np.testing.assert_allclose(got.numpy(), predicted, atol=1e-5)
