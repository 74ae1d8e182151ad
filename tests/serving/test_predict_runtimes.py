"""`albert-tf predict --runtime tf|onnx|tflite` on a tiny fine-tuned classifier: the same labels
through every runtime, probabilities close to TensorFlow's, and a missing extra named in one
line. The ONNX cases need the onnx extra (`pip install -e ".[onnx]"`) and skip without it."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from albert_tf import cli
from albert_tf.export.int8_encoder import runtime_encoder
from albert_tf.export.tflite import probe_inputs, tflite_converters
from albert_tf.finetune.predict import load_finetuned
from albert_tf.runtimes import tflite_runner
from albert_tf.runtimes.encoder import RuntimeEncoder
from tests import helpers

# Trained until the dev labels are clear-cut, so int8 rounding cannot flip one.
TRAIN = dict(epochs=24, batch_size=8, learning_rate=3e-3, dtype="float32", seed=3)
HAVE_ONNX = all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime"))
RUNTIMES = [
    "tflite",
    pytest.param("onnx", marks=pytest.mark.skipif(not HAVE_ONNX, reason="onnx extra")),
]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    root = tmp_path_factory.mktemp("runtimes")
    helpers.write_pairs(root / "train.tsv", 64, seed=0)
    helpers.write_pairs(root / "dev.tsv", 16, seed=1)
    # Without --eval the last epoch is kept (with it, the first epoch at 100% accuracy, whose
    # labels are right but barely).
    helpers.finetune_files(
        root, "classify", max_seq_length=20, eval_file=None, export_serving=False, **TRAIN
    )
    return root


def _predict(root, runtime: str, capsys) -> list[dict]:
    out = root / f"predictions-{runtime}.jsonl"
    argv = ["predict", "--checkpoint", str(root / "model"), "--input", str(root / "dev.tsv")]
    assert cli.main([*argv, "--output", str(out), "--overwrite", "--runtime", runtime]) == 0
    capsys.readouterr()
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_predict_gives_tensorflows_labels_through_each_runtime(classifier, runtime, capsys):
    expected = _predict(classifier, "tf", capsys)
    probabilities = np.array([list(r["probabilities"].values()) for r in expected])
    # The test means something only if the model has learned the task (clear-cut labels).
    assert np.abs(probabilities[:, 0] - 0.5).min() > 0.05
    records = _predict(classifier, runtime, capsys)
    assert [r["label"] for r in records] == [r["label"] for r in expected]
    got = np.array([list(r["probabilities"].values()) for r in records])
    np.testing.assert_allclose(got, probabilities, atol=0.03)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_runtime_encoder_matches_the_keras_encoder(classifier, runtime):
    """The exported int8 encoder's pooled output against the restored Keras encoder's."""
    encoder = load_finetuned(classifier / "model").model.encoder
    inputs = probe_inputs(encoder.config.vocab_size, 20)
    exported = runtime_encoder(encoder, runtime, seq_length=20, threads=1)
    assert isinstance(exported, RuntimeEncoder)
    got = exported(inputs)["pooled_output"].numpy()
    want = encoder(inputs, training=False)["pooled_output"].numpy()
    cosine = np.sum(got * want, -1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cosine.min() > 0.99 and got.shape == want.shape


def test_tflite_runner_keeps_xnnpack_and_builtin_kernels_equal(classifier, tmp_path):
    """The XNNPACK delegate (the default) and TFLite's builtin kernels give the same float32
    outputs: the runner's switch changes kernels, not results."""
    encoder = load_finetuned(classifier / "model").model.encoder
    path = tmp_path / "encoder.tflite"
    path.write_bytes(tflite_converters(encoder, 16)["float32"].convert())
    inputs = probe_inputs(encoder.config.vocab_size, 16)
    with_xnnpack = tflite_runner(path, threads=1)(inputs)["pooled_output"]
    builtin = tflite_runner(path, threads=1, xnnpack=False)(inputs)["pooled_output"]
    np.testing.assert_allclose(with_xnnpack, builtin, atol=1e-5)


def test_onnx_runtime_without_the_extra_is_one_line(classifier, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnxruntime" else real(name, *a),
    )
    argv = [
        "predict",
        "--checkpoint",
        str(classifier / "model"),
        "--input",
        str(classifier / "dev.tsv"),
    ]
    assert cli.main([*argv, "--runtime", "onnx"]) == 2
    line = helpers.one_error_line(capsys.readouterr().err, "predict")
    assert 'pip install -e ".[onnx]"' in line


@pytest.mark.skipif(not HAVE_ONNX, reason="onnx extra")
def test_onnx_runtime_on_a_file_without_examples_is_one_line(classifier, tmp_path, capsys):
    """A header and no rows through --runtime onnx: the clean refusal (exit 2, one error line)
    before the encoder's int8 export, which is never called with an empty batch."""
    empty = tmp_path / "empty.tsv"
    empty.write_text("index\tsentence1\tsentence2\tlabel\n")
    argv = ["predict", "--checkpoint", str(classifier / "model"), "--input", str(empty)]
    assert cli.main([*argv, "--runtime", "onnx"]) == 2
    err = capsys.readouterr().err
    # The file is refused before the encoder is exported: one line, nothing else.
    assert "exported the encoder" not in err
    line = helpers.one_error_line(err, "predict")
    assert line.endswith(f"{empty} holds no examples")


def test_long_batches_are_fed_in_chunks_of_tokens():
    """`in_chunks`: calls of at most `chunk_tokens` tokens (at least one row), outputs in order."""
    from albert_tf.runtimes import in_chunks

    rows_per_call = []

    def run(inputs):
        ids = inputs["input_word_ids"]
        rows_per_call.append(len(ids))
        return {"pooled_output": ids[:, :2] * 2.0, "sequence_output": ids[:, :, None] + 0.5}

    ids = np.arange(20 * 128).reshape(20, 128)
    got = in_chunks(run, 1024)({"input_word_ids": ids, "input_mask": np.ones_like(ids)})
    assert rows_per_call == [8, 8, 4]
    np.testing.assert_array_equal(got["pooled_output"], ids[:, :2] * 2.0)
    np.testing.assert_array_equal(got["sequence_output"], ids[:, :, None] + 0.5)
    rows_per_call.clear()
    in_chunks(run, 1024)({"input_word_ids": np.zeros((3, 2048), np.int64)})
    assert rows_per_call == [1, 1, 1]
    rows_per_call.clear()
    in_chunks(run, None)({"input_word_ids": ids})
    assert rows_per_call == [20]


def test_batches_are_spread_over_one_runner_per_core():
    """`across_cores`: one row goes to the all-cores runner; a longer batch is cut into slices
    of at most `chunk_tokens` tokens, at least one per core, each run by a per-core runner on a
    thread of its own, with the outputs back in order."""
    import threading

    from albert_tf.runtimes import across_cores

    calls = []  # (runner, rows, thread)

    def runner(name):
        def run(inputs):
            ids = inputs["input_word_ids"]
            calls.append((name, len(ids), threading.get_ident()))
            return {"pooled_output": ids[:, :2] * 2.0, "sequence_output": ids[:, :, None] + 0.5}

        return run

    spread = across_cores(runner("whole"), [runner("core0"), runner("core1")], 1024)
    ids = np.arange(20 * 128).reshape(20, 128)
    got = spread({"input_word_ids": ids, "input_mask": np.ones_like(ids)})
    np.testing.assert_array_equal(got["pooled_output"], ids[:, :2] * 2.0)
    np.testing.assert_array_equal(got["sequence_output"], ids[:, :, None] + 0.5)
    assert sorted(rows for _, rows, _ in calls) == [4, 8, 8]
    assert {name for name, _, _ in calls} <= {"core0", "core1"}
    assert threading.get_ident() not in {thread for _, _, thread in calls}
    calls.clear()
    spread({"input_word_ids": ids[:3]})  # fewer rows than a chunk: still one slice per core
    assert sorted(rows for _, rows, _ in calls) == [1, 2]
    calls.clear()
    spread({"input_word_ids": ids[:1]})
    assert [(name, rows) for name, rows, _ in calls] == [("whole", 1)]


def test_runners_refuse_an_empty_batch():
    """Zero rows are a DataError, not a call into a runtime (ORT's int8 attention would stop
    the process)."""
    from albert_tf.errors import DataError
    from albert_tf.runtimes import across_cores, in_chunks

    def never(inputs):
        raise AssertionError("a runtime was called with an empty batch")

    empty = {"input_word_ids": np.zeros((0, 128), np.int32)}
    for runner in (in_chunks(never, 1024), across_cores(never, [never, never], 1024)):
        with pytest.raises(DataError, match="empty batch"):
            runner(empty)


def test_available_cores_follows_affinity_and_falls_back_to_the_core_count(monkeypatch):
    """The runners' default thread count: the process's CPU affinity on Linux; where the OS has
    no affinity call (macOS, Windows), every core instead of an AttributeError."""
    import os

    from albert_tf.runtimes import available_cores

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert available_cores() == 3
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert available_cores() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert available_cores() == 1
