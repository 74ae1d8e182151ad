"""pretrain on NSP and single-segment data, and `evaluate` (the trainer's evaluation, standalone)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.cli import main as cli_main
from albert_tf.errors import CheckpointError, DataError
from albert_tf.preprocess.pretraining_data import create_pretraining_data
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.evaluate import evaluate
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import pretrain
from tests import helpers

CONFIG = helpers.tiny_pretraining_config(vocab_size=1000)  # the fixture spm.model's vocabulary
BATCH = 8
SENTENCE_KEYS = ("sop_loss", "sop_accuracy", "nsp_loss", "nsp_accuracy")


@pytest.fixture(scope="module")
def data(tmp_path_factory, fixtures_dir):
    """Train shards for each task, held-out shards for sop and nsp: {"sop": glob, ...}."""
    root = tmp_path_factory.mktemp("task_data")
    corpus = root / "corpus.txt"
    corpus.write_text(helpers.word_corpus(40))
    spm = str(fixtures_dir / "tokenizer" / "spm.model")
    paths = {}
    for name, task, seed, dupe in [
        ("sop", "sop", 1, 2),
        ("nsp", "nsp", 1, 2),
        ("none", "none", 1, 2),
        ("sop_eval", "sop", 2, 1),
        ("nsp_eval", "nsp", 2, 1),
    ]:
        create_pretraining_data(
            str(corpus), spm, root / name, max_seq_length=32, max_predictions_per_seq=5,
            dupe_factor=dupe, seed=seed, sentence_task=task, progress=False,
        )  # fmt: skip
        paths[name] = str(root / name / "*.tfrecord")
    return paths


def _pretrain(data, output, train, eval_data, **kwargs):
    settings = dict(
        train_steps=2,
        batch_size=BATCH,
        save_every=1,
        keep=3,
        eval_every=100,
        log_every=1,
        dtype="float32",
        eval=data[eval_data],
        progress=False,
    )
    settings.update(kwargs)
    return pretrain(PretrainSettings(data[train], CONFIG, str(output), **settings))


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    """Two-step runs: (output dir, PretrainResult, eval data name) per training task."""
    root = tmp_path_factory.mktemp("task_runs")
    results = {}
    for train, eval_data in (("sop", "sop_eval"), ("nsp", "nsp_eval"), ("none", "sop_eval")):
        output = root / train
        results[train] = (output, _pretrain(data, output, train, eval_data), eval_data)
    return results


@pytest.mark.parametrize("task", [None, "nsp", "mlm"])
def test_the_sentence_task_comes_from_the_metadata(tmp_path, task):
    path = helpers.write_pretraining_records(
        tmp_path / "a.tfrecord", 2, vocab_size=1000, sentence_task=task
    )
    if task == "mlm":
        with pytest.raises(DataError, match="sentence_task 'mlm'; expected one of sop, nsp"):
            data_lib.inspect_data(str(path), CONFIG)
    else:
        assert data_lib.inspect_data(str(path), CONFIG).sentence_task == (task or "sop")


def _summary_tags(directory) -> set[str]:
    tags = set()
    for path in directory.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(value.tag for value in event.summary.value)
    return tags


@pytest.mark.slow
def test_nsp_data_trains_and_reports_nsp_metrics(runs):
    output, result, _ = runs["nsp"]
    assert result.sentence_task == "nsp" and result.step == 2
    assert json.loads((output / "pretrain_run.json").read_text())["sentence_task"] == "nsp"
    for history in (result.train_history, result.eval_history):
        for metrics in history:
            assert {"nsp_loss", "nsp_accuracy"} <= set(metrics)
            assert not {"sop_loss", "sop_accuracy"} & set(metrics)
            assert metrics["loss"] == pytest.approx(metrics["mlm_loss"] + metrics["nsp_loss"])
    # A random 2-way head starts near log(2).
    assert result.train_history[0]["nsp_loss"] == pytest.approx(np.log(2), abs=0.2)
    assert {"nsp_loss", "nsp_accuracy", "mlm_loss"} <= _summary_tags(output / "logs" / "train")
    assert not {"sop_loss", "sop_accuracy"} & _summary_tags(output / "logs" / "eval")


@pytest.mark.slow
def test_none_data_trains_the_mlm_loss_alone(runs):
    output, result, _ = runs["none"]
    assert result.sentence_task == "none"
    assert json.loads((output / "pretrain_run.json").read_text())["sentence_task"] == "none"
    for metrics in result.train_history:
        assert metrics["loss"] == metrics["mlm_loss"]
        assert not set(SENTENCE_KEYS) & set(metrics)
    assert not set(SENTENCE_KEYS) & _summary_tags(output / "logs" / "train")
    # The held-out data is SOP data: named by its own task, its loss includes the SOP term.
    final = result.eval_history[-1]
    assert final["loss"] == pytest.approx(final["mlm_loss"] + final["sop_loss"])
    # The sentence head and the pooler (which feeds only it) are not trained: same weights at
    # steps 1 and 2, no optimizer slots.
    step1, step2 = (tf.train.load_checkpoint(str(output / f"ckpt-{n}")) for n in (1, 2))
    names = step2.get_variable_to_shape_map()
    untrained = [n for n in names if n.startswith("sop/") or "pooler" in n]
    weights = [n for n in untrained if "OPTIMIZER_SLOT" not in n]
    assert len(weights) == 4 and len(untrained) == 4  # kernel and bias of each, no slots
    for name in weights:
        np.testing.assert_array_equal(step1.get_tensor(name), step2.get_tensor(name))
    encoder = [n for n in names if n.startswith("encoder/") and "OPTIMIZER_SLOT" not in n]
    assert any(
        not np.array_equal(step1.get_tensor(n), step2.get_tensor(n))
        for n in encoder
        if step1.get_tensor(n).dtype == np.float32
    )


# === evaluate ===


@pytest.mark.slow
@pytest.mark.parametrize("train", ["sop", "nsp", "none"])
def test_evaluate_equals_the_trainers_final_evaluation(runs, data, train):
    output, result, eval_data = runs[train]
    final = result.eval_history[-1]
    metrics = evaluate(output, data[eval_data], batch_size=BATCH)
    task = eval_data.split("_")[0]
    assert metrics["sentence_task"] == task and metrics["step"] == 2
    assert metrics["checkpoint"] == str(output / "ckpt-2")
    assert metrics["num_examples"] == data_lib.inspect_data(data[eval_data], CONFIG).num_instances
    reported = {k for k in metrics if k.endswith(("_loss", "_accuracy")) or k == "loss"}
    assert reported == set(final) - {"step"}
    assert {f"{task}_loss", f"{task}_accuracy"} <= reported
    for key in reported:
        assert metrics[key] == pytest.approx(final[key], abs=1e-6), key


@pytest.mark.slow
def test_evaluate_names_metrics_by_the_datas_task(runs, data):
    output = runs["sop"][0]
    on_nsp = evaluate(output, data["nsp_eval"], batch_size=BATCH, max_examples=10)
    assert on_nsp["sentence_task"] == "nsp" and on_nsp["num_examples"] == 10
    assert on_nsp["loss"] == pytest.approx(on_nsp["mlm_loss"] + on_nsp["nsp_loss"])
    on_none = evaluate(output / "ckpt-1", data["none"], batch_size=BATCH, max_examples=12)
    assert on_none["sentence_task"] == "none" and on_none["step"] == 1
    assert on_none["loss"] == on_none["mlm_loss"] and not set(SENTENCE_KEYS) & set(on_none)


def test_evaluate_a_converted_original_checkpoint(tmp_path, fixtures_dir):
    """`convert` keeps the original's MLM and SOP heads; evaluate's numbers equal the metrics
    computed here from the converted model's logits."""
    from albert_tf.checkpoint import load_checkpoint_dir
    from albert_tf.convert.tf1 import convert_tf1_checkpoint

    source = fixtures_dir / "albert_tf1_groups"
    converted = convert_tf1_checkpoint(
        source / "model.ckpt", source / "albert_config.json", tmp_path / "converted"
    )
    shards = tmp_path / "data" / "a.tfrecord"
    shards.parent.mkdir()
    helpers.write_pretraining_records(shards, 20, vocab_size=97, seed=5, sentence_task="sop")
    metrics = evaluate(converted, str(shards), batch_size=BATCH)
    assert metrics["step"] is None and metrics["num_examples"] == 20

    loaded = load_checkpoint_dir(converted)
    spec = data_lib.inspect_data(str(shards), loaded.config)
    batch = next(iter(data_lib.eval_dataset(spec, 20)))
    outputs = loaded.encoder(
        {k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    )
    mlm = loaded.mlm_head(outputs["sequence_output"], batch["masked_lm_positions"]).numpy()
    sop = loaded.sop_head(outputs["pooled_output"]).numpy()
    weights, ids = batch["masked_lm_weights"].numpy(), batch["masked_lm_ids"].numpy()
    labels = batch["sentence_order_label"].numpy()
    log_mlm = mlm - np.log(np.exp(mlm).sum(-1, keepdims=True))
    mlm_ce = -np.take_along_axis(log_mlm, ids[..., None], -1)[..., 0]
    log_sop = sop - np.log(np.exp(sop).sum(-1, keepdims=True))
    expected = {
        "mlm_loss": (weights * mlm_ce).sum() / (weights.sum() + 1e-5),
        "mlm_accuracy": (weights * (mlm.argmax(-1) == ids)).sum() / weights.sum(),
        "sop_loss": -np.take_along_axis(log_sop, labels[:, None], -1).mean(),
        "sop_accuracy": (sop.argmax(-1) == labels).mean(),
    }
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, abs=1e-5), key


@pytest.mark.slow
def test_evaluate_cli_prints_one_line_and_writes_json_once(runs, data, tmp_path, capsys):
    output, result, _ = runs["nsp"]
    target = tmp_path / "eval.json"
    args = ["evaluate", "--checkpoint", str(output), "--eval", data["nsp_eval"]]
    args += ["--batch-size", str(BATCH), "--json", str(target), "--quiet"]
    assert cli_main(args) == 0
    (line,) = capsys.readouterr().out.splitlines()
    printed = json.loads(line)
    assert json.loads(target.read_text()) == printed
    assert printed["nsp_accuracy"] == pytest.approx(result.eval_history[-1]["nsp_accuracy"])
    target.write_text("keep")
    assert cli_main(args) == 2
    assert "already exists" in helpers.one_error_line(capsys.readouterr().err, "evaluate")
    assert target.read_text() == "keep"
    assert cli_main([*args, "--overwrite"]) == 0
    assert json.loads(target.read_text())["step"] == 2


def _bad_case(case, runs, data, tmp_path):
    """(checkpoint, data) for a bad-input case."""
    import shutil

    output = runs["sop"][0]
    if case == "missing_dir":
        return tmp_path / "nowhere", data["sop_eval"]
    if case == "no_config":
        (tmp_path / "empty").mkdir()
        return tmp_path / "empty", data["sop_eval"]
    if case == "no_checkpoint":
        (tmp_path / "bare").mkdir()
        CONFIG.to_json_file(tmp_path / "bare" / "albert_config.json")
        return tmp_path / "bare", data["sop_eval"]
    if case == "empty_glob":
        return output, str(tmp_path / "nothing-*.tfrecord")
    copy = tmp_path / "copy"
    shutil.copytree(output, copy)
    if case == "vocab":
        CONFIG.replace(vocab_size=500).to_json_file(copy / "albert_config.json")
    elif case == "seq_length":
        CONFIG.replace(max_position_embeddings=16).to_json_file(copy / "albert_config.json")
    elif case == "shapes":
        CONFIG.replace(hidden_size=32).to_json_file(copy / "albert_config.json")
    return copy, data["sop_eval"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, error, message",
    [
        ("missing_dir", CheckpointError, "does not exist"),
        ("no_config", CheckpointError, "no albert_config.json"),
        ("no_checkpoint", CheckpointError, "no TF2 checkpoint found"),
        ("empty_glob", DataError, "no files match"),
        ("vocab", DataError, "vocabulary of 1000 but the config has vocab_size 500"),
        ("seq_length", DataError, "max_seq_length 32 but the config has only 16 position"),
        ("shapes", CheckpointError, "does not match its albert_config.json"),
    ],
)
def test_evaluate_bad_input_exits_2_with_one_line_and_writes_nothing(
    runs, data, tmp_path, capsys, case, error, message
):
    checkpoint, glob = _bad_case(case, runs, data, tmp_path)
    with pytest.raises(error, match=message):
        evaluate(checkpoint, glob, batch_size=BATCH)
    target = tmp_path / "out" / "eval.json"
    args = ["evaluate", "--checkpoint", str(checkpoint), "--eval", glob, "--json", str(target)]
    assert cli_main([*args, "--quiet"]) == 2
    captured = capsys.readouterr()
    assert message in helpers.one_error_line(captured.err, "evaluate") and not captured.out
    assert not target.exists()
