"""The shipped pretrained model, `albert_en_mini`: loadable by name wherever a checkpoint is read,
exactly the stored float16 weights, and `--init random --config albert_en_mini` of its shape."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.cli import main as cli_main
from albert_tf.config import CONFIG_FILE, SHIPPED_DIR, AlbertConfig, resolve_config
from albert_tf.errors import CheckpointError
from albert_tf.pretrained import WEIGHTS_FILE, checkpoint_dir, load_pretrained, model_dir, resolve
from albert_tf.weights import variables_by_name
from tests import helpers

NAME = "albert_en_mini"


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained(NAME)


def test_the_float32_model_holds_the_stored_float16_values_exactly(shipped):
    stored = load_file(str(SHIPPED_DIR / NAME / WEIGHTS_FILE))
    variables = variables_by_name(shipped)
    assert set(stored) == set(variables) and len(stored) > 20
    for name, array in stored.items():
        assert array.dtype == np.float16, name
        value = variables[name].numpy()
        assert value.dtype == np.float32 and np.array_equal(value, array.astype(np.float32)), name
    assert shipped.mlm_head is not None and shipped.sop_head is not None


def test_write_shipped_gives_back_the_shipped_files_readable_by_all(shipped, tmp_path):
    import os
    import stat

    from albert_tf.pretrained import write_shipped

    folder = write_shipped(shipped, tmp_path / "copy")
    for name in (WEIGHTS_FILE, "spm.model", "spm.vocab"):
        assert (folder / name).read_bytes() == (SHIPPED_DIR / NAME / name).read_bytes(), name
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.iterdir():  # safetensors' own save_file would leave the weights 0600
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path.name


def test_the_name_resolves_to_one_cached_checkpoint_directory(shipped):
    directory = checkpoint_dir(NAME)
    assert checkpoint_dir(NAME) == directory and resolve(NAME) == str(directory)
    assert resolve("some/dir") == "some/dir"
    loaded = load_checkpoint_dir(directory)
    assert loaded.config == shipped.config == resolve_config(NAME)
    ours, theirs = variables_by_name(loaded), variables_by_name(shipped)
    for name, variable in theirs.items():
        np.testing.assert_array_equal(ours[name].numpy(), variable.numpy(), err_msg=name)
    assert (directory / "spm.model").read_bytes() == (model_dir(NAME) / "spm.model").read_bytes()


def test_an_unknown_name_is_one_clear_error():
    with pytest.raises(CheckpointError, match="not a shipped model"):
        model_dir("albert_en_huge")


def _reviews(root):
    words = {"1": "good great fine lovely", "0": "bad awful dull poor"}
    rows = ["sentence\tlabel"]
    for i in range(24):
        label = str(i % 2)
        rows.append(f"a {words[label].split()[i % 4]} film number {i}\t{label}")
    (root / "train.tsv").write_text("\n".join(rows) + "\n")
    (root / "dev.tsv").write_text("\n".join(rows[:9]) + "\n")


@pytest.mark.slow
def test_finetune_from_the_name_and_from_random_of_the_same_shape(tmp_path, capsys):
    _reviews(tmp_path)
    common = ["finetune", "--task", "classify", "--train", str(tmp_path / "train.tsv")]
    common += ["--eval", str(tmp_path / "dev.tsv"), "--max-seq-length", "16", "--epochs", "1"]
    common += ["--batch-size", "8", "--no-serving"]
    assert cli_main([*common, "--init", NAME, "--output", str(tmp_path / "mini")]) == 0
    # The name brings the shipped vocabulary: no --sp-model (the model card's command as written).
    random_args = ["--init", "random", "--config", NAME, "--output", str(tmp_path / "random")]
    assert cli_main([*common, *random_args]) == 0
    capsys.readouterr()
    for run in ("mini", "random"):
        config = AlbertConfig.from_json_file(tmp_path / run / CONFIG_FILE)
        assert config == resolve_config(NAME), run
        assert (tmp_path / run / "spm.model").read_bytes() == (
            model_dir(NAME) / "spm.model"
        ).read_bytes()


@pytest.mark.slow
def test_pretrain_continues_from_the_name_with_its_config(tmp_path, capsys):
    config = resolve_config(NAME)
    records = tmp_path / "train.tfrecord"
    helpers.write_pretraining_records(records, 8, vocab_size=config.vocab_size, seed=3)
    args = ["pretrain", "--data", str(records), "--train-steps", "2", "--batch-size", "4"]
    args += ["--save-every", "2", "--quiet"]
    assert cli_main([*args, "--init", NAME, "--output", str(tmp_path / "run")]) == 0
    assert AlbertConfig.from_json_file(tmp_path / "run" / CONFIG_FILE) == config
    assert (tmp_path / "run" / "spm.model").read_bytes() == (
        model_dir(NAME) / "spm.model"
    ).read_bytes()
    capsys.readouterr()
    assert cli_main([*args, "--output", str(tmp_path / "other")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--config" in error and "--init" in error
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("command", ["finetune", "pretrain", "evaluate", "export"])
def test_a_misspelt_name_names_the_nearest_shipped_one(command, tmp_path, capsys):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t0\n")
    records = tmp_path / "data.tfrecord"
    helpers.write_pretraining_records(records, 4, vocab_size=100, seed=1)
    out = str(tmp_path / "out")
    argv = {
        "finetune": ["--task", "classify", "--train", str(tmp_path / "train.tsv")],
        "pretrain": ["--data", str(records), "--train-steps", "1", "--batch-size", "4"],
        "evaluate": ["--eval", str(records)],
        "export": ["--output", out],
    }[command]
    flag = "--init" if command in ("finetune", "pretrain") else "--checkpoint"
    if command in ("finetune", "pretrain"):
        argv += ["--output", out]
    assert cli_main([command, *argv, flag, "albert_en_mni", "--quiet"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and error.endswith("; did you mean albert_en_mini?"), error
    assert error.startswith(f"albert-tf {command}: error: ") and "albert_en_mni" in error
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_evaluate_and_export_take_the_name(tmp_path, capsys):
    config = resolve_config(NAME)
    helpers.write_pretraining_records(
        tmp_path / "heldout.tfrecord", 8, vocab_size=config.vocab_size, seed=5
    )
    report = tmp_path / "eval.json"
    args = ["evaluate", "--checkpoint", NAME, "--eval", str(tmp_path / "heldout.tfrecord")]
    assert cli_main([*args, "--json", str(report)]) == 0
    assert json.loads(report.read_text())["num_examples"] == 8
    assert cli_main(["export", "--checkpoint", NAME, "--output", str(tmp_path / "hub")]) == 0
    capsys.readouterr()
    assert (tmp_path / "hub" / "encoder" / "saved_model.pb").is_file()
    assert (tmp_path / "hub" / "preprocess" / "saved_model.pb").is_file()


@pytest.mark.slow
def test_exported_to_transformers_it_computes_what_ours_does(shipped, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    assert (
        cli_main(["export", "--checkpoint", NAME, "--output", str(tmp_path / "out"), "--hf"]) == 0
    )
    capsys.readouterr()
    model = transformers.AlbertModel.from_pretrained(str(tmp_path / "out" / "hf")).eval()
    tokenizer = transformers.AlbertTokenizer.from_pretrained(str(tmp_path / "out" / "hf"))
    batch = tokenizer(["The film was a quiet delight."], return_tensors="pt")
    with torch.no_grad():
        theirs = model(**batch)
    inputs = {
        "input_word_ids": batch["input_ids"].numpy().astype(np.int32),
        "input_mask": batch["attention_mask"].numpy().astype(np.int32),
        "input_type_ids": batch["token_type_ids"].numpy().astype(np.int32),
    }
    ours = shipped.encoder(inputs, training=False)
    np.testing.assert_allclose(
        ours["sequence_output"].numpy(), theirs.last_hidden_state.numpy(), atol=1e-4
    )
    np.testing.assert_allclose(
        ours["pooled_output"].numpy(), theirs.pooler_output.numpy(), atol=1e-4
    )


def test_the_model_card_is_generated_from_the_committed_results():
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("model_card", REPO / "docs/scripts/model_card.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = (model_dir(NAME) / "MODEL_CARD.md").read_text()
    assert committed == script.render(), "stale card: run python docs/scripts/model_card.py"
    assert "albert_en_mini" in committed and "| shipped float16 weights |" in committed
    # The docs page holds the card's text itself (it reads as a page in the repository too).
    page = script.PAGE.read_text()
    assert page == script.page(committed, page), "stale page: run python docs/scripts/model_card.py"
    assert committed.rstrip() in page and "--8<--" not in page
