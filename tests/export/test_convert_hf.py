"""Hugging Face conversion: random HF models saved as safetensors, converted, compared (1e-4).

Needs the optional `hf` extra (transformers + CPU torch); skipped without it.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from safetensors import safe_open

from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.cli import main
from albert_tf.convert.hf import HF_CONFIG_KEYS
from tests import helpers

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# helpers.tiny_config's sizes (2 groups x 2 inner groups, E != H), with dropout, as HF keys.
HF_SIZES = {
    key: value
    for key, value in helpers.tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    .to_dict()
    .items()
    if key in HF_CONFIG_KEYS
}


def random_hf_model(model_class: str, hidden_act: str, tmp_path, **config):
    """An HF model whose every parameter is random (LayerNorm and biases too), saved in
    safetensors under tmp_path/hf, in eval mode."""
    torch.manual_seed(0)
    hf_config = transformers.AlbertConfig(**(HF_SIZES | config), hidden_act=hidden_act)
    model = getattr(transformers, model_class)(hf_config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.2)
    model.save_pretrained(tmp_path / "hf", safe_serialization=True)
    return model


def hf_outputs(model, inputs) -> dict:
    with torch.no_grad():
        return model(
            input_ids=torch.tensor(inputs["input_word_ids"].numpy(), dtype=torch.long),
            attention_mask=torch.tensor(inputs["input_mask"].numpy(), dtype=torch.long),
            token_type_ids=torch.tensor(inputs["input_type_ids"].numpy(), dtype=torch.long),
            output_hidden_states=True,
        )


def max_diff(ours, theirs) -> float:
    return float(np.abs(np.asarray(ours) - theirs.detach().numpy()).max())


def convert(tmp_path):
    assert (
        main(
            ["convert", "--hf-checkpoint", str(tmp_path / "hf"), "--output", str(tmp_path / "out")]
        )
        == 0
    )
    return load_checkpoint_dir(tmp_path / "out")


def assert_hidden_states_match(ours: dict, theirs, inner_group_num: int) -> None:
    """Ours has one entry per block applied; so has transformers 5, while 4.x returns one per
    layer (its last block)."""
    mine_states, hf_states = ours["encoder_outputs"], theirs.hidden_states[1:]
    if len(mine_states) != len(hf_states):
        mine_states = mine_states[inner_group_num - 1 :: inner_group_num]
    assert len(mine_states) == len(hf_states)
    for mine, hf in zip(mine_states, hf_states, strict=True):
        assert max_diff(mine, hf) < 1e-4


def test_albert_for_pretraining_gelu_exact(tmp_path):
    model = random_hf_model("AlbertForPreTraining", "gelu", tmp_path)
    loaded = convert(tmp_path)
    assert loaded.config.hidden_act == "gelu_exact"
    assert loaded.config.embedding_size != loaded.config.hidden_size
    inputs = helpers.make_inputs(loaded.config, batch=3, seq=10)
    theirs = hf_outputs(model, inputs)
    ours = loaded.encoder(inputs, training=False)
    diffs = {
        "sequence_output": max_diff(ours["sequence_output"], theirs.hidden_states[-1]),
        "mlm_logits": max_diff(loaded.mlm_head(ours["sequence_output"]), theirs.prediction_logits),
        "sop_logits": max_diff(loaded.sop_head(ours["pooled_output"]), theirs.sop_logits),
    }
    print("HF AlbertForPreTraining max abs diff:", diffs)
    assert max(diffs.values()) < 1e-4, diffs
    assert_hidden_states_match(ours, theirs, loaded.config.inner_group_num)


def test_albert_model_without_prefix_gelu_new(tmp_path, fixtures_dir):
    model = random_hf_model("AlbertModel", "gelu_new", tmp_path)
    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    shutil.copyfile(sp_model, tmp_path / "hf" / "spiece.model")
    keys = safe_open(str(tmp_path / "hf" / "model.safetensors"), "np").keys()
    assert not any(key.startswith("albert.") for key in keys)
    loaded = convert(tmp_path)
    assert loaded.config.hidden_act == "gelu"
    assert loaded.mlm_head is None and loaded.sop_head is None
    assert loaded.sp_model_path.read_bytes() == sp_model.read_bytes()
    inputs = helpers.make_inputs(loaded.config, batch=2, seq=9)
    theirs = hf_outputs(model, inputs)
    ours = loaded.encoder(inputs, training=False)
    diffs = {
        "sequence_output": max_diff(ours["sequence_output"], theirs.last_hidden_state),
        "pooled_output": max_diff(ours["pooled_output"], theirs.pooler_output),
    }
    print("HF AlbertModel max abs diff:", diffs)
    assert max(diffs.values()) < 1e-4, diffs
    assert_hidden_states_match(ours, theirs, loaded.config.inner_group_num)


def test_albert_for_masked_lm_relu(tmp_path, capsys):
    model = random_hf_model("AlbertForMaskedLM", "relu", tmp_path, num_hidden_groups=1)
    loaded = convert(tmp_path)
    assert "has no pooler" in capsys.readouterr().err
    assert loaded.mlm_head is not None and loaded.sop_head is None
    inputs = helpers.make_inputs(loaded.config, batch=2, seq=7)
    theirs = hf_outputs(model, inputs)
    ours = loaded.encoder(inputs, training=False)
    diff = max_diff(loaded.mlm_head(ours["sequence_output"]), theirs.logits)
    print("HF AlbertForMaskedLM max abs diff (mlm_logits):", diff)
    assert diff < 1e-4
