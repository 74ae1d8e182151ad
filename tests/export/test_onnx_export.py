"""`export --onnx`: the encoder graph, its fusions and int8 forms, the raw-string models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime_extensions")

from albert_tf.export.encoder import ENCODER_INPUTS  # noqa: E402
from tests import helpers  # noqa: E402
from tests.conftest import REPO  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = REPO
# Long enough for every string the raw-string tests tokenize.
TEXT_SEQ_LENGTH = 512


def _session(path):
    from albert_tf.export.onnx.writer import session

    return session(path)


def _run(path, inputs):
    from albert_tf.export.onnx.writer import run

    return run(_session(path), inputs)


@pytest.fixture(scope="module", params=["albert_tf1_tiny", "albert_tf1_groups"])
def fixture_export(request, tmp_path_factory, fixtures_dir):
    """A TF1 fixture converted, then exported with --onnx (no SentencePiece model)."""
    from albert_tf.convert.tf1 import convert_tf1_checkpoint
    from albert_tf.export.bundle import export_bundle

    source = fixtures_dir / request.param
    work = tmp_path_factory.mktemp(request.param)
    checkpoint = convert_tf1_checkpoint(
        source / "model.ckpt", source / "albert_config.json", work / "checkpoint"
    )
    bundle = export_bundle(checkpoint, work / "hub", seq_length=16, onnx=True)
    config = json.loads((source / "albert_config.json").read_text())
    return dict(source=source, bundle=bundle, config=config)


def test_encoder_equals_original_and_saved_model(fixture_export):
    import tensorflow as tf

    bundle = fixture_export["bundle"]
    reference = dict(np.load(fixture_export["source"] / "reference_outputs.npz"))
    inputs = {name: reference[name].astype(np.int32) for name in ENCODER_INPUTS}
    got = _run(bundle.onnx / "encoder.onnx", inputs)
    saved_model = tf.saved_model.load(str(bundle.encoder))
    want = saved_model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(got[name], reference[name], atol=1e-5)
        np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-4)
    accuracy = bundle.onnx_report["accuracy"]
    assert accuracy["float32"]["sequence_max_abs_diff"] < 1e-4
    assert accuracy["float32"]["pooled_max_abs_diff"] < 1e-4
    for kind in ("int8", "int8_static"):
        assert accuracy[kind]["pooled_min_cosine"] >= 0.999, kind


@pytest.mark.parametrize(
    "overrides",
    [
        dict(hidden_act="gelu_exact"),
        dict(hidden_act="swish", shared_params="none"),
        dict(hidden_act="relu", shared_params="attention", embedding_size=32),
        dict(hidden_act="gelu", shared_params="ffn", num_hidden_groups=1),
    ],
)
def test_encoder_graph_equals_keras(overrides):
    """Every activation, sharing mode and E == H (no projection), from random weights."""
    import tf_keras as keras

    from albert_tf.encoder import AlbertEncoder
    from albert_tf.export.onnx.encoder import encoder_graph

    config = helpers.tiny_config(**overrides)
    keras.utils.set_random_seed(3)
    encoder = AlbertEncoder(config)
    inputs = helpers.make_inputs(config, batch=3, seq=10)
    want = encoder(inputs, training=False)
    got = _run(encoder_graph(encoder), {k: v.numpy() for k, v in inputs.items()})
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-5)


def test_every_block_is_fused(fixture_export):
    """ORT's optimizer fuses the embeddings, every attention and the FastGelu of gelu models
    (tiny: gelu; groups: relu); the residual LayerNorms it fuses into SkipLayerNormalization
    are split again (optimize.split_for_cpu_kernels) into LayerNormalization on 2-D rows."""
    config = fixture_export["config"]
    blocks = config["num_hidden_layers"] * config["inner_group_num"]
    fused = fixture_export["bundle"].onnx_report["fused_ops"]
    assert fused["EmbedLayerNormalization"] == 1
    assert fused["Attention"] == blocks
    assert fused["LayerNormalization"] == 2 * blocks
    assert "SkipLayerNormalization" not in fused
    assert fused.get("FastGelu", 0) == (blocks if config["hidden_act"] == "gelu" else 0)


def test_sessions_keep_the_split_layer_norms(fixture_export, tmp_path):
    """ORT's session-time SkipLayerNorm fusion, on by default, leaves the split (2-D) residual
    LayerNorms of the int8 encoder alone: the optimized graph a default session runs has none."""
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(
        str(fixture_export["bundle"].onnx / "encoder_int8.onnx"),
        options,
        providers=["CPUExecutionProvider"],
    )
    optimized = onnx.load(options.optimized_model_filepath).graph
    ops = {node.op_type for node in helpers.all_nodes(optimized)}
    assert "LayerNormalization" in ops
    assert "SkipLayerNormalization" not in ops


def test_shared_weights_are_stored_once(fixture_export):
    """Cross-layer sharing survives: each distinct block's kernels once in every file."""
    import onnx

    config = fixture_export["config"]
    distinct = config["num_hidden_groups"] * config["inner_group_num"]
    onnx_dir = fixture_export["bundle"].onnx
    graph = onnx.load(str(onnx_dir / "encoder.onnx")).graph
    queries = [t.name for t in graph.initializer if t.name.endswith("self/query/kernel")]
    assert len(queries) == distinct
    h = config["hidden_size"]
    int8 = onnx.load(str(onnx_dir / "encoder_int8.onnx")).graph
    qkv = [t for t in helpers.all_initializers(int8) if tuple(t.dims) == (h, 3 * h)]
    assert len(qkv) == distinct
    assert [t.data_type for t in qkv] == [onnx.TensorProto.INT8] * distinct
    sizes = fixture_export["bundle"].onnx_report["bytes"]
    assert sizes["encoder_int8.onnx"] < sizes["encoder.onnx"]
    # Static int8 quantizes activations too, not only the weights.
    static = onnx.load(str(onnx_dir / "encoder_int8_static.onnx")).graph
    weights = {t.name for t in helpers.all_initializers(static)}
    quantized = [n for n in helpers.all_nodes(static) if n.op_type == "QuantizeLinear"]
    assert any(n.input[0] not in weights for n in quantized)


@pytest.fixture(scope="module")
def text_graph(fixtures_dir):
    """The raw-string preprocessing graph of the fixture tokenizer (one text input)."""
    from albert_tf.export.onnx.text import preprocess_graph

    return preprocess_graph(fixtures_dir / "tokenizer" / "spm.model", TEXT_SEQ_LENGTH)


@pytest.fixture(scope="module")
def text_ids(fixtures_dir, text_graph):
    """texts -> (ids of the raw-string preprocessing graph without [CLS]/[SEP], the reference
    AlbertTokenizer's ids); one session for the module."""
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    sess = _session(text_graph)
    tokenizer = AlbertTokenizer(fixtures_dir / "tokenizer" / "spm.model")

    def ids(texts: list[str]) -> tuple[list[list[int]], list[list[int]]]:
        from albert_tf.export.onnx.writer import run

        got = run(sess, {"text": np.array(texts, dtype=object)})
        assert not got["input_type_ids"].any()
        rows = []
        for row, mask in zip(got["input_word_ids"], got["input_mask"], strict=True):
            row = row[: mask.sum()].tolist()
            assert row[0] == tokenizer.cls_id and row[-1] == tokenizer.sep_id
            rows.append(row[1:-1])
        want = [tokenizer.encode(t) for t in texts]
        assert max(map(len, want)) <= TEXT_SEQ_LENGTH - 2
        return rows, want

    return ids


def test_reference_strings_give_the_original_ids(fixtures_dir, text_ids):
    reference = json.loads((fixtures_dir / "tokenizer" / "reference_tokenization.json").read_text())
    texts = [case["text"] for case in reference["cases"]]
    # Beyond the fixture: Final_Sigma, compatibility decompositions, Turkish dotted I,
    # no-break and em spaces, digit-comma runs; runs of one repeated string whose order is a
    # float32 tie, after unknown characters (counted once per character) and user-defined
    # pieces; empty text.
    extra = [
        "ΣΑΣ ΟΔΟΣ.",
        "ΑΣ'Σ AΣ'B Σ",
        "Ὀδυσσεύς",
        "ﬁ ① ㎏ Å ǅ",
        "İstanbul",
        "x\u00a0\u2003y",
        "1,2,3",
        "\x80000",
        "\x80" * 7 + "-" * 40,
        "a😀b😀😀c" + "0" * 31,
        "(((" + "-" * 40 + ")))" + "0" * 17,
        "=" * 56 + " " + "-" * 34 + " thethethe",
        "",
    ]
    got, want = text_ids(texts + extra)
    assert want[: len(texts)] == [case["ids"] for case in reference["cases"]]
    mismatches = [t for t, g, w in zip(texts + extra, got, want, strict=True) if g != w]
    assert mismatches == []


def _branches_run(graph, batches, tmp_path) -> list[set[str]]:
    """For each batch of texts, the branches of text.normalize's `If` ("ascii", "full") whose
    nodes ONNX Runtime ran on it: one profiled session (its node events fall within the
    `model_run` event of the run they belong to)."""
    import bisect

    import onnxruntime as ort

    from albert_tf.runtimes.ort import onnxruntime_extensions_library

    (node,) = [n for n in graph.graph.node if n.op_type == "If"]
    branches = {a.g.name.rsplit("/", 1)[1]: {n.name for n in a.g.node} for a in node.attribute}
    assert set(branches) == {"ascii", "full"}
    options = ort.SessionOptions()
    options.register_custom_ops_library(onnxruntime_extensions_library())
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "profile")
    sess = ort.InferenceSession(
        graph.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    for texts in batches:
        sess.run(None, {"text": np.array(texts, dtype=object)})
    events = json.loads(Path(sess.end_profiling()).read_text())
    starts = sorted(e["ts"] for e in events if e["name"] == "model_run")
    assert len(starts) == len(batches)
    ran = [set() for _ in batches]
    for event in events:
        if event.get("cat") == "Node":
            ran[bisect.bisect_right(starts, event["ts"]) - 1].add(
                event["name"].removesuffix("_kernel_time")
            )
    return [{kind for kind, names in branches.items() if names & nodes} for nodes in ran]


def test_ascii_batches_take_their_own_branch_and_give_the_same_ids(
    fixtures_dir, text_graph, text_ids, tmp_path
):
    """A batch of ASCII texts is normalized with ASCII tables (text.normalize's `If`), any
    other batch with the full ones; ONNX Runtime's profile says which branch ran. Each
    reference string alone, cased ASCII texts whose whitespace and case the tables change, and
    batches of several texts (all ASCII; ASCII with one other) give the reference ids."""
    reference = json.loads((fixtures_dir / "tokenizer" / "reference_tokenization.json").read_text())
    texts = [case["text"] for case in reference["cases"]]
    texts += [" Hello\tWORLD \x0b\x1c It's  A TEST\r\n", "ÀB Cd", "MiXeD 12,345 CaSe!"]
    ascii_texts = [t for t in texts if t.isascii()]
    others = [t for t in texts if not t.isascii()]
    assert len(ascii_texts) > 3 and others
    batches = [[t] for t in texts] + [
        ascii_texts,
        ascii_texts[-3:],
        [*ascii_texts[:5], others[-1], *ascii_texts[-2:]],
        [others[0], *ascii_texts[-3:]],
    ]
    for batch in batches:
        got, want = text_ids(batch)
        assert got == want, batch
    taken = _branches_run(text_graph, batches, tmp_path)
    expected = [{"ascii"} if all(t.isascii() for t in b) else {"full"} for b in batches]
    assert [(b, t) for b, t, e in zip(batches, taken, expected, strict=True) if t != e] == []


# Strings made of runs of one repeated string (where segmentations of equal pieces tie),
# words, digit-comma runs and characters outside the vocabulary, which change the row's score.
_UNITS = ["-", "=", "0", "9", "_", "`", "*", "00", "ab", "ha", "the ", ".", ",", "1,"]
_OTHERS = ["", " ", "x", " - ", "\x80", "😀", "漢字", "ж", "(", "value "]
_runs = st.lists(
    st.tuples(st.sampled_from(_UNITS), st.integers(1, 40), st.sampled_from(_OTHERS)),
    min_size=1,
    max_size=5,
).map(lambda parts: "".join(unit * n + other for unit, n, other in parts))


@settings(max_examples=60)
@given(st.lists(_runs, min_size=1, max_size=6))
def test_runs_of_repeated_strings_give_the_original_ids(text_ids, texts):
    """onnxruntime-extensions orders tied pieces its own way; the graph puts them back in
    `sentencepiece`'s order (export/onnx/piece_order.py)."""
    got, want = text_ids(texts)
    assert got == want


def test_pairs_are_packed_as_bert_pack_inputs(fixtures_dir):
    """Two segments, round-robin trimmed, against the preprocessing SavedModel's packing."""
    import tensorflow as tf

    from albert_tf.export.onnx.text import preprocess_graph
    from albert_tf.preprocess.graph_tokenizer import GraphTokenizer
    from albert_tf.preprocess.preprocess_model import bert_pack_inputs

    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    rng = np.random.default_rng(0)
    words = ["the", "value", "1,000", "café", "naïve", "ΣΑΣ", "of", "a", "long", "review"]
    first = [" ".join(rng.choice(words, n)) for n in (0, 1, 3, 9, 2, 14, 5)]
    second = [" ".join(rng.choice(words, n)) for n in (4, 0, 12, 2, 1, 14, 5)]
    seq_length = 12
    got = _run(
        preprocess_graph(sp_model, seq_length, num_segments=2),
        {"text": np.array(first, dtype=object), "text_pair": np.array(second, dtype=object)},
    )
    tokenizer = GraphTokenizer(sp_model)
    want = bert_pack_inputs(
        [tokenizer.tokenize(tf.constant(first)), tokenizer.tokenize(tf.constant(second))],
        seq_length,
        tokenizer.cls_id,
        tokenizer.sep_id,
        tokenizer.pad_id,
    )
    for name in ENCODER_INPUTS:
        np.testing.assert_array_equal(got[name], want[name].numpy(), err_msg=name)


@pytest.mark.parametrize("num_segments", [1, 2])
def test_classifier_packing_pads_to_the_batchs_longest_row(fixtures_dir, num_segments):
    """With pad_to_longest (the classifiers'), the ids are those padded to --max-seq-length cut
    after the batch's longest row; a row over the limit still gets it."""
    from albert_tf.export.onnx.text import TEXT_INPUTS, preprocess_graph

    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    texts = {
        "short": ["the value", "a long review", ""],
        "long": ["the value", "a long review of the café " * 9, "of"],
    }
    for kind, batch in texts.items():
        feed = {n: np.array(batch[::-1] if i else batch, dtype=object)
                for i, n in enumerate(TEXT_INPUTS[:num_segments])}  # fmt: skip
        full = _run(preprocess_graph(sp_model, 24, num_segments=num_segments), feed)
        got = _run(
            preprocess_graph(sp_model, 24, num_segments=num_segments, pad_to_longest=True), feed
        )
        longest = int(full["input_mask"].sum(axis=1).max())
        assert longest < 24 if kind == "short" else longest == 24
        for name in ENCODER_INPUTS:
            assert got[name].shape == (3, longest), name
            np.testing.assert_array_equal(got[name], full[name][:, :longest], err_msg=name)


def test_export_loads_the_sentencepiece_model_once(sp_onnx):
    """`export --onnx --tflite --hf --keras-hub` with a SentencePiece model: encoder/,
    preprocess/, tflite/, onnx/ (raw-string encoders included), hf/ and keras_hub/ (their
    tokenizers included) all from one loaded model."""
    bundle = sp_onnx["bundle"]
    names = ("preprocess", "tflite", "onnx", "hf", "keras_hub")
    assert (bundle.preprocess, bundle.tflite, bundle.onnx, bundle.hf, bundle.keras_hub) == tuple(
        bundle.output_dir / name for name in names
    )
    assert (bundle.onnx / "text_encoder.onnx").is_file()
    assert (bundle.hf / "tokenizer.json").is_file()
    assert (bundle.keras_hub / "assets" / "tokenizer" / "vocabulary.spm").is_file()
    loads = [Path(path).resolve() for path in sp_onnx["sp_model_loads"]]
    assert loads == [(sp_onnx["checkpoint"] / "spm.model").resolve()]


def test_text_encoder_equals_the_saved_models(sp_onnx):
    """Raw strings through text_encoder.onnx = preprocess/ then encoder/ (SavedModels)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf.export.tflite import cosine_similarity

    texts = ["Café naïve résumé, 1,000 times!", "", "A much longer sentence " * 4]
    bundle = sp_onnx["bundle"]
    preprocess = tf.saved_model.load(str(bundle.preprocess))
    encoder = tf.saved_model.load(str(bundle.encoder))
    ids = preprocess(tf.constant(texts))
    want = encoder(ids, training=False)
    got = _run(bundle.onnx / "text_encoder.onnx", {"text": np.array(texts, dtype=object)})
    for name in ENCODER_INPUTS:
        np.testing.assert_array_equal(got[name], ids[name].numpy())
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-4)
    int8 = _run(bundle.onnx / "text_encoder_int8.onnx", {"text": np.array(texts, dtype=object)})
    cosine = cosine_similarity(int8["pooled_output"], want["pooled_output"].numpy())
    assert cosine.min() >= 0.999
    report = json.loads((bundle.onnx / "report.json").read_text())
    assert report["text_ids_equal_preprocess"] is True
    assert report["probe_text"] == "pydoc_data help topics"


def test_id_encoders_give_an_empty_batch_empty_outputs(fixture_export):
    """input_word_ids [0, 8] through every encoder file: [0, H] pooled, [0, 8, H] sequence.
    The dynamic int8 file is guarded (ORT's int8 attention would stop the process on zero
    rows); on rows it gives the report's accuracy (test_encoder_equals_original_and_saved_model).
    The others take zero rows as they are and stay unwrapped."""
    import onnx

    from albert_tf.export.onnx import optimize

    hidden = fixture_export["config"]["hidden_size"]
    want = dict(pooled_output=[[0, hidden], "float32"], sequence_output=[[0, 8, hidden], "float32"])
    onnx_dir = fixture_export["bundle"].onnx
    names = ("encoder.onnx", "encoder_int8.onnx", "encoder_int8_static.onnx")
    paths = [onnx_dir / name for name in names]
    assert helpers.empty_batch_outputs(paths) == {str(path): want for path in paths}
    guarded = {"Equal": 1, "If": 1, "Shape": 1}
    assert optimize.op_counts(onnx.load(str(onnx_dir / "encoder_int8.onnx"))) == guarded
    for name in ("encoder.onnx", "encoder_int8_static.onnx"):
        assert "If" not in optimize.op_counts(onnx.load(str(onnx_dir / name))), name


def test_text_encoder_gives_an_empty_batch_empty_outputs(sp_onnx):
    """`text` of shape [0] through both raw-string encoders: empty outputs of the declared
    dtypes, [0, S] ids, [0, H] pooled, [0, S, H] sequence (the int8 attention kernel and the
    string operators would crash the process on zero rows)."""
    hidden = sp_onnx["config"].hidden_size
    seq_length = sp_onnx["seq_length"]
    ids = [[0, seq_length], "int32"]
    want = dict(
        input_word_ids=ids,
        input_mask=ids,
        input_type_ids=ids,
        pooled_output=[[0, hidden], "float32"],
        sequence_output=[[0, seq_length, hidden], "float32"],
    )
    onnx_dir = sp_onnx["bundle"].onnx
    paths = [onnx_dir / "text_encoder.onnx", onnx_dir / "text_encoder_int8.onnx"]
    assert helpers.empty_batch_outputs(paths) == {str(path): want for path in paths}


def test_only_classifiers_are_exported():
    from albert_tf.errors import ExportError
    from albert_tf.export.onnx.classifier import check_exportable

    check_exportable(SimpleNamespace(settings=SimpleNamespace(task="classify", max_windows=4)))
    with pytest.raises(ExportError, match="classify tasks; this one is squad"):
        check_exportable(SimpleNamespace(settings=SimpleNamespace(task="squad", max_windows=1)))


@pytest.mark.slow
@pytest.mark.parametrize("pair", [False, True])
def test_classifier_equals_serving(tmp_path, pair, fixtures_dir):
    """A fine-tuned classifier's raw-string ONNX models give serving/'s labels and
    probabilities (float32 within 1e-4)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf.cli import main

    rows = [
        (f"the film {w} was {m}", f"it felt {m}", label)
        for w, m, label in [("plot", "great", "pos"), ("cast", "awful", "neg")] * 12
    ]
    header = "sentence1\tsentence2\tlabel\n" if pair else "sentence\tlabel\n"
    lines = [f"{a}\t{b}\t{c}" if pair else f"{a} {b}\t{c}" for a, b, c in rows]
    (tmp_path / "train.tsv").write_text(header + "\n".join(lines) + "\n")
    config = helpers.write_config(tmp_path)
    model = tmp_path / "model"
    code = main(
        [
            "finetune",
            "--task",
            "classify",
            "--train",
            str(tmp_path / "train.tsv"),
            "--init",
            "random",
            "--config",
            str(config),
            "--sp-model",
            str(fixtures_dir / "tokenizer" / "spm.model"),
            "--output",
            str(model),
            "--epochs",
            "1",
            "--max-seq-length",
            "16",
            "--dtype",
            "float32",
        ]
    )
    assert code == 0
    assert main(["export", "--finetuned", str(model), "--onnx"]) == 0
    texts = {"text": np.array(["the plot was great", "awful", ""], dtype=object)}
    if pair:
        texts["text_pair"] = np.array(["it felt great", "", "x"], dtype=object)
    serving = tf.saved_model.load(str(model / "serving")).signatures["serving_default"]
    want = serving(**{k: tf.constant(v.astype(str)) for k, v in texts.items()})
    for name in ("classifier.onnx", "classifier_int8.onnx"):
        got = _run(model / "onnx" / name, texts)
        assert got["label"].tolist() == [s.decode() for s in want["label"].numpy()]
        np.testing.assert_array_equal(got["label_id"], want["label_id"].numpy())
        atol = 1e-4 if name == "classifier.onnx" else 2e-2
        np.testing.assert_allclose(got["probabilities"], want["probabilities"].numpy(), atol=atol)
    report = json.loads((model / "onnx" / "report.json").read_text())
    assert report["against_serving"]["classifier.onnx"]["probabilities_max_abs_diff"] < 1e-4
    assert report["serving_dtype"] == "float32"
    assert report["inputs"] == (["text", "text_pair"] if pair else ["text"])


def test_without_the_extra_one_line_exit_2(tmp_path):
    """`export --onnx` without onnx installed: one line naming the extra, exit 2, no output."""
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "from albert_tf.cli import main\n"
        f"sys.exit(main(['export', '--checkpoint', 'x', '--output', {str(tmp_path / 'o')!r}, "
        "'--onnx']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 2
    line = helpers.one_error_line(result.stderr, "export")
    assert 'pip install -e ".[onnx]"' in line
    assert not (tmp_path / "o").exists()


def _after_tensorflow(fixtures_dir, extensions_import: str) -> subprocess.CompletedProcess:
    """A process that imports TensorFlow, then `extensions_import`, then runs a SentencePiece
    graph through `albert_tf.runtimes.onnx_session` (it crashed there with exit 139)."""
    code = (
        "import tensorflow\n"
        f"{extensions_import}\n"
        "import numpy as np\n"
        "from albert_tf.errors import InstallError\n"
        "from albert_tf.runtimes import onnx_session\n"
        "try:\n"
        "    from albert_tf.export.onnx.text import preprocess_graph\n"
        f"    graph = preprocess_graph({str(fixtures_dir / 'tokenizer' / 'spm.model')!r}, 16)\n"
        "    sess = onnx_session(graph, custom_ops=True)\n"
        "except InstallError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    ids = sess.run(['input_word_ids'], {'text': np.array(['a witty film'], object)})\n"
        "    print(ids[0][0].tolist())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_tensorflow_first_works(fixtures_dir):
    """onnxruntime-extensions loaded by albert-tf after TensorFlow keeps its own protobuf
    (RTLD_DEEPBIND): the SentencePiece operator gives the tokenizer's ids."""
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    result = _after_tensorflow(fixtures_dir, "")
    assert result.returncode == 0, result.stderr[-2000:]
    tokenizer = AlbertTokenizer(fixtures_dir / "tokenizer" / "spm.model")
    ids = [tokenizer.cls_id, *tokenizer.encode("a witty film"), tokenizer.sep_id]
    assert json.loads(result.stdout.strip().splitlines()[-1])[: len(ids)] == ids


def test_extensions_imported_after_tensorflow_is_an_error_not_a_crash(fixtures_dir):
    result = _after_tensorflow(fixtures_dir, "import onnxruntime_extensions")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "import onnxruntime_extensions before tensorflow" in result.stdout


def test_guard_sizes_empty_outputs_from_input_dimensions_or_refuses():
    """An output dimension named as an input's is read from that input on an empty batch; one
    named after nothing the inputs carry cannot be sized, and the guard says so."""
    import onnx
    from onnx import TensorProto, helper

    from albert_tf.export.onnx.text import guard_empty_batch

    def model(out_dims):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "width"])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    guarded = guard_empty_batch(model(["batch", "width"]))
    onnx.checker.check_model(guarded, full_check=True)
    for rows in (0, 2):
        x = np.arange(rows * 5, dtype=np.float32).reshape(rows, 5) - 3
        (y,) = _session(guarded).run(None, {"x": x})
        np.testing.assert_array_equal(y, np.maximum(x, 0))
    with pytest.raises(ValueError, match="'depth' is no input's dimension"):
        guard_empty_batch(model(["batch", "depth"]))


def test_quantizing_logs_no_preprocessing_advice(caplog):
    """ONNX Runtime's quantizers advise pre-processing, on the root logger, for every file; the
    graphs are ORT-optimized already, so the export drops that advice while it quantizes, and
    only then."""
    import logging

    import tf_keras as keras

    from albert_tf.encoder import AlbertEncoder
    from albert_tf.export.onnx import optimize
    from albert_tf.export.onnx.encoder import encoder_graph

    config = helpers.tiny_config()
    keras.utils.set_random_seed(3)
    encoder = AlbertEncoder(config)
    encoder(helpers.make_inputs(config, batch=1, seq=8), training=False)
    fused = optimize.fuse(encoder_graph(encoder), config.num_attention_heads, config.hidden_size)
    with caplog.at_level(logging.WARNING):
        optimize.quantize_dynamic_int8(fused)
        logging.warning("Please consider: logged after quantizing")
    assert [r.getMessage() for r in caplog.records] == ["Please consider: logged after quantizing"]
