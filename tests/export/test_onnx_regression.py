"""`export --finetuned DIR --onnx` of a regress task: `regression.onnx` and
`regression_int8.onnx` on raw strings give `predict`'s values; tasks without raw-string ONNX
models are refused in one line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime_extensions")

from tests import helpers  # noqa: E402

FILES = ("regression.onnx", "regression_int8.onnx")
# Largest |value - predict's value| each file may give on TEXTS, whose values here lie within
# 0.3-0.6: float32 for float rounding (1.2e-7 seen), int8 the classifier's int8 probability
# bound (tests/export/test_onnx_export.py::test_classifier_equals_serving; 5.1e-3 seen).
TOLERANCE = {"regression.onnx": 1e-5, "regression_int8.onnx": 2e-2}
WORDS = ["the", "film", "plot", "cast", "was", "great", "awful", "quiet", "study", "of", "time"]
# Short texts and ones of several 16-piece windows, a non-ASCII one among them.
TEXTS = [
    "the plot was great",
    "awful",
    "Café déjà vu, the film felt quiet",
    " ".join(WORDS * 3),
    " ".join(WORDS[::-1] * 2),
]
PAIRS = ["it felt great", " ".join(WORDS[3:] * 2), "x", "the cast", "quiet"]


@pytest.fixture(
    scope="module",
    params=[(False, 1), (True, 3)],
    ids=["one-text", "pairs-three-windows"],
)
def regression(request, tmp_path_factory):
    """A tiny regress model fine-tuned from random weights (one epoch), exported with --onnx."""
    from albert_tf.cli import main

    pair, max_windows = request.param
    root = tmp_path_factory.mktemp("regression")
    header = "sentence1\tsentence2\tscore" if pair else "sentence\tscore"
    lines = [header]
    for i in range(24):
        text = " ".join((WORDS * 3)[i % 5 : i % 5 + 2 + i])
        score = f"{len(text.split()) / 5:.1f}"
        lines.append(f"{text}\t{WORDS[i % 7]}\t{score}" if pair else f"{text}\t{score}")
    (root / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    helpers.finetune_files(
        root,
        "regress",
        eval_file=None,
        # Large initial weights: different texts then get clearly different values.
        config=str(helpers.write_config(root, initializer_range=0.15)),
        max_seq_length=16,
        max_windows=max_windows,
        epochs=1,
        batch_size=8,
        learning_rate=1e-3,
        dtype="float32",
    )
    model = root / "model"
    assert main(["export", "--finetuned", str(model), "--onnx"]) == 0
    return SimpleNamespace(root=root, model=model, pair=pair, max_windows=max_windows)


def _predicted(regression) -> np.ndarray:
    """`albert-tf predict`'s values of TEXTS (and PAIRS), read from its JSONL output."""
    from albert_tf.cli import main

    header = "sentence1\tsentence2" if regression.pair else "sentence"
    rows = zip(TEXTS, PAIRS, strict=True) if regression.pair else ((t,) for t in TEXTS)
    lines = [header, *("\t".join(row) for row in rows)]
    path = regression.root / "probe.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = regression.root / "predictions.jsonl"
    args = ["--input", str(path), "--output", str(output), "--overwrite", "--quiet"]
    assert main(["predict", "--checkpoint", str(regression.model), *args]) == 0
    records = [json.loads(line) for line in output.read_text().splitlines()]
    return np.array([r["prediction"] for r in records], np.float32)


def test_regression_equals_predict(regression):
    """Both files: `text` (and `text_pair`) strings [B] in, `value` float32 [B] out, equal to
    `predict`'s values within TOLERANCE; report.json says the task, inputs, output and
    agreement with serving/."""
    from albert_tf.export.onnx.writer import run, session

    want = _predicted(regression)
    assert np.ptp(want) > 1e-3  # the texts are told apart
    texts = {"text": np.array(TEXTS, dtype=object)}
    if regression.pair:
        texts["text_pair"] = np.array(PAIRS, dtype=object)
    inputs = list(texts)
    for name in FILES:
        sess = session(regression.model / "onnx" / name)
        assert [i.name for i in sess.get_inputs()] == inputs
        assert [(o.name, o.type) for o in sess.get_outputs()] == [("value", "tensor(float)")]
        got = run(sess, texts)["value"]
        assert got.shape == (len(TEXTS),) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE[name])
    report = json.loads((regression.model / "onnx" / "report.json").read_text())
    assert (report["task"], report["inputs"], report["outputs"]) == ("regress", inputs, ["value"])
    assert report["labels"] is None
    assert (report["windows"] or {}).get("max_windows", 1) == regression.max_windows
    assert set(report["bytes"]) == set(FILES)
    for name in FILES:
        assert report["against_serving"][name]["values_max_abs_diff"] < TOLERANCE[name]


def test_encoder_rows_are_declared_as_the_packings(regression):
    """The encoder's `pooled_output` is declared on the packing's rows: the texts [B], or the
    windows [W] of a windowed model (declared [B], ONNX Runtime warned on every run where W
    and B differ, planning one's buffers for the other)."""
    import onnx

    rows = "windows" if regression.max_windows > 1 else "batch"
    for name in FILES:
        graph = onnx.load(str(regression.model / "onnx" / name)).graph
        declared = [
            value.type.tensor_type.shape.dim[0].dim_param
            for value in helpers.all_value_infos(graph)
            if value.name == "pooled_output"
        ]
        assert declared == [rows]


def test_empty_batch_gives_empty_values(regression):
    """An empty batch gets `value` float32 [0] from both files (the int8 one guarded)."""
    paths = [regression.model / "onnx" / name for name in FILES]
    want = {"value": [[0], "float32"]}
    assert helpers.empty_batch_outputs(paths) == {str(path): want for path in paths}


@pytest.mark.parametrize(
    ("task", "head", "refusal"),
    [
        ("tag", None, "this one is tag"),
        ("multiple-choice", None, "this one is multiple-choice"),
        ("squad", False, "this one has --squad-head bert"),
    ],
)
def test_other_tasks_are_refused(task, head, refusal, tmp_path):
    """What has no raw-string ONNX model is an ExportError naming what has, before any file."""
    from albert_tf.errors import ExportError
    from albert_tf.export.onnx.classifier import COVERED, write_onnx_classifier

    finetuned = SimpleNamespace(task=SimpleNamespace(settings=SimpleNamespace(task=task)))
    finetuned.task.albert_head = head
    with pytest.raises(ExportError) as error:
        write_onnx_classifier(SimpleNamespace(finetuned=finetuned), tmp_path)
    assert str(error.value) == f"{COVERED}; {refusal}"
    assert "regress" in COVERED
    assert not any(tmp_path.iterdir())
