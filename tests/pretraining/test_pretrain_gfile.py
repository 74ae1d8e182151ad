"""`pretrain` with every path a tf.io.gfile URL: TF's built-in ram:// filesystem stands in for
gs:// (both go through tf.io.gfile; ram:// needs no network or credentials)."""

from __future__ import annotations

import json
import uuid

import pytest
import tensorflow as tf

from albert_tf.cli import main as cli_main
from albert_tf.errors import OutputError
from albert_tf.io_utils import join
from albert_tf.pretraining.run_dir import prepare_output, read_config
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import pretrain
from tests import helpers

gfile = tf.io.gfile
# Vocabulary 1000 so the tokenizer fixture's spm.model fits.
CONFIG = helpers.tiny_pretraining_config(vocab_size=1000)
SETTINGS = dict(
    batch_size=4,
    seed=1,
    learning_rate=1e-3,
    warmup_steps=0,
    max_seq_length=16,
    max_predictions_per_seq=4,
)


@pytest.fixture(scope="module")
def ram(tmp_path_factory, fixtures_dir):
    """Shards, metadata, config and spm.model copied to a fresh ram:// root; removed after.

    Each test uses its own directory names: ram:// says a path exists (and is a directory) when
    it is merely a prefix of another file's name, so siblings must not share prefixes.
    """
    local = tmp_path_factory.mktemp("ram_corpus")
    (local / "train").mkdir()
    (local / "eval").mkdir()
    helpers.write_pretraining_records(local / "train" / "a.tfrecord", 24, vocab_size=1000, seed=1)
    helpers.write_pretraining_records(local / "eval" / "e.tfrecord", 8, vocab_size=1000, seed=2)
    CONFIG.to_json_file(local / "albert_config.json")
    root = f"ram://pretrain-{uuid.uuid4().hex}"
    copies = {
        local / "train" / "a.tfrecord": "data/train/a.tfrecord",
        local / "train" / "metadata.json": "data/train/metadata.json",
        local / "eval" / "e.tfrecord": "data/eval/e.tfrecord",
        local / "eval" / "metadata.json": "data/eval/metadata.json",
        local / "albert_config.json": "config/albert_config.json",
        fixtures_dir / "tokenizer" / "spm.model": "tokenizer/spm.model",
        fixtures_dir / "tokenizer" / "spm.vocab": "tokenizer/spm.vocab",
    }
    for source, name in copies.items():
        gfile.makedirs(join(root, name.rsplit("/", 1)[0]))
        gfile.copy(str(source), join(root, name))
    yield {
        "root": root,
        "train": join(root, "data/train/*.tfrecord"),
        "eval": join(root, "data/eval"),  # a directory: its *.tfrecord files
        "config": join(root, "config/albert_config.json"),
        "sp_model": join(root, "tokenizer/spm.model"),
    }
    gfile.rmtree(root)


def _run(ram, output, **kwargs):
    settings = dict(
        train_steps=2,
        batch_size=4,
        save_every=2,
        keep=2,
        eval_every=100,
        log_every=1,
        dtype="float32",
        progress=False,
    )
    settings.update(kwargs)
    return pretrain(PretrainSettings(ram["train"], ram["config"], output, **settings))


@pytest.mark.slow
def test_pretrain_writes_and_resumes_a_ram_run(ram, fixtures_dir):
    output = join(ram["root"], "run")
    result = _run(ram, output, eval=ram["eval"], sp_model=ram["sp_model"])
    assert result.step == 2 and result.output_dir == output
    assert [e["step"] for e in result.eval_history] == [0, 2]
    assert read_config(join(output, "albert_config.json")) == CONFIG
    assert json.loads(gfile.GFile(join(output, "pretrain_run.json")).read())["batch_size"] == 4
    spm = gfile.GFile(join(output, "spm.model"), "rb").read()
    assert spm == (fixtures_dir / "tokenizer" / "spm.model").read_bytes()
    assert gfile.exists(join(output, "spm.vocab"))
    assert tf.train.latest_checkpoint(output) == join(output, "ckpt-2")
    assert gfile.exists(join(output, "ckpt-2.index"))
    assert gfile.glob(join(output, "logs", "train", "events.out.tfevents.*"))
    assert gfile.glob(join(output, "logs", "eval", "events.out.tfevents.*"))
    assert not [n for n in gfile.listdir(output) if ".tmp-" in n]

    resumed = _run(ram, output, train_steps=3, save_every=100)
    assert resumed.step == 3 and [h["step"] for h in resumed.train_history] == [3]
    assert tf.train.latest_checkpoint(output) == join(output, "ckpt-3")
    # The run log lives beside the checkpoints at the URL too, and saw the resume's new steps.
    ran = json.loads(gfile.GFile(join(output, "run_log.json")).read())
    assert [(s["from_step"], s["to_step"]) for s in ran["segments"]] == [(0, 2), (2, 3)]
    assert {"step": 2, "key": "train_steps", "old": 2, "new": 3} in ran["settings_changes"]
    reader = tf.compat.v1.train.NewCheckpointReader(join(output, "ckpt-3"))
    assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 3
    assert gfile.exists(join(output, "albert_config.json"))

    # A ram:// run is also an init checkpoint; its spm.model comes along to the new run.
    continued = _run(ram, join(ram["root"], "continued"), init=output, train_steps=1)
    assert continued.step == 1
    assert gfile.GFile(join(ram["root"], "continued", "spm.model"), "rb").read() == spm


def test_existing_ram_output_without_overwrite_is_an_output_error(ram, capsys):
    stray = join(ram["root"], "stray")
    gfile.makedirs(stray)
    with gfile.GFile(join(stray, "notes.txt"), "w") as f:
        f.write("not a run")
    with pytest.raises(OutputError, match="exists and is not a pretraining run"):
        _run(ram, stray)
    args = ["pretrain", "--data", ram["train"], "--config", ram["config"], "--output", stray]
    assert cli_main([*args, "--train-steps", "1", "--batch-size", "4", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("albert-tf pretrain: error:") and "\n" not in err
    assert "is not a pretraining run" in err
    assert gfile.listdir(stray) == ["notes.txt"]  # nothing written

    other = join(ram["root"], "other")
    assert not prepare_output(other, CONFIG, SETTINGS, None, overwrite=False)
    assert prepare_output(other, CONFIG, SETTINGS, None, overwrite=False)  # resumable
    with pytest.raises(OutputError, match="holds another run"):
        prepare_output(other, CONFIG.replace(num_hidden_layers=3), SETTINGS, None, False)
    with pytest.raises(OutputError, match="holds a run with batch_size=4 "):
        prepare_output(other, CONFIG, SETTINGS | {"batch_size": 8}, None, False)

    # --overwrite replaces the directory's contents with a fresh run header.
    assert not prepare_output(stray, CONFIG, SETTINGS, ram["sp_model"], overwrite=True)
    names = sorted(gfile.listdir(stray))
    assert names == ["albert_config.json", "pretrain_run.json", "spm.model", "spm.vocab"]
