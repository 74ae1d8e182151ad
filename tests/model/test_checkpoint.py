"""Our checkpoint directory: save/load round trip, optional parts, failures."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from albert_tf.checkpoint import load_checkpoint_dir, save_checkpoint_dir
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import CheckpointError, OutputError
from albert_tf.models import AlbertPretrainingModel
from tests import helpers


def test_round_trip_with_heads_and_sp_model(tmp_path, fixtures_dir):
    config = helpers.tiny_config()
    model = AlbertPretrainingModel(config)
    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    out = tmp_path / "ckpt"
    save_checkpoint_dir(out, config, model.encoder, model.mlm_head, model.sop_head, sp_model)
    assert {"albert_config.json", "checkpoint", "spm.model"} <= {p.name for p in out.iterdir()}
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-1")
    loaded = load_checkpoint_dir(out)
    assert loaded.config == config
    assert loaded.sp_model_path == out / "spm.model"
    inputs = helpers.make_inputs(config, positions=2)
    expected = model(inputs, training=False)
    got = loaded.encoder(inputs, training=False)
    helpers.assert_outputs_close(got, {k: expected[k] for k in got}, atol=0)
    mlm = loaded.mlm_head(got["sequence_output"], inputs["masked_lm_positions"])
    helpers.assert_outputs_close(mlm, expected["mlm_logits"], atol=0)
    helpers.assert_outputs_close(
        loaded.sop_head(got["pooled_output"]), expected["sop_logits"], atol=0
    )
    assert loaded.mlm_head.embedding_table is loaded.encoder.get_embedding_table()


def test_encoder_only_and_failures(tmp_path):
    config = helpers.tiny_config()
    out = tmp_path / "ckpt"
    save_checkpoint_dir(out, config, AlbertEncoder(config))
    loaded = load_checkpoint_dir(out)
    assert loaded.mlm_head is None and loaded.sop_head is None and loaded.sp_model_path is None
    with pytest.raises(OutputError, match="already exists"):
        save_checkpoint_dir(out, config, AlbertEncoder(config))
    with pytest.raises(CheckpointError, match="does not exist"):
        save_checkpoint_dir(tmp_path / "x", config, AlbertEncoder(config), sp_model=tmp_path / "no")
    assert not (tmp_path / "x").exists()
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint_dir(tmp_path / "missing")
    values = json.loads((out / "albert_config.json").read_text())
    (out / "albert_config.json").write_text(json.dumps(values | {"intermediate_size": 48}))
    with pytest.raises(CheckpointError, match="does not match"):
        load_checkpoint_dir(out)
