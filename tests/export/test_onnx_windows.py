"""Long-document windows in the ONNX classifier: the plan is `window_starts`, and the
raw-string classifier gives `serving/`'s labels and probabilities for every placement and
pooling, single texts and pairs."""

from __future__ import annotations

import functools
import json
import random

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime_extensions")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from albert_tf.finetune import windows  # noqa: E402
from albert_tf.finetune.settings import WINDOW_PLACEMENTS  # noqa: E402
from tests import helpers  # noqa: E402

WORDS = ["the", "film", "was", "a", "quiet", "study", "of", "time", ",", "loss", "and"]


@functools.cache
def _plan_session():
    """One ONNX session of `albert_tf.export.onnx.windows.window_plan` for every placement, with the
    token counts, rooms, K and stride as inputs."""
    from onnx import TensorProto, helper

    from albert_tf.export.onnx.encoder import OPSET, GraphBuilder
    from albert_tf.export.onnx.windows import window_plan
    from albert_tf.export.onnx.writer import session

    g = GraphBuilder()
    outputs = []
    for placement in WINDOW_PLACEMENTS:
        starts, present = window_plan(
            g, "num_tokens", "room", "max_windows", "stride", placement, placement
        )
        for name, value, dtype in (
            (f"{placement}/starts", starts, TensorProto.INT64),
            (f"{placement}/present", present, TensorProto.BOOL),
        ):
            g.nodes.append(helper.make_node("Identity", [value], [name]))
            outputs.append(helper.make_tensor_value_info(name, dtype, ["batch", "windows"]))
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, shape)
        for name, shape in (
            ("num_tokens", ["batch"]),
            ("room", ["batch"]),
            ("max_windows", []),
            ("stride", []),
        )
    ]
    graph = helper.make_graph(
        g.nodes, "window_plan", inputs, outputs, initializer=list(g.initializers.values())
    )
    return session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))


@given(
    texts=st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 300)), min_size=1, max_size=16),
    stride=st.one_of(st.none(), st.integers(1, 400)),
    max_windows=st.integers(1, 12),
)
def test_onnx_plan_is_window_starts(texts, stride, max_windows):
    """Every placement's starts and present windows, per text: the ONNX graph's equal
    `window_starts` at the stride `window_stride` gives."""
    lengths, rooms = (np.array(column, np.int64) for column in zip(*texts, strict=True))
    got = _plan_session().run(
        None,
        {
            "num_tokens": lengths,
            "room": rooms,
            "max_windows": np.array(max_windows, np.int64),
            "stride": np.array(stride or 0, np.int64),
        },
    )
    for p, placement in enumerate(WINDOW_PLACEMENTS):
        starts, present = got[2 * p], got[2 * p + 1]
        assert starts.shape == present.shape == (len(texts), max_windows)
        for (n, room), row, keep in zip(texts, starts, present, strict=True):
            step = windows.window_stride(room, stride)
            want = windows.window_starts(n, room, step, max_windows, placement)
            assert row[keep].tolist() == want, (n, room, placement)


def _texts(rng: random.Random, lengths) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=n)) for n in lengths]


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    """A classifier fine-tuned (one epoch, tiny) on single texts with 3 windows of 16 tokens."""
    root = tmp_path_factory.mktemp("windowed")
    rng = random.Random(7)
    rows = [f"{t}\t{('pos', 'neg')[i % 2]}" for i, t in enumerate(_texts(rng, [40] * 12))]
    (root / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    helpers.finetune_files(
        root,
        "classify",
        eval_file=None,
        # Large initial weights: windows of different words then give clearly different logits.
        config=str(helpers.write_config(root, initializer_range=0.5)),
        max_seq_length=16,
        max_windows=3,
        epochs=1,
        batch_size=8,
        dtype="float32",
    )
    return root / "model"


# Texts of 0 to 90 tokens: one window, several at the default stride, more than K = 3.
LENGTHS = (0, 1, 5, 14, 20, 27, 40, 90)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("pair", "placement", "pooling", "stride", "bound"),
    [
        (False, "head", "mean", None, None),
        (False, "spread", "max", 5, None),
        (False, "head-tail", "mean", None, None),
        (True, "head", "max", None, 4),
        (True, "spread", "mean", 3, None),
        (True, "head-tail", "max", 6, 5),
    ],
)
def test_windowed_classifier_equals_serving(windowed, pair, placement, pooling, stride, bound):
    """classifier.onnx around the float32 encoder against the serving function (what serving/
    runs), window settings varied on one fine-tuned model: they change how a text becomes
    windows and how their logits are pooled, not the weights."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf.export.onnx.classifier import classifier_graphs
    from albert_tf.export.onnx.encoder import encoder_graph
    from albert_tf.export.onnx.writer import run, session
    from albert_tf.finetune.predict import load_finetuned
    from albert_tf.finetune.serving import ServingModule

    finetuned = load_finetuned(windowed)
    task = finetuned.task
    task.settings = task.settings.replace(
        has_pair=pair,
        window_placement=placement,
        window_pooling=pooling,
        window_stride=stride,
        max_first_segment_length=bound,
    )
    rng = random.Random(11)
    texts = {"text": np.array(_texts(rng, LENGTHS), dtype=object)}
    if pair:
        texts["text_pair"] = np.array(_texts(rng, LENGTHS[::-1]), dtype=object)
    graph = classifier_graphs(finetuned, {"float32": encoder_graph(finetuned.model.encoder)})
    got = run(session(graph["float32"]), texts)
    module = ServingModule(finetuned.model, finetuned.tokenizer)
    want = task.serve(module, *(tf.constant(v.astype(str)) for v in texts.values()))
    assert got["label"].tolist() == [s.decode() for s in want["label"].numpy()]
    np.testing.assert_array_equal(got["label_id"], want["label_id"].numpy())
    np.testing.assert_allclose(got["probabilities"], want["probabilities"].numpy(), atol=1e-4)
    np.testing.assert_allclose(got["logits"], want["logits"].numpy(), atol=1e-4)
    # The windows made a difference: pooled logits are not those of the first window alone.
    task.settings = task.settings.replace(max_windows=1)
    single = task.serve(module, *(tf.constant(v.astype(str)) for v in texts.values()))
    assert np.abs(single["logits"].numpy() - got["logits"]).max() > 0.1
    assert np.ptp(got["logits"][:, 0]) > 0.1


@pytest.mark.slow
def test_export_writes_the_windowed_classifier(windowed):
    """`export --finetuned --onnx` of a windowed classifier: files that agree with serving/
    on long probe text, and the window settings in report.json."""
    from albert_tf.cli import main

    assert main(["export", "--finetuned", str(windowed), "--onnx"]) == 0
    report = json.loads((windowed / "onnx" / "report.json").read_text())
    assert report["windows"] == {
        "max_windows": 3,
        "window_stride": None,
        "window_placement": "spread",
        "window_pooling": "mean",
        "max_first_segment_length": None,
    }
    float32 = report["against_serving"]["classifier.onnx"]
    assert float32["labels_equal"] is True
    assert float32["probabilities_max_abs_diff"] < 1e-4
    assert set(report["bytes"]) == {"classifier.onnx", "classifier_int8.onnx"}


@pytest.mark.slow
def test_empty_batch_gives_empty_outputs(windowed, tmp_path):
    """An empty batch through raw-string classifiers of one window and of three, of single
    texts and pairs, around the float32 and the int8 encoder: empty outputs of serving/'s
    dtypes ([0] labels, [0, L] probabilities), not a crash."""
    import onnx

    from albert_tf.export.onnx import optimize
    from albert_tf.export.onnx.classifier import classifier_graphs
    from albert_tf.export.onnx.encoder import encoder_graph
    from albert_tf.finetune.predict import load_finetuned

    finetuned = load_finetuned(windowed)
    config = finetuned.model.encoder.config
    float32 = encoder_graph(finetuned.model.encoder)
    fused = optimize.fuse(float32, config.num_attention_heads, config.hidden_size)
    encoders = {"float32": float32, "int8": optimize.quantize_dynamic_int8(fused)}
    paths = []
    for max_windows, pair in ((1, False), (3, False), (3, True)):
        task = finetuned.task
        task.settings = task.settings.replace(max_windows=max_windows, has_pair=pair)
        for kind, graph in classifier_graphs(finetuned, encoders).items():
            paths.append(tmp_path / f"windows{max_windows}-pair{pair}-{kind}.onnx")
            onnx.save(graph, str(paths[-1]))
    labels = len(finetuned.task.settings.labels)
    want = dict(
        label=[[0], "object"],
        label_id=[[0], "int32"],
        probabilities=[[0, labels], "float32"],
        logits=[[0, labels], "float32"],
    )
    assert helpers.empty_batch_outputs(paths) == {str(path): want for path in paths}
