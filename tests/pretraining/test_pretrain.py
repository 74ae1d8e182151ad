"""`pretrain`: the run directory, resume, continued pretraining, and bad input (CLI exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.cli import main as cli_main
from albert_tf.config import AlbertConfig
from albert_tf.errors import OutputError
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import pretrain
from albert_tf.run_record import hardware
from tests import helpers

# Vocabulary 1000 so the tokenizer fixture's spm.model fits.
CONFIG = helpers.tiny_pretraining_config(vocab_size=1000)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain_data")
    (root / "train").mkdir()
    (root / "eval").mkdir()
    helpers.write_pretraining_records(root / "train" / "a.tfrecord", 40, vocab_size=1000, seed=1)
    helpers.write_pretraining_records(root / "eval" / "e.tfrecord", 12, vocab_size=1000, seed=2)
    config = root / "albert_config.json"
    CONFIG.to_json_file(config)
    return {
        "train": str(root / "train" / "*.tfrecord"),
        "eval": str(root / "eval"),
        "config": config,
    }


def _run(corpus, output, **kwargs):
    settings = dict(
        train_steps=4,
        batch_size=4,
        save_every=2,
        keep=2,
        eval_every=100,
        log_every=1,
        dtype="float32",
        eval=corpus["eval"],
        progress=False,
    )
    settings.update(kwargs)
    return pretrain(PretrainSettings(corpus["train"], CONFIG, str(output), **settings))


@pytest.fixture(scope="module")
def first_run(corpus, tmp_path_factory, fixtures_dir):
    output = tmp_path_factory.mktemp("runs") / "run"
    result = _run(corpus, output, sp_model=str(fixtures_dir / "tokenizer" / "spm.model"))
    return output, result


def test_run_directory_is_a_checkpoint_dir_with_logs(first_run, fixtures_dir):
    output, result = first_run
    assert result.step == 4 and not result.stopped_early and result.dtype == "float32"
    assert AlbertConfig.from_json_file(output / "albert_config.json") == CONFIG
    assert (output / "spm.model").read_bytes() == (
        fixtures_dir / "tokenizer" / "spm.model"
    ).read_bytes()
    assert json.loads((output / "pretrain_run.json").read_text())["batch_size"] == 4
    prefix = tf.train.latest_checkpoint(str(output))
    assert prefix.endswith("ckpt-4")
    assert sorted(p.name for p in output.glob("ckpt-*.index")) == ["ckpt-2.index", "ckpt-4.index"]
    roots = {name.split("/")[0] for name, _ in tf.train.list_variables(prefix)}
    assert {"encoder", "mlm", "sop", "optimizer", "step"} <= roots
    assert tf.train.load_checkpoint(prefix).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 4
    assert list((output / "logs" / "train").glob("events.out.tfevents.*"))
    assert list((output / "logs" / "eval").glob("events.out.tfevents.*"))

    assert [h["step"] for h in result.train_history] == [1, 2, 3, 4]
    first = result.train_history[0]
    assert set(first) >= {"loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy"}
    assert first["loss"] == pytest.approx(first["mlm_loss"] + first["sop_loss"])
    # A random 1000-way MLM and 2-way SOP start near log(1000) and log(2).
    assert first["mlm_loss"] == pytest.approx(np.log(1000), abs=0.5)
    assert first["sop_loss"] == pytest.approx(np.log(2), abs=0.2)
    assert first["learning_rate"] == pytest.approx(0.00176)
    assert result.train_history[-1]["learning_rate"] == pytest.approx(0.00176 / 4)
    assert [e["step"] for e in result.eval_history] == [0, 4]
    assert all(0.0 <= e["sop_accuracy"] <= 1.0 for e in result.eval_history)
    # What ran: one process, 4 steps in float32, on this machine, no setting changed.
    ran = json.loads((output / "run_log.json").read_text())
    assert result.ran["steps"] == result.ran["steps_taken"] == 4
    assert result.ran["dtype"] == [{"from_step": 0, "to_step": 4, "dtype": "float32"}]
    assert result.ran["hardware"] == [hardware()] and hardware()["cpu"]
    assert result.ran["settings_changes"] == [] and ran["settings_changes"] == []
    assert [s["ended"] for s in ran["segments"]] == ["finished"]


def test_checkpoint_loads_with_the_core_reader(first_run):
    from albert_tf.checkpoint import load_checkpoint_dir

    output, _ = first_run
    loaded = load_checkpoint_dir(output)
    assert loaded.config == CONFIG and loaded.mlm_head is not None and loaded.sop_head is not None
    prefix = tf.train.latest_checkpoint(str(output))
    reader = tf.train.load_checkpoint(prefix)
    table = loaded.encoder.get_embedding_table().numpy()
    # The table is shared by the encoder and the MLM head; it is stored once, under either.
    names = [n for n, shape in tf.train.list_variables(prefix) if tuple(shape) == table.shape]
    assert any(np.array_equal(reader.get_tensor(n), table) for n in names if "optimizer" not in n)


@pytest.mark.slow
def test_same_run_resumes_and_another_run_is_refused(corpus, tmp_path):
    output = tmp_path / "run"
    _run(corpus, output, train_steps=2, eval=None)
    # A run directory written before the settings took the flags' names resumes too.
    record = json.loads((output / "pretrain_run.json").read_text())
    record["eval_data"], record["init_checkpoint"] = record.pop("eval"), record.pop("init")
    (output / "pretrain_run.json").write_text(json.dumps(record))
    resumed = _run(corpus, output, train_steps=3, eval=None, dtype="bfloat16")
    assert resumed.step == 3 and [h["step"] for h in resumed.train_history] == [3]
    # The run's record says what changed at the resume, and which steps ran in which dtype
    # (the hand-edited pretrain_run.json renamed keys; the run log compares what ran).
    assert resumed.ran["settings_changes"] == [
        {"step": 2, "key": "dtype", "old": "float32", "new": "bfloat16"},
        {"step": 2, "key": "train_steps", "old": 2, "new": 3},
    ]
    assert resumed.ran["dtype"] == [
        {"from_step": 0, "to_step": 2, "dtype": "float32"},
        {"from_step": 2, "to_step": 3, "dtype": "bfloat16"},
    ]
    assert resumed.ran["steps"] == resumed.ran["steps_taken"] == 3
    with pytest.raises(OutputError, match="holds another run"):
        pretrain(
            PretrainSettings(
                corpus["train"],
                CONFIG.replace(num_hidden_layers=3),
                str(output),
                train_steps=1,
                batch_size=4,
            )
        )
    with pytest.raises(OutputError, match="batch_size=4"):
        _run(corpus, output, batch_size=2)


def test_settings_take_the_flags_names_and_each_default_once(corpus):
    from albert_tf.cli import build_parser
    from albert_tf.pretraining.settings import cli_defaults

    settings = PretrainSettings(corpus["train"], CONFIG, "o", 1, 4, eval="h", init="c")
    assert settings.record()["eval"] == "h" and settings.record()["init"] == "c"
    # Each default is written once, in the settings; the flags read it from there.
    args = build_parser().parse_args(
        ["pretrain", "--data", "d", "--output", "o", "--train-steps", "1", "--batch-size", "4"]
    )
    assert cli_defaults()["learning_rate"] == 0.00176 and cli_defaults()["keep"] == 3
    assert {k: getattr(args, k) for k in cli_defaults()} == cli_defaults()


@pytest.mark.slow
def test_init_checkpoint_starts_from_its_weights(corpus, first_run, tmp_path):
    source, source_result = first_run
    result = _run(corpus, tmp_path / "continued", init=str(source), train_steps=1)
    start = result.eval_history[0]
    assert start["step"] == 0
    for key in ("loss", "mlm_accuracy", "sop_accuracy"):
        assert start[key] == pytest.approx(source_result.eval_history[-1][key], abs=1e-6)
    assert (tmp_path / "continued" / "spm.model").exists()  # taken from the init checkpoint


@pytest.mark.slow
def test_float16_with_loss_scaling_and_a_time_limit(corpus, tmp_path):
    output = tmp_path / "fp16"
    result = _run(corpus, output, dtype="float16", train_steps=50, minutes=1e-6, steps_per_loop=1)
    assert result.dtype == "float16"
    assert result.stopped_early and result.step == 1  # out of time after the first step
    assert [s["ended"] for s in result.ran["segments"]] == ["time"]
    assert result.ran["dtype"] == [{"from_step": 0, "to_step": 1, "dtype": "float16"}]
    assert np.isfinite(result.train_history[-1]["loss"])
    assert tf.train.latest_checkpoint(str(output)).endswith("ckpt-1")
    assert [e["step"] for e in result.eval_history] == [0, 1]
    roots = {n.split("/")[0] for n, _ in tf.train.list_variables(str(output / "ckpt-1"))}
    assert "optimizer" in roots


# === Bad input: one line on stderr, exit 2, nothing written ===


def _bad_input_case(case, corpus, tmp_path, fixtures_dir):
    args = ["--data", corpus["train"], "--config", str(corpus["config"])]
    args += ["--train-steps", "1", "--batch-size", "2", "--dtype", "float32", "--quiet"]
    if case == "no_files":
        args[1] = str(tmp_path / "nothing-*.tfrecord")
    elif case == "missing_feature":
        helpers.write_pretraining_records(
            tmp_path / "x.tfrecord", 2, vocab_size=1000, drop=("input_mask",)
        )
        args[1] = str(tmp_path / "x.tfrecord")
    elif case == "seq_length":
        helpers.write_pretraining_records(tmp_path / "x.tfrecord", 2, vocab_size=1000)
        (tmp_path / "metadata.json").write_text(json.dumps({"max_seq_length": 24}))
        args[1] = str(tmp_path / "x.tfrecord")
    elif case == "sp_vocab":
        args[3] = "tiny"  # vocab 8000, but the data and spm.model have 1000
        args[1] = corpus["train"].replace("*.tfrecord", "a.tfrecord")
        helpers.write_pretraining_records(tmp_path / "x.tfrecord", 2, vocab_size=8000)
        args[1] = str(tmp_path / "x.tfrecord")
        args += ["--sp-model", str(fixtures_dir / "tokenizer" / "spm.model")]
    elif case == "init_checkpoint":
        other = tmp_path / "other"
        other.mkdir()
        CONFIG.replace(hidden_size=32).to_json_file(other / "albert_config.json")
        args += ["--init", str(other)]
    return args


@pytest.mark.parametrize(
    "case, message",
    [
        ("no_files", "no files match"),
        ("missing_feature", "missing feature(s) input_mask"),
        ("seq_length", "metadata says max_seq_length=24 but the records have 16"),
        ("sp_vocab", "has 1000 pieces but the config has vocab_size 8000"),
        ("init_checkpoint", "different model config (hidden_size: 32 != 16)"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    case, message, corpus, tmp_path, fixtures_dir, capsys
):
    args = _bad_input_case(case, corpus, tmp_path, fixtures_dir)
    output = tmp_path / "out"
    assert cli_main(["pretrain", *args, "--output", str(output)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("albert-tf pretrain: error:") and "\n" not in err
    assert message in err, err
    assert not output.exists()


def test_output_holding_another_run_exits_2(first_run, corpus, tmp_path, capsys):
    output, _ = first_run
    before = sorted(p.name for p in output.iterdir())
    other = tmp_path / "other_config.json"
    CONFIG.replace(num_hidden_layers=3).to_json_file(other)
    args = ["pretrain", "--data", corpus["train"], "--config", str(other), "--output", str(output)]
    assert cli_main([*args, "--train-steps", "1", "--batch-size", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds another run (different config)" in err and "\n" not in err
    assert sorted(p.name for p in output.iterdir()) == before
