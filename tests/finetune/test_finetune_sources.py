"""Fine-tuning from an original TF1 checkpoint and from a TF-Hub encoder directory."""

from __future__ import annotations

import csv
import json
import os
import random
import textwrap

import numpy as np
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.convert.tf1 import load_tf1_checkpoint
from albert_tf.encoder import AlbertEncoder
from albert_tf.export.encoder import save_encoder
from albert_tf.finetune.inference import batched_outputs
from albert_tf.finetune.predict import load_finetuned, predict_file
from albert_tf.preprocess.spm_train import train_sentencepiece
from tests.helpers import TINY_FINETUNE_CONFIG, finetune_files, write_pairs

ONE_EPOCH = dict(epochs=1, batch_size=8, learning_rate=1e-3, dtype="float32", seed=2)


@pytest.fixture(scope="module")
def sp_model_97(tmp_path_factory):
    """A SentencePiece model with the TF1 fixture's 97 ids (trained on stdlib docstrings)."""
    root = tmp_path_factory.mktemp("sp97")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(m.__doc__ for m in (csv, json, os, random, textwrap)))
    return train_sentencepiece([str(corpus)], 97, root / "sp97")


@pytest.mark.slow
def test_from_tf1_checkpoint(tmp_path, fixtures_dir, sp_model_97):
    tf1 = fixtures_dir / "albert_tf1_tiny"
    write_pairs(tmp_path / "train.tsv", 16, seed=0)
    result = finetune_files(
        tmp_path,
        "classify",
        max_seq_length=24,
        **ONE_EPOCH,
        init=str(tf1 / "model.ckpt"),
        eval_file="train.tsv",
        config=str(tf1 / "albert_config.json"),
        sp_model=str(sp_model_97),
        export_serving=False,
    )
    assert result.record.encoder == "tf1"
    # the encoder started from the TF1 weights: fine-tuning moved them only a little
    original = load_tf1_checkpoint(
        tf1 / "model.ckpt", AlbertConfig.from_json_file(tf1 / "albert_config.json")
    )
    before = original.encoder.get_embedding_table().numpy()
    after = result.model.encoder.get_embedding_table().numpy()
    assert 0 < np.abs(after - before).max() < 0.05
    reloaded = load_finetuned(tmp_path / "model")
    np.testing.assert_allclose(reloaded.model.encoder.get_embedding_table().numpy(), after)


def test_tokenizer_larger_than_model_vocab_is_rejected(tmp_path, fixtures_dir):
    from albert_tf.errors import ConfigError

    tf1 = fixtures_dir / "albert_tf1_tiny"
    write_pairs(tmp_path / "train.tsv", 4, seed=0)
    with pytest.raises(ConfigError, match="has 1000 pieces but the encoder's vocabulary has 97"):
        finetune_files(
            tmp_path,
            "classify",
            max_seq_length=24,
            **ONE_EPOCH,
            init=str(tf1),
            eval_file=None,
            sp_model=str(fixtures_dir / "tokenizer" / "spm.model"),
        )
    assert not (tmp_path / "model").exists()


@pytest.mark.slow
def test_from_tfhub_encoder_directory(tmp_path, fixtures_dir):
    encoder = AlbertEncoder(AlbertConfig.from_dict({**TINY_FINETUNE_CONFIG}))
    hub_dir = tmp_path / "hub"
    save_encoder(hub_dir, encoder, sp_model=fixtures_dir / "tokenizer" / "spm.model")
    write_pairs(tmp_path / "train.tsv", 16, seed=0)
    write_pairs(tmp_path / "dev.tsv", 6, seed=1)
    result = finetune_files(
        tmp_path,
        "classify",
        max_seq_length=24,
        **ONE_EPOCH,
        init=str(hub_dir),
        export_serving=False,
    )
    assert result.record.encoder == "hub"
    # gradients reached the hub encoder's weights through hub.KerasLayer(trainable=True)
    (tuned,) = [v for v in result.model.encoder.trainable_variables if "word_embeddings" in v.name]
    assert np.abs(tuned.numpy() - encoder.get_embedding_table().numpy()).max() > 0
    dev = result.task.load(str(tmp_path / "dev.tsv"), result.tokenizer)
    expected = result.task.decode(batched_outputs(result.model, dev.inputs, 64), dev)
    records, _, _ = predict_file(load_finetuned(tmp_path / "model"), str(tmp_path / "dev.tsv"))
    np.testing.assert_allclose(
        [list(r["probabilities"].values()) for r in records],
        [list(r["probabilities"].values()) for r in expected],
        atol=1e-5,
    )


@pytest.mark.slow
def test_from_our_checkpoint_dir_via_cli(tmp_path, fixtures_dir):
    from albert_tf import cli
    from albert_tf.checkpoint import save_checkpoint_dir

    encoder = AlbertEncoder(AlbertConfig.from_dict({**TINY_FINETUNE_CONFIG}))
    spm = fixtures_dir / "tokenizer" / "spm.model"
    save_checkpoint_dir(tmp_path / "pretrained", encoder.config, encoder, sp_model=spm)
    write_pairs(tmp_path / "train.tsv", 8, seed=0)
    argv = [
        "finetune",
        "--task",
        "classify",
        "--train",
        tmp_path / "train.tsv",
        "--init",
        tmp_path / "pretrained",
        "--output",
        tmp_path / "model",
        "--epochs",
        1,
        "--batch-size",
        8,
        "--max-seq-length",
        24,
        "--dtype",
        "float32",
        "--no-serving",
    ]
    assert cli.main(list(map(str, argv))) == 0
    meta = json.loads((tmp_path / "model" / "finetune.json").read_text())
    assert meta["encoder"] == "checkpoint" and meta["labels"] == ["no", "yes"]
    assert not (tmp_path / "model" / "serving").exists()
    # the fine-tuned model starts from the checkpoint's weights (one AdamW step at most 1e-3 away)
    tuned = load_finetuned(tmp_path / "model").model.encoder.get_embedding_table().numpy()
    assert np.abs(tuned - encoder.get_embedding_table().numpy()).max() < 0.01


def _pooler(variables):
    """{"kernel"|"bias": value} of the pooler among `variables`."""
    found = {len(v.shape): v.numpy() for v in variables if "pooler" in v.name}
    return {"kernel": found[2], "bias": found[1]}


@pytest.mark.parametrize("kind", ["checkpoint", pytest.param("hub", marks=pytest.mark.slow)])
def test_reinit_pooler_gives_fresh_weights_and_keeps_the_rest(tmp_path, fixtures_dir, kind):
    from albert_tf.checkpoint import save_checkpoint_dir

    encoder = AlbertEncoder(AlbertConfig.from_dict({**TINY_FINETUNE_CONFIG}))
    encoder.pooler.kernel.assign(np.full(encoder.pooler.kernel.shape, 0.5, np.float32))
    encoder.pooler.bias.assign(np.full(encoder.pooler.bias.shape, 0.25, np.float32))
    spm = fixtures_dir / "tokenizer" / "spm.model"
    if kind == "hub":
        save_encoder(tmp_path / "init", encoder, sp_model=spm)
    else:
        save_checkpoint_dir(tmp_path / "init", encoder.config, encoder, sp_model=spm)
    write_pairs(tmp_path / "train.tsv", 8, seed=0)
    runs = {}
    for reinit in (False, True):
        runs[reinit] = finetune_files(
            tmp_path,
            "classify",
            **{**ONE_EPOCH, "epochs": 1},
            train_steps=0,  # evaluates the start: the weights are those training would begin from
            max_seq_length=24,
            init=str(tmp_path / "init"),
            eval_file=None,
            output=f"model-{reinit}",
            reinit_pooler=reinit,
            export_serving=False,
        )
        assert runs[reinit].record.settings.reinit_pooler is reinit
    kept = _pooler(runs[False].model.encoder.variables)
    np.testing.assert_array_equal(kept["kernel"], 0.5)
    np.testing.assert_array_equal(kept["bias"], 0.25)
    fresh = _pooler(runs[True].model.encoder.variables)
    np.testing.assert_array_equal(fresh["bias"], 0.0)
    # a truncated normal of the config's initializer_range (0.02): within 2 sd, sd near 0.02
    assert np.abs(fresh["kernel"]).max() <= 2 * 0.02 + 1e-6
    assert 0.012 < fresh["kernel"].std() < 0.02
    # nothing else moved
    others = [
        [v.numpy() for v in run.model.encoder.variables if "pooler" not in v.name]
        for run in runs.values()
    ]
    assert len(others[0]) == len(others[1]) > 0
    for before, after in zip(*others, strict=True):
        np.testing.assert_array_equal(before, after)
