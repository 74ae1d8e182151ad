"""`export --hf`: transformers loads what we export, with no missing or unexpected weights, and
computes our outputs (float32, 1e-5); the folder converts back bit for bit; what transformers
cannot compute is refused; the tokenizer gives the original ids.

Needs the optional `hf` extra (transformers + CPU torch); skipped without it.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from albert_tf.checkpoint import CheckpointDir, load_checkpoint_dir
from albert_tf.cli import main
from albert_tf.convert.common import build_model, variables_by_name
from albert_tf.convert.hf import convert_hf_checkpoint
from albert_tf.encoder import AlbertEncoder
from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from export.hf import export_checkpoint_hf
from tests import helpers

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PRETRAINING_CLASSES = ("AlbertForPreTraining", "AlbertForMaskedLM", "AlbertModel")
# What a class without a head finds in a folder that has it: transformers' usual report.
HEAD_KEYS = {
    "mlm": {
        "predictions.bias",
        "predictions.dense.weight",
        "predictions.dense.bias",
        "predictions.LayerNorm.weight",
        "predictions.LayerNorm.bias",
    },
    "sop": {"sop_classifier.classifier.weight", "sop_classifier.classifier.bias"},
    "pooler": {"albert.pooler.weight", "albert.pooler.bias"},
}


def randomize(model: CheckpointDir, seed: int = 0) -> CheckpointDir:
    """Every variable random (LayerNorm and biases too), so no wrong mapping passes by luck."""
    rng = np.random.default_rng(seed)
    for variable in variables_by_name(model).values():
        variable.assign(rng.normal(0.0, 0.2, variable.shape).astype(np.float32))
    return model


def torch_inputs(inputs: dict) -> dict:
    return dict(
        input_ids=torch.tensor(np.asarray(inputs["input_word_ids"]), dtype=torch.long),
        attention_mask=torch.tensor(np.asarray(inputs["input_mask"]), dtype=torch.long),
        token_type_ids=torch.tensor(np.asarray(inputs["input_type_ids"]), dtype=torch.long),
    )


def load_hf(model_class: str, folder):
    """The transformers model of `folder` in eval mode, and its loading report."""
    model, info = getattr(transformers, model_class).from_pretrained(
        str(folder), output_loading_info=True
    )
    return model.eval(), {k: set(v) for k, v in info.items() if k != "error_msgs"}


def max_diff(ours, theirs) -> float:
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
    return float(np.abs(np.asarray(ours) - theirs).max())


def pretraining_diffs(model: CheckpointDir, folder, inputs: dict) -> dict[str, float]:
    """max |ours - transformers'| of sequence, pooled, MLM and SOP outputs (AlbertForPreTraining
    from `folder`), after checking every class loads with no missing weights."""
    reports = {name: load_hf(name, folder) for name in PRETRAINING_CLASSES}
    assert reports["AlbertForPreTraining"][1] == {
        "missing_keys": set(),
        "unexpected_keys": set(),
        "mismatched_keys": set(),
    }
    assert reports["AlbertForMaskedLM"][1]["missing_keys"] == set()
    assert (
        reports["AlbertForMaskedLM"][1]["unexpected_keys"] == HEAD_KEYS["sop"] | HEAD_KEYS["pooler"]
    )
    assert reports["AlbertModel"][1]["missing_keys"] == set()
    assert reports["AlbertModel"][1]["unexpected_keys"] == HEAD_KEYS["mlm"] | HEAD_KEYS["sop"]
    pretraining = reports["AlbertForPreTraining"][0]
    # The decoder is tied as transformers ties it: one tensor with the word embeddings.
    assert (
        pretraining.predictions.decoder.weight.data_ptr()
        == pretraining.albert.embeddings.word_embeddings.weight.data_ptr()
    )
    ours = model.encoder(inputs, training=False)
    with torch.no_grad():
        theirs = pretraining(**torch_inputs(inputs))
        base = pretraining.albert(**torch_inputs(inputs))
        masked_lm = reports["AlbertForMaskedLM"][0](**torch_inputs(inputs))
    mlm_logits = model.mlm_head(ours["sequence_output"])
    return {
        "sequence_output": max_diff(ours["sequence_output"], base.last_hidden_state),
        "pooled_output": max_diff(ours["pooled_output"], base.pooler_output),
        "mlm_logits": max_diff(mlm_logits, theirs.prediction_logits),
        "mlm_logits (AlbertForMaskedLM)": max_diff(mlm_logits, masked_lm.logits),
        "sop_logits": max_diff(model.sop_head(ours["pooled_output"]), theirs.sop_logits),
    }


def assert_round_trip(model: CheckpointDir, folder, tmp_path) -> None:
    """ours -> HF -> ours gives every variable back bit for bit."""
    back = load_checkpoint_dir(convert_hf_checkpoint(folder, tmp_path / "back"))
    ours, theirs = variables_by_name(model), variables_by_name(back)
    assert set(ours) == set(theirs)
    for name, variable in ours.items():
        assert np.array_equal(variable.numpy(), theirs[name].numpy()), name


@pytest.mark.parametrize("fixture", ["albert_tf1_tiny", "albert_tf1_groups"])
def test_tf1_fixture_in_transformers(fixture, fixtures_dir, tmp_path):
    """The original checkpoints, converted and exported: transformers computes the original
    code's outputs (tests/fixtures reference_outputs.npz) and ours."""
    from albert_tf.convert.tf1 import convert_tf1_checkpoint

    source = fixtures_dir / fixture
    checkpoint = convert_tf1_checkpoint(
        source / "model.ckpt", source / "albert_config.json", tmp_path / "checkpoint"
    )
    model = load_checkpoint_dir(checkpoint)
    (tmp_path / "hf").mkdir()
    assert export_checkpoint_hf(model, tmp_path / "hf", None) == "AlbertForPreTraining"
    reference = dict(np.load(source / "reference_outputs.npz"))
    inputs = {k: reference[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    diffs = pretraining_diffs(model, tmp_path / "hf", inputs)
    print(f"{fixture}: transformers vs ours, max abs diff:", diffs)
    assert max(diffs.values()) < 1e-5, diffs
    hf = transformers.AlbertForPreTraining.from_pretrained(str(tmp_path / "hf")).eval()
    with torch.no_grad():
        theirs = hf(**torch_inputs(inputs))
        pooled = hf.albert(**torch_inputs(inputs)).pooler_output
    for name, value in (
        ("mlm_logits", theirs.prediction_logits),
        ("sop_logits", theirs.sop_logits),
        ("pooled_output", pooled),
    ):
        assert max_diff(reference[name], value) < 1e-5, name
    assert_round_trip(model, tmp_path / "hf", tmp_path)


@pytest.fixture(scope="module")
def own_model(tmp_path_factory):
    """A model of ours with 2 groups of 2 inner groups (4 layers, E != H), every variable
    random, exported to HF."""
    model = randomize(build_model(helpers.tiny_config(), with_mlm=True, with_sop=True))
    folder = tmp_path_factory.mktemp("own") / "hf"
    folder.mkdir()
    export_checkpoint_hf(model, folder, None)
    return model, folder


def test_own_model_2x2_groups(own_model, tmp_path):
    model, folder = own_model
    config = json.loads((folder / "config.json").read_text())
    # Every key transformers' AlbertConfig has (a missing one falls back to xxlarge defaults).
    assert set(transformers.AlbertConfig().to_dict()) - {
        "transformers_version",
        "_name_or_path",
    } <= set(config)
    assert config["hidden_act"] == "gelu_new"
    assert (config["num_hidden_groups"], config["inner_group_num"]) == (2, 2)
    diffs = pretraining_diffs(model, folder, helpers.make_inputs(model.config, batch=3, seq=11))
    print("2x2 groups: transformers vs ours, max abs diff:", diffs)
    assert max(diffs.values()) < 1e-5, diffs
    assert_round_trip(model, folder, tmp_path)


@pytest.mark.parametrize(("ours", "theirs"), [("gelu_exact", "gelu"), ("swish", "silu")])
def test_activation_names_and_sharing_none(ours, theirs, tmp_path):
    """Sharing nothing travels as one group per layer; each activation under its HF name."""
    config = helpers.tiny_config(shared_params="none", hidden_act=ours)
    encoder = AlbertEncoder(config)
    model = randomize(
        CheckpointDir(
            config,
            encoder,
            MaskedLMHead(config, encoder.get_embedding_table()),
            SentenceOrderHead(config),
        )
    )
    export_checkpoint_hf(model, tmp_path, None)
    values = json.loads((tmp_path / "config.json").read_text())
    assert values["hidden_act"] == theirs
    assert values["num_hidden_groups"] == config.num_hidden_layers
    diffs = pretraining_diffs(model, tmp_path, helpers.make_inputs(config, batch=2, seq=9))
    assert max(diffs.values()) < 1e-5, diffs
