"""Shared test checks: tiny configs, inputs, config round trip, save/load, mixed precision.

Other engineers may append functions; keep each one a self-contained check.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from albert_tf.config import AlbertConfig


def tiny_config(**overrides: Any) -> AlbertConfig:
    """vocab 100, E=16 != H=32, 4 layers, 2 groups x 2 inner groups, 4 heads, FFN 64."""
    values = dict(
        vocab_size=100,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=4,
        num_hidden_groups=2,
        inner_group_num=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        hidden_act="gelu",
    )
    values.update(overrides)
    return AlbertConfig(**values)


# The hard strings of tests/fixtures/tokenizer whose SentencePiece segmentation holds a piece
# ending in a digit and a comma ("▁1990,", "1,") that ALBERT re-splits: the one kind of input
# neither a tokenizer.json nor a SentencePiece normalizer can reproduce (HF and keras-hub tests).
DIGIT_COMMA_HARD_STRINGS = (
    "The year 1990, the value 1,000,000 and 3,14",
    "The sort_stats() method now processes some additional options (i.e., in addition to the "
    "old -1, 0, 1, or 2 that are respectively interpreted as 'stdname', 'calls', 'time', and "
    "'cumulative'). It takes either an arbitrary number of quoted strings or SortKey enum to "
    "select the sort order.",
    "Create image item with coordinates x1,y1.",
    "assert Annotated[Annotated[T, Ann1, Ann2], Ann3] == Annotated[T, Ann1, Ann2, Ann3]",
)


def tiny_pretraining_config(vocab_size: int) -> AlbertConfig:
    """The smallest useful pretraining model: E=8, H=16, 2 layers, 2 heads, FFN 32, 32 positions."""
    return AlbertConfig(
        vocab_size=vocab_size,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )


def make_inputs(
    config: AlbertConfig, batch: int = 2, seq: int = 8, seed: int = 0, positions: int = 0
) -> dict[str, tf.Tensor]:
    """Random int32 encoder inputs [batch, seq]; row b has its last b tokens padded.

    With `positions` > 0, adds `masked_lm_positions` [batch, positions] inside the real tokens.
    """
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, size=(batch, seq)).astype(np.int32)
    lengths = np.maximum(seq - np.arange(batch), 1)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    types = ((np.arange(seq)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int32)
    inputs = dict(
        input_word_ids=tf.constant(ids * mask),
        input_mask=tf.constant(mask),
        input_type_ids=tf.constant(types),
    )
    if positions:
        pos = np.stack([rng.integers(0, n, size=positions) for n in lengths]).astype(np.int32)
        inputs["masked_lm_positions"] = tf.constant(pos)
    return inputs


def assert_outputs_close(actual: Any, expected: Any, atol: float = 1e-6, rtol: float = 0.0) -> None:
    """Every tensor of two nested output structures (dicts/lists) agrees within tolerance."""
    tf.nest.assert_same_structure(actual, expected)
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=atol, rtol=rtol)


def assert_config_round_trip(model: keras.layers.Layer, inputs: Any) -> keras.layers.Layer:
    """`from_config(get_config())` builds the same architecture; returns the rebuilt model.

    The rebuilt model gets the original's weights and must then give identical outputs.
    """
    config = model.get_config()
    rebuilt = type(model).from_config(config)
    assert rebuilt.get_config() == config
    assert [w.shape for w in rebuilt.weights] == [w.shape for w in model.weights]
    rebuilt.set_weights(model.get_weights())
    assert_outputs_close(rebuilt(inputs, training=False), model(inputs, training=False), atol=0)
    return rebuilt


def assert_saved_model_round_trip(model: keras.Model, inputs: Any, directory: Path) -> None:
    """`tf.saved_model.save` + `tf.saved_model.load` of a model called with a dict of int32
    [B, S] tensors gives the same nested outputs, at any batch size and sequence length.

    Saves a plain tf.Module holding the variables and a traced `serve` function: tracing every
    Keras layer for Keras metadata would take ~4x longer (export tests cover that path).
    """
    module = tf.Module()
    module.variables_to_save = list(model.variables)
    spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in inputs}
    module.serve = tf.function(
        lambda features: model(features, training=False), input_signature=[spec]
    )
    tf.saved_model.save(module, str(directory))
    restored = tf.saved_model.load(str(directory))
    assert_outputs_close(restored.serve(inputs), model(inputs, training=False), atol=1e-6)


def assert_checkpoint_round_trip(
    build: Callable[[], keras.Model], inputs: Any, directory: Path
) -> None:
    """Two models from `build()` differ; after tf.train.Checkpoint save/restore they agree."""
    first, second = build(), build()
    path = tf.train.Checkpoint(model=first).write(str(directory / "ckpt"))
    tf.train.Checkpoint(model=second).read(path).assert_consumed()
    assert_outputs_close(second(inputs, training=False), first(inputs, training=False), atol=0)


def assert_dropout_only_in_training(model: keras.Model, inputs: Any) -> None:
    """Inference is deterministic and differs from a training-mode call (dropout on)."""
    a, b = model(inputs, training=False), model(inputs, training=False)
    assert_outputs_close(a, b, atol=0)
    c = model(inputs, training=True)
    diffs = [
        np.abs(np.asarray(x) - np.asarray(y)).max()
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(c), strict=True)
    ]
    assert max(diffs) > 1e-4, "training=True changed nothing: dropout is not applied"


@contextlib.contextmanager
def mixed_precision(policy: str) -> Iterator[None]:
    """Sets the global tf_keras dtype policy for the block, then restores float32."""
    keras.mixed_precision.set_global_policy(policy)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


def assert_mixed_precision_close(
    build: Callable[[], keras.Model], inputs: Any, policy: str, rtol: float
) -> dict[str, Any]:
    """A model built under `policy` with float32 weights copied in returns float32 outputs that
    agree with float32 within `rtol` of each output's max magnitude; returns the outputs."""
    reference = build()
    expected = reference(inputs, training=False)
    with mixed_precision(policy):
        model = build()
    model.set_weights(reference.get_weights())
    actual = model(inputs, training=False)
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected), strict=True):
        assert a.dtype == tf.float32, f"output dtype {a.dtype} under {policy}"
        scale = float(np.abs(np.asarray(e)).max())
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=rtol * scale)
    return actual


def fixture_reference(fixture: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """`(inputs, expected)` of a fixture's reference_outputs.npz: the three encoder inputs, and
    every output the original code computed from them."""
    data = dict(np.load(fixture / "reference_outputs.npz"))
    inputs = {k: data.pop(k) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    return inputs, data


# bfloat16 tolerance against the original's float32 outputs (the one `--dtype auto` accepts):
# every output within 2.5% of its largest magnitude (max abs error), 0.5% on average; measured
# ~1.4% and ~0.15% on both fixtures.
BF16_MAX_REL = 0.025
BF16_MEAN_REL = 0.005


def assert_bfloat16_close(actual: Any, expected: Any) -> None:
    """A float32 output computed in bfloat16 is within the bfloat16 tolerance of `expected`."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == np.float32
    scale = np.abs(expected).max()
    error = np.abs(actual - expected)
    assert error.max() <= BF16_MAX_REL * scale, (error.max(), scale)
    assert error.mean() <= BF16_MEAN_REL * scale, (error.mean(), scale)


# === Exported TF-Hub bundles (tests/export/test_export.py, test_hub.py, test_tflite.py) ===


def export_groups_fixture(directory: Path, fixtures_dir: Path) -> dict[str, Any]:
    """Converts `albert_tf1_groups` into `directory/checkpoint`, exports it with TFLite at the
    fixture's sequence length into `directory/hub`; returns paths, the restored source model
    and the fixture's reference outputs."""
    from albert_tf.checkpoint import load_checkpoint_dir
    from albert_tf.convert.tf1 import convert_tf1_checkpoint
    from albert_tf.export.bundle import export_bundle

    source = fixtures_dir / "albert_tf1_groups"
    reference = dict(np.load(source / "reference_outputs.npz"))
    checkpoint = convert_tf1_checkpoint(
        source / "model.ckpt", source / "albert_config.json", directory / "checkpoint"
    )
    seq_length = reference["input_word_ids"].shape[1]
    bundle = export_bundle(checkpoint, directory / "hub", seq_length=seq_length, tflite=True)
    return dict(
        checkpoint=checkpoint,
        bundle=bundle,
        source=load_checkpoint_dir(checkpoint),
        reference=reference,
    )


def sp_vocab_config() -> AlbertConfig:
    """A random-weight model for the fixture SentencePiece model (vocab 1000), with dropout,
    large enough that its weights, not its graph, dominate a TFLite file."""
    return tiny_config(
        vocab_size=1000,
        embedding_size=128,
        hidden_size=256,
        num_hidden_layers=2,
        num_hidden_groups=1,
        inner_group_num=1,
        intermediate_size=1024,
        max_position_embeddings=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )


def export_sp_fixture(directory: Path, fixtures_dir: Path, seq_length: int = 32) -> dict:
    """Saves a `sp_vocab_config()` checkpoint with the fixture `spm.model`, exports encoder,
    preprocess and TFLite from it into `directory/hub`, then deletes the checkpoint directory
    (the export's only sources), so every later load proves the assets are packaged."""
    import shutil

    from albert_tf.checkpoint import save_checkpoint_dir
    from albert_tf.encoder import AlbertEncoder
    from albert_tf.export.bundle import export_bundle
    from albert_tf.heads import MaskedLMHead

    config = sp_vocab_config()
    keras.utils.set_random_seed(1)
    encoder = AlbertEncoder(config)
    mlm_head = MaskedLMHead(config, encoder.get_embedding_table())
    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    checkpoint = save_checkpoint_dir(
        directory / "checkpoint", config, encoder, mlm_head, sp_model=sp_model
    )
    bundle = export_bundle(checkpoint, directory / "hub", seq_length=seq_length, tflite=True)
    shutil.rmtree(checkpoint)
    return dict(
        checkpoint=checkpoint,
        bundle=bundle,
        config=config,
        encoder=encoder,
        sp_model_bytes=sp_model.read_bytes(),
        seq_length=seq_length,
    )


@contextlib.contextmanager
def counting_sp_model_loads() -> Iterator[list[str]]:
    """Inside the block, every SentencePiece model a `SentencePieceProcessor` loads (from a file
    or from bytes) is appended to the yielded list, except those keras-hub's own tokenizer loads
    (the preset's re-normalized model, which is keras-hub's to read)."""
    import traceback

    import sentencepiece as spm

    loads: list[str] = []
    from_file = spm.SentencePieceProcessor.LoadFromFile
    from_bytes = spm.SentencePieceProcessor.LoadFromSerializedProto

    def ours() -> bool:
        return not any("/keras_hub/" in frame.filename for frame in traceback.extract_stack())

    def load_file(self, filename):
        if ours():
            loads.append(str(filename))
        return from_file(self, filename)

    def load_bytes(self, serialized):
        if ours():
            loads.append("<bytes>")
        return from_bytes(self, serialized)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spm.SentencePieceProcessor, "LoadFromFile", load_file)
        patch.setattr(spm.SentencePieceProcessor, "LoadFromSerializedProto", load_bytes)
        yield loads


def export_sp_onnx_fixture(directory: Path, fixtures_dir: Path, seq_length: int = 128) -> dict:
    """A tiny vocab-1000 checkpoint with the fixture `spm.model`, exported as
    `export --onnx --tflite --hf --keras-hub` does (encoder, preprocess, TFLite, ONNX with the
    raw-string encoders, the transformers folder and the keras-hub preset) into
    `directory/hub`; `sp_model_loads` lists the SentencePiece loads the export made."""
    from albert_tf.checkpoint import save_checkpoint_dir
    from albert_tf.encoder import AlbertEncoder
    from albert_tf.export.bundle import export_bundle

    config = tiny_config(vocab_size=1000, max_position_embeddings=seq_length)
    keras.utils.set_random_seed(1)
    checkpoint = save_checkpoint_dir(
        directory / "checkpoint",
        config,
        AlbertEncoder(config),
        sp_model=fixtures_dir / "tokenizer" / "spm.model",
    )
    with counting_sp_model_loads() as loads:
        bundle = export_bundle(
            checkpoint,
            directory / "hub",
            seq_length=seq_length,
            tflite=True,
            onnx=True,
            hf=True,
            keras_hub=True,
        )
    return dict(
        checkpoint=checkpoint,
        bundle=bundle,
        config=config,
        seq_length=seq_length,
        sp_model_loads=loads,
    )


def one_error_line(stderr: str, command: str) -> str:
    """The CLI's error contract: `stderr` holds exactly one non-blank line, no traceback, and
    it starts `albert-tf COMMAND: error: `; returns that line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "{{function_node" not in stderr, stderr
    assert lines[0].startswith(f"albert-tf {command}: error: "), lines[0]
    return lines[0]


# === Pretraining data (create-pretraining-data output) ===

WORD_LIST = (
    "time person year way day thing man world life hand part child eye woman place work week "
    "case point government company number group problem fact river mountain city garden window "
    "letter music paper story money light water heart night friend table animal country morning "
    "question reason voice house school family road answer power"
)


def word_corpus(num_docs: int = 6) -> str:
    """`num_docs` small documents of English words (blank lines between them), built by
    arithmetic: no RNG, no stdlib text, the same bytes on any platform."""
    words_of = WORD_LIST.split()
    docs = []
    for d in range(num_docs):
        sentences = []
        for s in range(3 + d % 4):
            n = 4 + (d * 5 + s * 3) % 9
            words = [words_of[(d * 7 + s * 13 + w * 31) % len(words_of)] for w in range(n)]
            sentences.append(" ".join(words).capitalize() + ".")
        half = len(sentences) // 2
        docs.append(" ".join(sentences[:half]) + "\n" + " ".join(sentences[half:]))
    return "\n\n".join(docs) + "\n"


def read_pretraining_records(output_dir: Path) -> dict[str, np.ndarray]:
    """All records of a create-pretraining-data output dir (shards in name order), parsed with
    the features its metadata.json lists, as arrays [N, length]."""
    import json

    meta = json.loads((output_dir / "metadata.json").read_text())
    spec = {
        name: tf.io.FixedLenFeature([length], tf.float32 if kind == "float" else tf.int64)
        for name, (kind, length) in meta["features"].items()
    }
    files = sorted(str(p) for p in output_dir.glob("*.tfrecord"))
    dataset = tf.data.TFRecordDataset(files).batch(100_000)
    batches = [tf.io.parse_example(b, spec) for b in dataset]
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in spec}


# === Files the commands read ===

TINY_FINETUNE_CONFIG = {
    "vocab_size": 1000,
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_hidden_groups": 1,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "inner_group_num": 1,
    "hidden_act": "gelu",
    "max_position_embeddings": 64,
}


def write_pretraining_records(
    path,
    count,
    seq_length=16,
    predictions=4,
    vocab_size=50,
    seed=0,
    drop=(),
    metadata=True,
    unmasked=False,
    sentence_task=None,
):
    """Writes `count` random but well-formed pretraining Examples (the original's features).

    `drop` names features to leave out. With `metadata`, writes metadata.json beside the file
    (max_seq_length, max_predictions_per_seq, vocab_size, num_instances). `unmasked` writes
    `--no-mask` records (token_boundary instead of the masked_lm features). `sentence_task`,
    when given, is recorded in the metadata.
    `--no-mask` records (token_boundary instead of the masked_lm features).
    """
    rng = np.random.default_rng(seed)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            length = int(rng.integers(seq_length // 2, seq_length + 1))
            mask = (np.arange(seq_length) < length).astype(np.int64)
            n = int(rng.integers(1, predictions + 1))
            positions = np.zeros(predictions, np.int64)
            positions[:n] = np.sort(rng.choice(np.arange(1, length), n, replace=False))
            lm_ids = np.zeros(predictions, np.int64)
            lm_ids[:n] = rng.integers(5, vocab_size, n)
            weights = (np.arange(predictions) < n).astype(np.float32)
            features = {
                "input_ids": ints(rng.integers(5, vocab_size, seq_length) * mask),
                "input_mask": ints(mask),
                "segment_ids": ints((np.arange(seq_length) >= length // 2) * mask),
                "masked_lm_positions": ints(positions),
                "masked_lm_ids": ints(lm_ids),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=weights.tolist())
                ),
                "next_sentence_labels": ints([rng.integers(0, 2)]),
            }
            if unmasked:
                for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
                    del features[name]
                features["token_boundary"] = ints(rng.integers(0, 2, seq_length) * mask)
            for name in drop:
                del features[name]
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
    if metadata:
        (path.parent / "metadata.json").write_text(
            json.dumps(
                dict(
                    max_seq_length=seq_length,
                    max_predictions_per_seq=predictions,
                    vocab_size=vocab_size,
                    num_instances=count,
                    masked=not unmasked,
                    special_ids=dict(pad=0, unk=1, cls=2, sep=3, mask=4),
                    settings=dict(masked_lm_prob=0.15, ngram=3),
                    **({"sentence_task": sentence_task} if sentence_task else {}),
                )
            )
        )
    return path


def write_config(directory, **overrides):
    """directory/albert_config.json: TINY_FINETUNE_CONFIG with `overrides`."""
    path = directory / "albert_config.json"
    path.write_text(json.dumps({**TINY_FINETUNE_CONFIG, **overrides}))
    return path


def finetune_files(
    root,
    task,
    *,
    init="random",
    train_file="train.tsv",
    eval_file="dev.tsv",
    output="model",
    **settings,
):
    """Fine-tunes `init` for `task` on root/train_file (evaluating on root/eval_file unless None)
    into root/output, quietly; `settings` are other `FinetuneSettings` fields. From "random",
    TINY_FINETUNE_CONFIG and the fixture tokenizer by default."""
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.trainer import finetune
    from tests.conftest import FIXTURES

    settings.setdefault("restarts", 0)  # one run: the toy sets here need not beat their floor
    if init == "random":
        settings.setdefault("sp_model", str(FIXTURES / "tokenizer" / "spm.model"))
        if "config" not in settings:
            settings["config"] = str(write_config(root))
    return finetune(
        FinetuneSettings(
            train=str(root / train_file),
            output=str(root / output),
            init=str(init),
            task=task,
            eval=str(root / eval_file) if eval_file else None,
            **settings,
        ),
        log=lambda line: None,
    )


def write_pairs(path, rows, seed):
    """A GLUE-style sentence-pair TSV of `rows` yes/no examples."""
    rng = random.Random(seed)
    good, bad = ["good", "great", "fine"], ["bad", "awful", "poor"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("index\tsentence1\tsentence2\tlabel\n")
        for i in range(rows):
            label = rng.choice(["yes", "no"])
            word = rng.choice(good if label == "yes" else bad)
            long_tail = " and then some more words" * rng.randint(0, 2)
            f.write(f"{i}\tThe film was {word}{long_tail}.\tIs it worth it?\t{label}\n")


# === Damaged files ===


def overwrite_mid_file(path: Path, at: float = 0.5) -> None:
    """8 bytes overwritten at fraction `at` of the file, as a bad disk or copy does."""
    with open(path, "r+b") as f:
        f.seek(int(Path(path).stat().st_size * at))
        f.write(b"\xde\xad\xbe\xef\x01\x02\x03\x04")


def truncate(path: Path) -> None:
    """Keeps the first third of the file, as an interrupted copy does."""
    path = Path(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


# === ONNX ===

# ONNX Runtime and its extensions alone, as any user of the files would run them.
_EMPTY_BATCH = """
import json, sys
import numpy as np
import onnxruntime, onnxruntime_extensions
options = onnxruntime.SessionOptions()
options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
outputs = {}
for path in sys.argv[1:]:
    sess = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    # Strings [0] for a raw-string model; ids [0, 8] for an encoder.
    feed = {
        i.name: np.array([], dtype=object) if i.type == "tensor(string)"
        else np.zeros((0, 8), dtype=np.int32)
        for i in sess.get_inputs()
    }
    names = [o.name for o in sess.get_outputs()]
    got = zip(names, sess.run(names, feed), strict=True)
    outputs[path] = {name: [list(v.shape), v.dtype.name] for name, v in got}
print(json.dumps(outputs))
"""


def _graphs(graph):
    """An ONNX `graph` and every subgraph in it (If branches), recursively."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)


def all_nodes(graph):
    """Every node of an ONNX `graph`, those of its subgraphs (If branches) included."""
    return [node for g in _graphs(graph) for node in g.node]


def all_initializers(graph):
    """Every initializer of an ONNX `graph`, those of its subgraphs included."""
    return [tensor for g in _graphs(graph) for tensor in g.initializer]


def all_value_infos(graph):
    """Every declared intermediate value of an ONNX `graph`, those of its subgraphs included."""
    return [value for g in _graphs(graph) for value in g.value_info]


def empty_batch_outputs(paths) -> dict[str, dict[str, list]]:
    """Each ONNX model at `paths` run on an empty batch (every string input of shape [0], every
    id input int32 [0, 8]) in a child process, so that a crash fails the test instead of
    killing pytest: path -> output name -> [shape, numpy dtype name]."""
    result = subprocess.run(
        [sys.executable, "-c", _EMPTY_BATCH, *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=300,
    )
    assert result.returncode == 0, f"exit code {result.returncode}: {result.stderr[-3000:]}"
    return json.loads(result.stdout.splitlines()[-1])
