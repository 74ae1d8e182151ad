"""Pretraining input pipeline, losses, optimizer settings and dtype resolution."""

from __future__ import annotations

import json

import numpy as np
import pytest

from albert_tf.dtypes import cpu_supports_bfloat16, policy_name, resolve_dtype
from albert_tf.errors import ConfigError, DataError
from albert_tf.optimizer import build_optimizer
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.losses import metrics_from_sums, pretraining_sums, replica_loss
from tests import helpers

TINY = helpers.tiny_pretraining_config(vocab_size=50)


@pytest.fixture
def shards(tmp_path):
    helpers.write_pretraining_records(tmp_path / "a.tfrecord", 24, seed=1)
    helpers.write_pretraining_records(tmp_path / "b.tfrecord", 24, seed=2)
    return str(tmp_path / "*.tfrecord")


def _numpy(batches):
    return [{k: v.numpy() for k, v in b.items()} for b in batches]


# === Validation ===


def test_inspect_data_reads_shapes_and_metadata(shards):
    spec = data_lib.inspect_data(shards, TINY)
    assert [p.rsplit("/", 1)[1] for p in spec.files] == ["a.tfrecord", "b.tfrecord"]
    assert (spec.max_seq_length, spec.max_predictions_per_seq) == (16, 4)
    assert spec.num_instances == 24


@pytest.mark.parametrize(
    "case, message",
    [
        ("no_match", "no files match"),
        ("missing_feature", "missing feature(s) masked_lm_weights"),
        ("metadata_seq", "metadata says max_seq_length=32 but the records have 16"),
        ("shards_disagree", "shards disagree"),
        ("vocab", "vocabulary of 99 but the config has vocab_size 50"),
        ("too_long", "only 32 position embeddings"),
        ("garbage", "not a readable TFRecord"),
        ("metadata_not_json", "metadata.json is not readable JSON"),
    ],
)
def test_inspect_data_rejects_bad_input(tmp_path, case, message):
    path = tmp_path / "a.tfrecord"
    if case == "missing_feature":
        helpers.write_pretraining_records(path, 3, drop=("masked_lm_weights",))
    elif case == "metadata_seq":
        helpers.write_pretraining_records(path, 3)
        (tmp_path / "metadata.json").write_text(json.dumps({"max_seq_length": 32}))
    elif case == "shards_disagree":
        helpers.write_pretraining_records(path, 3)
        helpers.write_pretraining_records(tmp_path / "b.tfrecord", 3, predictions=5, metadata=False)
    elif case == "vocab":
        helpers.write_pretraining_records(path, 3, vocab_size=99)
    elif case == "too_long":
        helpers.write_pretraining_records(path, 3, seq_length=64)
    elif case == "garbage":
        path.write_bytes(b"not a tfrecord at all, definitely" * 3)
    elif case == "metadata_not_json":
        helpers.write_pretraining_records(path, 3)
        (tmp_path / "metadata.json").write_text("{truncated")
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        data_lib.inspect_data(str(tmp_path / "*.tfrecord"), TINY)


def test_metadata_is_found_by_name_not_by_content(tmp_path):
    """Only `metadata.json` is the data's metadata; another JSON beside the shards is not."""
    path = tmp_path / "a.tfrecord"
    helpers.write_pretraining_records(path, 3, metadata=False)
    (tmp_path / "eval.json").write_text(json.dumps({"max_seq_length": 32, "vocab_size": 99}))
    assert data_lib.find_metadata([str(path)]) is None
    assert data_lib.inspect_data(str(path), TINY).max_seq_length == 16
    (tmp_path / "metadata.json").write_text(json.dumps({"max_seq_length": 16, "vocab_size": 50}))
    assert data_lib.find_metadata([str(path)]) == {"max_seq_length": 16, "vocab_size": 50}


# === Pipeline ===


def test_train_stream_is_deterministic_and_resumes_by_skipping(shards):
    spec = data_lib.inspect_data(shards, TINY)
    first = _numpy(data_lib.train_dataset(spec, 8, seed=7).take(8))
    again = _numpy(data_lib.train_dataset(spec, 8, seed=7).take(8))
    resumed = _numpy(data_lib.train_dataset(spec, 8, seed=7, skip_steps=2).take(3))
    other = _numpy(data_lib.train_dataset(spec, 8, seed=8).take(1))
    assert first[0]["input_word_ids"].shape == (8, 16)
    assert first[0]["masked_lm_weights"].dtype == np.float32
    assert first[0]["sentence_order_label"].shape == (8,)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a["input_word_ids"], b["input_word_ids"])
    for a, b in zip(first[2:5], resumed, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(first[0]["input_word_ids"], other[0]["input_word_ids"])
    # 48 records, 6 batches of 8 per epoch: each epoch is a permutation, reshuffled.
    epochs = [[tuple(r) for b in first[i : i + 6] for r in b["input_word_ids"]] for i in (0, 6)]
    assert len(set(epochs[0])) == 48
    assert epochs[1][:16] != epochs[0][:16]


@pytest.mark.parametrize("pipelines", [1, 2])
def test_replica_batches_reassemble_the_global_batch(shards, pipelines):
    spec = data_lib.inspect_data(shards, TINY)
    single = _numpy(data_lib.train_dataset(spec, 8, seed=3).take(3))
    streams = [
        _numpy(
            data_lib.train_dataset(
                spec, 8, seed=3, num_replicas=2, num_pipelines=pipelines, pipeline_id=i
            ).take(6 // pipelines)
        )
        for i in range(pipelines)
    ]
    # Per-replica batches in replica order: all of pipeline 0's replicas, then pipeline 1's.
    per_step = 2 // pipelines
    for step, expected in enumerate(single):
        parts = [s[step * per_step + r] for s in streams for r in range(per_step)]
        for key in expected:
            np.testing.assert_array_equal(np.concatenate([p[key] for p in parts]), expected[key])


def test_eval_dataset_pads_the_last_batch_with_zero_weight(tmp_path):
    helpers.write_pretraining_records(tmp_path / "e.tfrecord", 20, seed=4)
    spec = data_lib.inspect_data(str(tmp_path / "e.tfrecord"), TINY)
    batches = _numpy(data_lib.eval_dataset(spec, 8))
    assert [b["example_weight"].sum() for b in batches] == [8, 8, 4]
    assert batches[-1]["masked_lm_weights"][4:].sum() == 0
    halves = _numpy(data_lib.eval_dataset(spec, 8, num_replicas=2))
    assert len(halves) == 6 and all(b["input_word_ids"].shape == (4, 16) for b in halves)
    assert sum(b["example_weight"].sum() for b in halves) == 20
    assert len(_numpy(data_lib.eval_dataset(spec, 8, max_examples=16))) == 2


@pytest.mark.slow
def test_unmasked_shards_are_masked_in_the_pipeline_reproducibly(tmp_path):
    helpers.write_pretraining_records(tmp_path / "u.tfrecord", 24, seed=5, unmasked=True)
    spec = data_lib.inspect_data(str(tmp_path / "u.tfrecord"), TINY)
    assert spec.dynamic_masking["mask_id"] == 4 and spec.max_predictions_per_seq == 4
    first = _numpy(data_lib.train_dataset(spec, 8, seed=1).take(4))
    resumed = _numpy(data_lib.train_dataset(spec, 8, seed=1, skip_steps=1).take(3))
    for a, b in zip(first[1:], resumed, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    for batch in first:
        assert batch["masked_lm_positions"].shape == (8, 4)
        assert (batch["masked_lm_weights"].sum(axis=1) >= 1).all()
        lengths = batch["input_mask"].sum(axis=1)
        assert (batch["masked_lm_positions"].max(axis=1) < lengths).all()
    evals = [_numpy(data_lib.eval_dataset(spec, 8)) for _ in range(2)]
    for a, b in zip(*evals, strict=True):  # the same masks at every evaluation
        np.testing.assert_array_equal(a["masked_lm_positions"], b["masked_lm_positions"])


# === Losses ===


def test_losses_match_the_original_and_add_up_across_replicas():
    rng = np.random.default_rng(0)
    batch = {
        "masked_lm_ids": rng.integers(0, 11, (6, 3)).astype(np.int32),
        "masked_lm_weights": (rng.random((6, 3)) > 0.3).astype(np.float32),
        "sentence_order_label": rng.integers(0, 2, 6).astype(np.int32),
        "example_weight": np.ones(6, np.float32),
    }
    mlm_logits = rng.normal(size=(6, 3, 11)).astype(np.float32)
    sop_logits = rng.normal(size=(6, 2)).astype(np.float32)

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    w = batch["masked_lm_weights"]
    mlm_ce = -np.take_along_axis(log_softmax(mlm_logits), batch["masked_lm_ids"][..., None], -1)
    sop_ce = -np.take_along_axis(
        log_softmax(sop_logits), batch["sentence_order_label"][:, None], -1
    )
    expected_mlm = (w * mlm_ce[..., 0]).sum() / (w.sum() + 1e-5)
    expected_sop = sop_ce.mean()

    whole = pretraining_sums(mlm_logits, sop_logits, batch)
    single = replica_loss(whole, whole["mlm_weight_sum"], whole["example_count"])
    np.testing.assert_allclose(single["mlm_loss"], expected_mlm, rtol=1e-6)
    np.testing.assert_allclose(single["sentence_loss"], expected_sop, rtol=1e-6)
    np.testing.assert_allclose(single["loss"], expected_mlm + expected_sop, rtol=1e-6)

    parts = [slice(0, 2), slice(2, 6)]  # uneven split: global denominators still make it exact
    shares = []
    for part in parts:
        sub = {k: v[part] for k, v in batch.items()}
        sums = pretraining_sums(mlm_logits[part], sop_logits[part], sub)
        shares.append(replica_loss(sums, whole["mlm_weight_sum"], whole["example_count"]))
    for key in ("mlm_loss", "sentence_loss", "loss"):
        np.testing.assert_allclose(sum(float(s[key]) for s in shares), single[key], rtol=1e-6)

    metrics = metrics_from_sums({k: float(v) for k, v in whole.items()})
    hits = (mlm_logits.argmax(-1) == batch["masked_lm_ids"]) * w
    np.testing.assert_allclose(metrics["mlm_accuracy"], hits.sum() / w.sum(), rtol=1e-6)
    sop_hits = sop_logits.argmax(-1) == batch["sentence_order_label"]
    np.testing.assert_allclose(metrics["sop_accuracy"], sop_hits.mean(), rtol=1e-6)


# === Optimizer and dtypes ===


def test_optimizer_is_lamb_with_warmup_and_linear_decay():
    optimizer = build_optimizer(0.001, train_steps=100, warmup_steps=10)
    assert type(optimizer).__name__ == "LAMB"
    assert optimizer.global_clipnorm == 1.0
    assert optimizer.exclude_from_weight_decay == ["LayerNorm", "layer_norm", "bias"]
    assert float(optimizer._get_hyper("weight_decay_rate")) == pytest.approx(0.01)
    schedule = optimizer.learning_rate
    rates = [float(schedule(s)) for s in (0, 5, 10, 50, 100)]
    # tf-models-official warms up linearly to the decayed rate at the end of warmup (0.0009),
    # so the schedule is continuous; the original ramped to the peak rate and then jumped.
    np.testing.assert_allclose(rates, [0.0, 0.00045, 0.0009, 0.0005, 0.0], atol=1e-9)
    scaled = build_optimizer(0.001, 100, 0, dtype="float16")
    assert type(scaled.inner_optimizer).__name__ == "LAMB"
    with pytest.raises(ConfigError):
        build_optimizer(0.001, train_steps=10, warmup_steps=11)


def test_resolve_dtype(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx512f avx512_bf16\n")
    assert cpu_supports_bfloat16(cpuinfo)
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2\n")
    assert not cpu_supports_bfloat16(cpuinfo)
    assert resolve_dtype("float16") == "float16"
    assert resolve_dtype("auto", "TPU") == "bfloat16"
    expected = "bfloat16" if cpu_supports_bfloat16() else "float32"
    assert resolve_dtype("auto", "CPU") == expected
    assert policy_name("bfloat16") == "mixed_bfloat16"
    with pytest.raises(ConfigError):
        resolve_dtype("int8")
