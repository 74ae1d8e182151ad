"""`export --hf`: transformers loads what we export, with no missing or unexpected weights, and
computes our outputs (float32, 1e-5); the folder converts back bit for bit; what transformers
cannot compute is refused; the tokenizer gives the original ids.

Needs the optional `hf` extra (transformers + CPU torch); skipped without it.
"""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest

from albert_tf.checkpoint import CheckpointDir, load_checkpoint_dir
from albert_tf.cli import main
from albert_tf.convert.hf import convert_hf_checkpoint
from albert_tf.encoder import AlbertEncoder
from albert_tf.export.hf import export_checkpoint_hf
from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.weights import build_model, variables_by_name
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


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["albert_tf1_tiny", "albert_tf1_groups"])
def test_tf1_fixture_in_transformers(fixture, fixtures_dir, tmp_path, capsys):
    """The original checkpoints, converted and exported with the CLI: transformers computes the
    original code's outputs (tests/fixtures reference_outputs.npz) and ours."""
    source = fixtures_dir / fixture
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    convert = ["--tf1-checkpoint", str(source / "model.ckpt")]
    convert += ["--config", str(source / "albert_config.json"), "--output", str(checkpoint)]
    assert main(["convert", *convert]) == 0
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(out), "--hf"]) == 0
    assert f"wrote {out / 'hf'}: AlbertForPreTraining" in capsys.readouterr().out.splitlines()
    assert sorted(p.name for p in out.iterdir()) == ["encoder", "hf"]
    assert sorted(p.name for p in (out / "hf").iterdir()) == ["config.json", "model.safetensors"]
    model = load_checkpoint_dir(checkpoint)
    reference = dict(np.load(source / "reference_outputs.npz"))
    inputs = {k: reference[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    diffs = pretraining_diffs(model, out / "hf", inputs)
    print(f"{fixture}: transformers vs ours, max abs diff:", diffs)
    assert max(diffs.values()) < 1e-5, diffs
    hf = transformers.AlbertForPreTraining.from_pretrained(str(out / "hf")).eval()
    with torch.no_grad():
        theirs = hf(**torch_inputs(inputs))
        pooled = hf.albert(**torch_inputs(inputs)).pooler_output
    for name, value in (
        ("mlm_logits", theirs.prediction_logits),
        ("sop_logits", theirs.sop_logits),
        ("pooled_output", pooled),
    ):
        assert max_diff(reference[name], value) < 1e-5, name
    assert_round_trip(model, out / "hf", tmp_path)


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


# === Refusals ===


def write_checkpoint(directory, **config):
    """A random-weight checkpoint directory of `helpers.tiny_config(**config)`."""
    from albert_tf.checkpoint import save_checkpoint_dir

    config = helpers.tiny_config(**config)
    return save_checkpoint_dir(directory, config, AlbertEncoder(config))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (dict(shared_params="attention"), "shared_params='attention' cannot travel"),
        (dict(shared_params="ffn"), "shared_params='ffn' cannot travel"),
        # 18 layers in 14 groups: layer 9 is in group int(9 / 18 * 14) = int(7.0) here and
        # int(9 / (18 / 14)) = int(6.999999999999999) in transformers.
        (
            dict(num_hidden_layers=18, num_hidden_groups=14, inner_group_num=1),
            "cannot travel to Hugging Face: layer 9 uses group 7 here and would use group 6 in transformers",
        ),
    ],
)
def test_refused_before_anything_is_written(config, message, tmp_path, capsys):
    checkpoint = write_checkpoint(tmp_path / "checkpoint", **config)
    output = tmp_path / "out"
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(output), "--hf"]) == 2
    err = capsys.readouterr().err
    assert helpers.one_error_line(err, "export").find(message) >= 0, err
    assert not output.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


# === Fine-tuned models ===

FAST = dict(
    epochs=1, batch_size=8, learning_rate=1e-3, dtype="float32", seed=0, export_serving=False
)


def write_scores(path, rows, seed):
    """A GLUE-style sentence-pair TSV with a number per pair (STS-B style)."""
    rng = np.random.default_rng(seed)
    lines = ["index\tsentence1\tsentence2\tlabel"]
    for i in range(rows):
        lines.append(f"{i}\tThe film was good {i}.\tIs it worth it?\t{rng.uniform(0, 5):.2f}")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """Tiny fine-tuned models (2 groups of 2 inner groups, one epoch, no serving/) of each
    task: task -> (the fine-tuning result, its examples' model inputs)."""
    from tests.finetune.test_squad_finetune import squad_file
    from tests.finetune.test_task_choice_tag import write_conll, write_race

    root = tmp_path_factory.mktemp("finetuned")
    config = str(helpers.write_config(root, num_hidden_groups=2, inner_group_num=2))
    helpers.write_pairs(root / "pairs.tsv", 16, seed=0)
    write_scores(root / "scores.tsv", 16, seed=0)
    write_conll(root / "conll.txt", 8, seed=0)
    squad_file(root / "squad.json", 1)
    write_race(root / "RACE" / "high", 4, seed=0)
    runs = {
        "classify": ("pairs.tsv", dict(max_seq_length=20)),
        "regress": ("scores.tsv", dict(max_seq_length=20)),
        "tag": ("conll.txt", dict(max_seq_length=12)),
        "squad": (
            "squad.json",
            # transformers' AlbertForQuestionAnswering is BERT's head (ALBERT's is refused:
            # tests/finetune/test_squad_albert_head.py)
            dict(max_seq_length=40, doc_stride=12, max_query_length=12, squad_head="bert"),
        ),
        "multiple-choice": ("RACE", dict(max_seq_length=24)),
    }
    results = {}
    for task, (train_file, settings) in runs.items():
        result = helpers.finetune_files(
            root,
            task,
            train_file=train_file,
            eval_file=None,
            output=task,
            config=config,
            **settings,
            **FAST,
        )
        data = result.task.load(str(root / train_file), result.tokenizer)
        results[task] = (result, root / task, data.inputs)
    return results


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "regress", "tag", "squad", "multiple-choice"])
def test_finetuned_in_transformers(task, finetuned, tmp_path, capsys):
    result, directory, inputs = finetuned[task]
    if task in ("squad", "tag"):
        # ONNX has no raw-string model for these (SQuAD: BERT's head here): refused before
        # either folder is written.
        assert main(["export", "--finetuned", str(directory), "--hf", "--onnx"]) == 2
        line = helpers.one_error_line(capsys.readouterr().err, "export")
        assert "covers classify and regress tasks and SQuAD with ALBERT's" in line
        assert not (directory / "hf").exists() and not (directory / "onnx").exists()
    if task == "regress":
        # keras-hub takes classifiers only: refused from finetune.json before hf/ is written.
        assert main(["export", "--finetuned", str(directory), "--hf", "--keras-hub"]) == 2
        line = helpers.one_error_line(capsys.readouterr().err, "export")
        assert "classify tasks only; this one is regress" in line
        assert not (directory / "hf").exists() and not (directory / "keras_hub").exists()
    assert main(["export", "--finetuned", str(directory), "--hf"]) == 0
    architecture = {
        "classify": "AlbertForSequenceClassification",
        "regress": "AlbertForSequenceClassification",
        "tag": "AlbertForTokenClassification",
        "squad": "AlbertForQuestionAnswering",
        "multiple-choice": "AlbertForMultipleChoice",
    }[task]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {directory / 'hf'}: {architecture}"
    if task == "squad":
        assert out[1].startswith("  the Hugging Face model leaves padding positions' logits")
    else:
        assert len(out) == 1, out
    model, report = load_hf(architecture, directory / "hf")
    assert report == {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set()}
    ours = result.model(inputs, training=False)
    with torch.no_grad():
        theirs = model(**torch_inputs(inputs))
    if task == "squad":
        real = np.asarray(inputs["input_mask"]) == 1
        diffs = {
            name: max_diff(np.asarray(ours[name])[real], getattr(theirs, name).numpy()[real])
            for name in ("start_logits", "end_logits")
        }
    elif task == "regress":
        diffs = {"predictions": max_diff(ours["predictions"], theirs.logits[:, 0])}
        assert model.config.problem_type == "regression" and model.config.num_labels == 1
    else:
        diffs = {"logits": max_diff(ours["logits"], theirs.logits)}
    if task in ("classify", "tag"):
        labels = list(result.settings.labels)
        assert model.config.id2label == dict(enumerate(labels))
        assert model.config.label2id == {label: i for i, label in enumerate(labels)}
    print(f"{task}: transformers vs ours, max abs diff:", diffs)
    assert max(diffs.values()) < 1e-5, diffs
    # Back again: the encoder converts bit for bit (the task head has no place in a checkpoint).
    back = load_checkpoint_dir(convert_hf_checkpoint(directory / "hf", tmp_path / "back"))
    assert "fine-tuned task head" in capsys.readouterr().err
    # Tagging and SQuAD models travel without the pooler they never read.
    travels = [
        v
        for v in result.model.encoder.variables
        if result.task.reads == "pooled_output" or "pooler" not in v.name
    ]
    assert len(travels) == len(result.model.encoder.variables) - 2 * (task in ("tag", "squad"))
    back = {v.name: v.numpy() for v in back.encoder.variables}
    assert all(np.array_equal(back[v.name], v.numpy()) for v in travels)


# === The tokenizer ===


@pytest.fixture(scope="module")
def exported(tmp_path_factory, fixtures_dir):
    """A vocab-1000 model exported to HF with the fixture SentencePiece model."""
    from albert_tf.config import AlbertConfig

    folder = tmp_path_factory.mktemp("tokenizer") / "hf"
    folder.mkdir()
    config = AlbertConfig(**helpers.TINY_FINETUNE_CONFIG)
    model = CheckpointDir(config, AlbertEncoder(config), None, None)
    assert export_checkpoint_hf(model, folder, fixtures_dir / "tokenizer" / "spm.model") == (
        "AlbertModel"
    )
    return folder


@pytest.fixture(scope="module")
def reference_cases(fixtures_dir):
    path = fixtures_dir / "tokenizer" / "reference_tokenization.json"
    return json.loads(path.read_text())["cases"]


def test_folder_with_tokenizer(exported, fixtures_dir):
    assert sorted(p.name for p in exported.iterdir()) == [
        "config.json",
        "model.safetensors",
        "spiece.model",
        "tokenization_albert_tf.py",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    sp_model = fixtures_dir / "tokenizer" / "spm.model"
    assert (exported / "spiece.model").read_bytes() == sp_model.read_bytes()
    config = json.loads((exported / "config.json").read_text())
    assert (config["pad_token_id"], config["bos_token_id"], config["eos_token_id"]) == (0, 2, 3)
    assert load_hf("AlbertModel", exported)[1] == {
        "missing_keys": set(),
        "unexpected_keys": set(),
        "mismatched_keys": set(),
    }


# The strings of the fixture on which the plain tokenizer.json differs: SentencePiece's first
# segmentation holds a piece ending in digit + "," that the original re-splits ...
RESPLIT = helpers.DIGIT_COMMA_HARD_STRINGS
# ... or a run of one repeated string whose equal-scoring orders SentencePiece tells apart by
# float32 rounding.
TIED = "Enhanced clock-program, showing date and time"


def test_tokenizer_json(exported, reference_cases):
    """AutoTokenizer.from_pretrained gives the original ids except where the original re-splits
    a digit-comma piece (there it gives SentencePiece's first segmentation) and in one tied run
    (the same pieces in another order)."""
    from albert_tf.export.hf_tokenizer import hf_tokenizer
    from albert_tf.preprocess.normalize import preprocess_text
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    tokenizer = hf_tokenizer(exported)
    sp = AlbertTokenizer(exported / "spiece.model").sp_model
    differ = []
    for case in reference_cases:
        ids = tokenizer(case["text"], add_special_tokens=False)["input_ids"]
        if ids == case["ids"]:
            continue
        differ.append(case["text"])
        if case["text"].startswith(TIED):
            assert sorted(ids) == sorted(case["ids"]), case["text"]
        else:
            assert ids == sp.encode(preprocess_text(case["text"])), case["text"]
    assert len(reference_cases) == 166
    assert sorted(differ) == sorted([*RESPLIT, next(t for t in differ if t.startswith(TIED))])


def test_tokenizer_with_remote_code_is_exact(exported, reference_cases):
    from albert_tf.export.hf_tokenizer import hf_tokenizer
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    folder = exported
    exact = hf_tokenizer(folder, trust_remote_code=True)
    assert type(exact).__name__ == "AlbertOriginalTokenizer"
    for case in reference_cases:
        assert exact(case["text"], add_special_tokens=False)["input_ids"] == case["ids"]
    # Pairs and special tokens as our packer makes them, from both tokenizers.
    ours = AlbertTokenizer(folder / "spiece.model")
    first, second = "Hello, World!", "ΟΔΟΣ [MASK] ﬁ"
    a, b = ours.encode(first), ours.encode("ΟΔΟΣ") + [ours.mask_id] + ours.encode("ﬁ")
    for tokenizer in (exact, hf_tokenizer(folder)):
        encoded = tokenizer(first, second)
        assert encoded["input_ids"] == [ours.cls_id, *a, ours.sep_id, *b, ours.sep_id]
        assert encoded["token_type_ids"] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
        assert (tokenizer.pad_token_id, tokenizer.mask_token_id) == (ours.pad_id, ours.mask_id)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_normalizer_is_preprocess_text(do_lower_case):
    """The tokenizer.json normalizer equals `preprocess_text` on every character of the Basic
    Multilingual Plane (each after an "a"; run by hand on all 1,112,064 code points: equal but
    for the 55 letters Python 3.11's Unicode 14 lacks) and on Final_Sigma's contexts."""
    from tokenizers import Tokenizer

    from albert_tf.export.hf_tokenizer import _preprocess_normalizers
    from albert_tf.preprocess.normalize import preprocess_text

    pipeline = {
        "version": "1.0",
        "normalizer": {"type": "Sequence", "normalizers": _preprocess_normalizers(do_lower_case)},
        "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
    }
    normalizer = Tokenizer.from_str(json.dumps(pipeline)).normalizer
    # Characters unassigned in this Python's Unicode (the 55 letters among them) left out.
    chars = (chr(c) for c in range(0xFFFF) if c != ord("a") and not 0xD800 <= c < 0xE000)
    bmp = "a" + "a".join(c for c in chars if unicodedata.category(c) != "Cn")
    sigma = ["ΟΔΟΣ ΟΔΟΣ.", "Α'Σ", "Α.:'Σ", "ΑΣ'Α", "ΑΣΣ", "Ά Σ", "A\u0301Σ", "x.Σ'y"]
    for text in (bmp, *sigma):
        assert normalizer.normalize_str(text) == preprocess_text(text, lower=do_lower_case)
