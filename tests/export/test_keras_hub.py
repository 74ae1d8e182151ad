"""keras-hub presets: export, keras-hub's own loaders (TensorFlow backend), parity with the
original's outputs and ours, the tokenizer on the hard strings, round trips, refusals.

Needs the `keras-hub` extra (in the test extra); skipped without it. keras-hub runs in this
process on Keras 3's TensorFlow backend, beside our tf_keras models.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
keras_hub = pytest.importorskip("keras_hub")

from albert_tf.checkpoint import load_checkpoint_dir  # noqa: E402
from albert_tf.cli import main  # noqa: E402
from albert_tf.convert.keras_hub import (  # noqa: E402
    check_travels,
    convert_keras_hub_preset,
)
from albert_tf.errors import ExportError  # noqa: E402
from albert_tf.export.bundle import export_bundle  # noqa: E402
from albert_tf.startup_noise import is_noise  # noqa: E402
from tests import helpers  # noqa: E402


def _feed(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(
        token_ids=inputs["input_word_ids"],
        segment_ids=inputs["input_type_ids"],
        padding_mask=inputs["input_mask"],
    )


def _all_positions(inputs: dict[str, np.ndarray]) -> np.ndarray:
    batch, length = inputs["input_word_ids"].shape
    return np.tile(np.arange(length, dtype=np.int32), (batch, 1))


def _variables(checkpoint) -> dict[str, np.ndarray]:
    layers = [checkpoint.encoder, checkpoint.mlm_head]
    return {v.name: v.numpy() for layer in layers if layer is not None for v in layer.variables}


def _model_free(name: str) -> str:
    """A task model's variable name without the model's own (numbered) scope."""
    return re.sub(r"^task_model(_\d+)?/", "", name)


def _convert_fixture(fixtures_dir, name, directory, **config_changes):
    from albert_tf.convert.tf1 import convert_tf1_checkpoint

    source = fixtures_dir / name
    config = source / "albert_config.json"
    if config_changes:
        values = json.loads(config.read_text()) | config_changes
        config = directory / "albert_config.json"
        config.write_text(json.dumps(values))
    return convert_tf1_checkpoint(source / "model.ckpt", config, directory / "checkpoint")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, fixtures_dir):
    """albert_tf1_tiny converted and exported with its keras-hub preset (AlbertMaskedLM)."""
    directory = tmp_path_factory.mktemp("kh_tiny")
    checkpoint = _convert_fixture(fixtures_dir, "albert_tf1_tiny", directory)
    bundle = export_bundle(checkpoint, directory / "out", keras_hub=True)
    inputs, reference = helpers.fixture_reference(fixtures_dir / "albert_tf1_tiny")
    return dict(checkpoint=checkpoint, preset=bundle.keras_hub, inputs=inputs, reference=reference)


@pytest.fixture(scope="module")
def groups(tmp_path_factory, fixtures_dir):
    """albert_tf1_groups (2 groups x 2 inner groups, 6 layers) with its activation set to the
    tanh GELU keras-hub computes (the fixture's is relu), converted and exported."""
    from albert_tf.export.keras_hub import write_checkpoint_preset

    directory = tmp_path_factory.mktemp("kh_groups")
    checkpoint = _convert_fixture(fixtures_dir, "albert_tf1_groups", directory, hidden_act="gelu")
    preset = directory / "preset"
    write_checkpoint_preset(load_checkpoint_dir(checkpoint), preset, None, 16, True)
    inputs, _ = helpers.fixture_reference(fixtures_dir / "albert_tf1_groups")
    return dict(checkpoint=checkpoint, preset=preset, inputs=inputs)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A tiny classifier fine-tuned one step (fixture tokenizer), exported to keras-hub by
    `albert-tf export --finetuned DIR --keras-hub` (its output kept)."""
    from albert_tf.finetune.predict import load_finetuned

    root = tmp_path_factory.mktemp("kh_classifier")
    rows = [
        (f"the film {w} was {m}", label)
        for w, m, label in [
            ("plot", "great", "pos"),
            ("cast", "awful", "neg"),
            ("score", "fine", "meh"),
        ]
        * 8
    ]
    (root / "train.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows)
    )
    helpers.finetune_files(
        root,
        "classify",
        eval_file=None,
        epochs=1,
        train_steps=1,
        max_seq_length=16,
        export_serving=False,
        dtype="float32",
    )
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["export", "--finetuned", str(root / "model"), "--keras-hub"]) == 0
    preset = root / "model" / "keras_hub"
    return dict(
        model=root / "model",
        preset=preset,
        report=json.loads((preset / "report.json").read_text()),
        stdout=stdout.getvalue(),
        finetuned=load_finetuned(root / "model"),
    )


# === Parity on the TensorFlow backend ===


@pytest.mark.slow
def test_backbone_equals_the_original(tiny):
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(tiny["preset"]))
    outputs = backbone(_feed(tiny["inputs"]))
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(outputs[name], tiny["reference"][name], atol=1e-5)


@pytest.mark.slow
def test_masked_lm_has_our_head_and_its_epsilon_is_the_one_difference(tiny):
    """AlbertMaskedLM loads our MLM head: with ALBERT's LayerNorm epsilon set as the export's
    note says, its logits equal the original's to 1e-5; as loaded (epsilon 1e-5) they differ by
    what report.json states."""
    masked_lm = keras_hub.models.AlbertMaskedLM.from_preset(str(tiny["preset"]))
    feed = _feed(tiny["inputs"]) | {"mask_positions": _all_positions(tiny["inputs"])}
    expected = tiny["reference"]["mlm_logits"]
    as_loaded = np.abs(np.asarray(masked_lm(feed)) - expected).max()
    masked_lm.masked_lm_head._intermediate_layer_norm.epsilon = 1e-12
    np.testing.assert_allclose(masked_lm(feed), expected, atol=1e-5)
    report = json.loads((tiny["preset"] / "report.json").read_text())
    assert as_loaded > 1e-5
    assert report["max_abs_diff"]["mlm_logits"] > 1e-5
    assert report["max_abs_diff"]["mlm_logits_epsilon_1e-12"] < 1e-5
    assert report["max_abs_diff"]["sequence_output"] < 1e-5
    assert any("epsilon" in note for note in report["notes"])
    assert any("sentence-order" in note for note in report["notes"])


@pytest.mark.slow
def test_groups_and_inner_groups_equal_ours(groups):
    """2 groups x 2 inner groups over 6 layers: keras-hub's group of each layer is ours."""
    source = load_checkpoint_dir(groups["checkpoint"])
    want = source.encoder(groups["inputs"], training=False)
    masked_lm = keras_hub.models.AlbertMaskedLM.from_preset(str(groups["preset"]))
    masked_lm.masked_lm_head._intermediate_layer_norm.epsilon = 1e-12
    got = masked_lm.backbone(_feed(groups["inputs"]))
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-5)
    feed = _feed(groups["inputs"]) | {"mask_positions": _all_positions(groups["inputs"])}
    mlm = source.mlm_head(want["sequence_output"]).numpy()
    np.testing.assert_allclose(masked_lm(feed), mlm, atol=1e-5)


@pytest.mark.slow
def test_classifier_has_our_head_and_our_logits(classifier):
    """AlbertTextClassifier loads our head's weights (not random ones) and, from raw strings
    through its own preprocessor, gives our logits."""
    finetuned = classifier["finetuned"]
    model = keras_hub.models.AlbertTextClassifier.from_preset(str(classifier["preset"]))
    np.testing.assert_array_equal(
        model.get_layer("logits").kernel.numpy(), finetuned.model.task_head.dense.kernel.numpy()
    )
    texts = ["the film plot was great", "The CAST was Awful!", "a score, fine"]
    tokenizer, length = finetuned.tokenizer, finetuned.settings.max_seq_length
    ours = []
    for text in texts:
        ids = [tokenizer.cls_id, *tokenizer.encode(text), tokenizer.sep_id]
        inputs = dict(
            input_word_ids=np.array([ids + [0] * (length - len(ids))], np.int32),
            input_mask=np.array([[1] * len(ids) + [0] * (length - len(ids))], np.int32),
            input_type_ids=np.zeros([1, length], np.int32),
        )
        ours.append(finetuned.model(inputs, training=False)["logits"].numpy()[0])
    np.testing.assert_allclose(model.predict(texts, verbose=0), np.array(ours), atol=1e-5)
    assert classifier["report"]["max_abs_diff"]["logits"] < 1e-5
    assert classifier["report"]["labels"] == list(finetuned.settings.labels)


# === The tokenizer ===


@pytest.mark.slow
def test_tokenizer_gives_our_ids_except_where_documented(classifier, fixtures_dir):
    """keras-hub's AlbertTokenizer loaded from the preset gives the original's ids on the 166
    hard strings (uppercase and accents included) except the four with a digit-comma piece,
    which `differs_from_albert` names."""
    import sentencepiece as spm

    from albert_tf.export.keras_hub_tokenizer import differs_from_albert, preset_tokenizer

    reference = json.loads((fixtures_dir / "tokenizer" / "reference_tokenization.json").read_text())
    encode = preset_tokenizer(classifier["preset"])
    cases = reference["cases"]
    differing = [case["text"] for case in cases if encode(case["text"]) != case["ids"]]
    assert differing == list(helpers.DIGIT_COMMA_HARD_STRINGS)
    sp = spm.SentencePieceProcessor(model_file=str(fixtures_dir / "tokenizer" / "spm.model"))
    flagged = [case["text"] for case in cases if differs_from_albert(sp, case["text"], lower=True)]
    assert flagged == list(helpers.DIGIT_COMMA_HARD_STRINGS)
    assert any(
        case["text"] != case["text"].lower() for case in cases if case["text"] not in flagged
    )


def test_model_normalizer_is_the_character_map_alone(fixtures_dir):
    """The model's own map as the combined normalizer reads it: no dummy prefix, whitespace kept
    as is, on every sentencepiece (0.2.3 takes those flags from the model, 0.2.2 does not)."""
    from albert_tf.export.keras_hub_tokenizer import model_normalizer

    proto = (fixtures_dir / "tokenizer" / "spm.model").read_bytes()
    normalize = model_normalizer(proto).normalize
    for text in ["a", " ", "\x00", "A  b ", "é"]:
        assert normalize(text) == text
    assert normalize("ｈ") == "h"


# === Round trips: ours -> keras-hub -> ours, bit-identical ===


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny", "groups"])
def test_round_trip_is_bit_identical(name, tiny, groups, tmp_path):
    """Every variable of the encoder and the MLM head comes back bit for bit (the SOP head
    stays behind: keras-hub has none)."""
    source = {"tiny": tiny, "groups": groups}[name]
    back = convert_keras_hub_preset(source["preset"], tmp_path / "back")
    want, got = load_checkpoint_dir(source["checkpoint"]), load_checkpoint_dir(back)
    assert got.config == want.config.replace(hidden_act="gelu")
    assert got.sop_head is None and want.sop_head is not None
    want_vars, got_vars = _variables(want), _variables(got)
    assert sorted(got_vars) == sorted(want_vars)
    for key, value in want_vars.items():
        np.testing.assert_array_equal(got_vars[key], value, err_msg=key)


@pytest.mark.slow
def test_classifier_round_trip_is_a_finetuned_model(classifier, tmp_path):
    """A classifier preset converts to a fine-tuned model directory that `predict` reads: the
    same variables bit for bit, the same labels and settings."""
    from albert_tf.finetune.predict import load_finetuned

    back = load_finetuned(convert_keras_hub_preset(classifier["preset"], tmp_path / "back"))
    want = classifier["finetuned"]
    assert back.settings.labels == want.settings.labels
    assert back.settings.max_seq_length == want.settings.max_seq_length
    want_vars = {_model_free(v.name): v.numpy() for v in want.model.variables}
    got_vars = {_model_free(v.name): v.numpy() for v in back.model.variables}
    assert sorted(got_vars) == sorted(want_vars)
    for key, value in want_vars.items():
        np.testing.assert_array_equal(got_vars[key], value, err_msg=key)
    assert back.tokenizer.sp_model_path.read_bytes() == want.tokenizer.sp_model_path.read_bytes()


# === What cannot travel ===


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(shared_params="attention"), "not the attention or the FFN alone"),
        (dict(shared_params="ffn"), "not the attention or the FFN alone"),
        (dict(hidden_act="relu"), "computes only the tanh GELU"),
        (dict(hidden_act="gelu_exact"), "computes only the tanh GELU"),
        (dict(num_hidden_layers=5), "divide evenly among the groups"),
    ],
)
def test_what_keras_hub_cannot_compute_is_refused(changes, message):
    with pytest.raises(ExportError, match=message):
        check_travels(helpers.tiny_config(**changes))


def test_travelling_configs_and_their_notes():
    assert check_travels(helpers.tiny_config()) == []
    assert check_travels(helpers.tiny_config(hidden_act="gelu_new", shared_params="none")) == []
    notes = check_travels(helpers.tiny_config(hidden_dropout_prob=0.1))
    assert len(notes) == 1 and "one dropout rate" in notes[0]


@pytest.mark.slow
def test_without_the_extra_one_line_exit_2(tiny, tmp_path, capsys, monkeypatch):
    """`export --keras-hub` without keras-hub: one line naming the extra, nothing written."""
    monkeypatch.setitem(sys.modules, "keras_hub", None)
    output = tmp_path / "out"
    args = ["export", "--checkpoint", str(tiny["checkpoint"]), "--output", str(output)]
    assert main([*args, "--keras-hub"]) == 2
    line = helpers.one_error_line(capsys.readouterr().err, "export")
    assert 'pip install -e ".[keras-hub]"' in line
    assert not output.exists()


@pytest.mark.slow
def test_refusal_is_one_line_exit_2_nothing_written(groups, fixtures_dir, tmp_path, capsys):
    """The groups fixture as it is (relu) cannot travel: refused before anything is written."""
    checkpoint = _convert_fixture(fixtures_dir, "albert_tf1_groups", tmp_path)
    capsys.readouterr()
    output = tmp_path / "out"
    assert (
        main(["export", "--checkpoint", str(checkpoint), "--output", str(output), "--keras-hub"])
        == 2
    )
    line = helpers.one_error_line(capsys.readouterr().err, "export")
    assert "hidden_act 'relu'" in line
    assert not output.exists() and not list(tmp_path.glob(".out*"))


@pytest.mark.slow
def test_unshared_layers_and_equal_widths_travel(tmp_path):
    """shared_params="none" becomes one keras-hub group per layer; E == H an identity
    projection. keras-hub's backbone gives our outputs; the identity reads back as no
    projection."""
    from albert_tf.checkpoint import CheckpointDir
    from albert_tf.encoder import AlbertEncoder
    from albert_tf.export.keras_hub import write_checkpoint_preset
    from albert_tf.export.tflite import probe_inputs

    config = helpers.tiny_config(shared_params="none", embedding_size=32)
    encoder = AlbertEncoder(config)
    rng = np.random.default_rng(0)
    for variable in encoder.variables:  # random LayerNorms and biases: a wrong map cannot pass
        variable.assign(rng.normal(0, 0.2, variable.shape))
    preset = tmp_path / "preset"
    write_checkpoint_preset(CheckpointDir(config, encoder, None, None), preset, None, 16, True)
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(preset))
    assert backbone.num_groups == config.num_hidden_layers
    inputs = probe_inputs(config.vocab_size, 16)
    want = encoder(inputs, training=False)
    got = backbone(_feed(inputs))
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-5)
    back = load_checkpoint_dir(convert_keras_hub_preset(preset, tmp_path / "back"))
    assert back.encoder.embedding_projection is None
    assert back.config.num_hidden_groups == config.num_hidden_layers
    np.testing.assert_allclose(
        back.encoder(inputs, training=False)["sequence_output"], want["sequence_output"], atol=1e-5
    )


# === The commands ===


@pytest.mark.slow
def test_commands_print_what_travelled(classifier, tiny, tmp_path, capsys):
    """`export --finetuned DIR --keras-hub` prints where it wrote, keras-hub's agreement and the
    tokenizer's exceptions; `convert --keras-hub-preset` writes our checkpoint."""
    lines = classifier["stdout"].splitlines()
    for notice in (
        b"I0000 00:00:1795689086.625556    9924 builder.cc:179] Loading CharsMap of size=213598\n",
        b"I0000 00:00:1795689086.735057    9924 builder.cc:245] Generated normalizer blob. "
        b"size=241525\n",
    ):
        assert is_noise(notice)  # the filter the CLI runs every command through drops these
    assert lines[0] == f"wrote {classifier['model']}/keras_hub"
    assert lines[1].startswith("  AlbertTextClassifier: largest difference from ours")
    assert "digit and a comma" in lines[2]
    assert (
        main(
            ["convert", "--keras-hub-preset", str(tiny["preset"]), "--output", str(tmp_path / "c")]
        )
        == 0
    )
    assert capsys.readouterr().out == f"wrote {tmp_path / 'c'}\n"
    assert load_checkpoint_dir(tmp_path / "c").mlm_head is not None
