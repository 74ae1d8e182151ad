"""`albert-tf distill`: both teacher kinds on tiny fixtures the tests build themselves (a random
BERT sentence encoder in the transformers layout, a fine-tuned tiny classifier), resume after a
stop, and every bad input with one line and exit code 2."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import cli
from albert_tf.checkpoint import checkpoint_children, load_checkpoint_dir
from albert_tf.distill import losses
from albert_tf.distill.masking import mask_tokens
from albert_tf.distill.teachers import SentenceTeacher, TaskTeacher
from albert_tf.run_record import hardware
from tests.conftest import FIXTURES
from tests.helpers import finetune_files, write_config

WORDS = "the a film movie was is good great fine bad awful poor and very not it story actor plot"
PIECES = ["##s", "##ed", "##ly", "##ing", ",", ".", "!"]
BERT = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)


def write_bert_teacher(path, seed=0, vocab=True):
    """A random BERT sentence encoder in the sentence-transformers layout at `path`."""
    from safetensors.numpy import save_file

    path.mkdir(parents=True)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS.split(), *PIECES]
    tokens += [c for c in "bcdefghijklmnopqrstuvwxyz"]  # "a" is a word already
    if vocab:
        (path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    h, f, v = BERT["hidden_size"], BERT["intermediate_size"], len(tokens)
    config = dict(model_type="bert", vocab_size=v, max_position_embeddings=64, type_vocab_size=2,
                  hidden_act="gelu", layer_norm_eps=1e-12, **BERT)  # fmt: skip
    (path / "config.json").write_text(json.dumps(config))
    (path / "sentence_bert_config.json").write_text('{"max_seq_length": 24}')
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    rng = np.random.default_rng(seed)
    shapes = {"embeddings.word_embeddings.weight": [v, h],
              "embeddings.position_embeddings.weight": [64, h],
              "embeddings.token_type_embeddings.weight": [2, h],
              "embeddings.LayerNorm.weight": [h], "embeddings.LayerNorm.bias": [h],
              "pooler.dense.weight": [h, h], "pooler.dense.bias": [h]}  # fmt: skip
    for i in range(BERT["num_hidden_layers"]):
        for name, shape in {"attention.self.query": [h, h], "attention.self.key": [h, h],
                            "attention.self.value": [h, h], "attention.output.dense": [h, h],
                            "intermediate.dense": [f, h], "output.dense": [h, f]}.items():  # fmt: skip
            shapes[f"encoder.layer.{i}.{name}.weight"] = shape
            shapes[f"encoder.layer.{i}.{name}.bias"] = shape[:1]
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"encoder.layer.{i}.{norm}.weight"] = [h]
            shapes[f"encoder.layer.{i}.{norm}.bias"] = [h]
    tensors = {k: (0.3 * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()}
    for key in tensors:
        if "LayerNorm.weight" in key:
            tensors[key] = 1 + 0.1 * tensors[key]
    save_file(tensors, str(path / "model.safetensors"))
    return path


def sentences(count, seed):
    rng = np.random.default_rng(seed)
    words = WORDS.split()
    return [" ".join(rng.choice(words, size=rng.integers(3, 9))) + "." for _ in range(count)]


def write_labeled(path, count, seed):
    """A one-text classify TSV: good/great/fine texts are pos, bad/awful/poor ones neg."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write("sentence\tlabel\n")
        for _ in range(count):
            label = rng.choice(["pos", "neg"])
            word = rng.choice(["good", "great", "fine"] if label == "pos" else ["bad", "awful"])
            f.write(
                f"the film was very {word} and the story {rng.choice(['is', 'was'])}.\t{label}\n"
            )
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("distill")
    write_bert_teacher(root / "bert")
    (root / "unlabeled.txt").write_text("\n".join(sentences(48, 0)) + "\n\n")
    (root / "heldout.txt").write_text("\n".join(sentences(12, 1)) + "\n")
    write_config(root)
    return root


def distill_args(root, output, *extra, teacher="bert", init=("random",),
                 unlabeled="unlabeled.txt", config="albert_config.json"):  # fmt: skip
    args = ["distill", "--teacher", str(root / teacher), "--unlabeled", str(root / unlabeled),
            "--output", str(root / output), "--init", *init, "--batch-size", "8",
            "--max-seq-length", "24", "--learning-rate", "2e-3", "--log-every", "2", "--quiet"]  # fmt: skip
    if init == ("random",):
        args += ["--config", str(root / config)]
        args += ["--sp-model", str(FIXTURES / "tokenizer" / "spm.model")]
    return args + list(extra)


@pytest.fixture
def teacher_texts(monkeypatch):
    """The number of texts each call of a teacher (either kind) is run on, in order: a run that
    reads the teacher's outputs from its cache adds nothing."""
    calls = []
    for kind in (SentenceTeacher, TaskTeacher):

        def counted(self, texts, batch_size=64, original=kind.embed):
            calls.append(len(texts))
            return original(self, texts, batch_size)

        monkeypatch.setattr(kind, "embed", counted)
    return calls


def shard_files(*caches):
    """Each teacher-cache shard's (inode, mtime in ns), by path: a shard written again differs."""
    return {
        path: (path.stat().st_ino, path.stat().st_mtime_ns)
        for cache in caches
        for path in sorted(cache.glob("shard-*.npy"))
    }


def test_sentence_teacher_computes_what_transformers_does(world):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    texts = ["The film was very good!", "a story, not a plot.", "unknownword xyz the actor",
             "Ünïcode № ½ and\ttabs\x00here"]  # fmt: skip
    teacher = SentenceTeacher(world / "bert")
    ours = teacher.embed(texts, batch_size=2)
    tokenizer = transformers.BertTokenizer(str(world / "bert" / "vocab.txt"), do_lower_case=True)
    model = transformers.BertModel.from_pretrained(str(world / "bert")).eval()
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    ids = [tokenizer(t)["input_ids"] for t in texts]
    from albert_tf.distill.bert import wordpiece_ids

    assert wordpiece_ids(teacher.files, texts) == ids
    with torch.no_grad():
        sequence = model(**encoded)[0]
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    mean = (sequence * mask).sum(1) / mask.sum(1)
    reference = torch.nn.functional.normalize(mean, dim=1).numpy()
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


def test_distill_from_a_sentence_encoder(world, teacher_texts):
    output = world / "student"
    heldout = ["--eval", str(world / "heldout.txt")]
    args = ["--train-steps", "24", "--save-every", "8", *heldout]
    assert cli.main(distill_args(world, "student", *args)) == 0
    assert teacher_texts == [48, 12]  # each text once: --unlabeled, then --eval
    record = json.loads((output / "distill.json").read_text())
    assert record["texts"] == 48 and record["student"] == "random"
    assert [h["step"] for h in record["history"]] == list(range(2, 25, 2))
    first, last = record["history"][0], record["history"][-1]
    assert last["distill_loss"] < first["distill_loss"]
    assert {"mlm_loss", "mlm_accuracy", "cosine"} <= set(last)
    assert record["eval"]["texts"] == 12
    assert checkpoint_children(tf.train.latest_checkpoint(str(output))) >= {"encoder", "mlm", "sop"}
    loaded = load_checkpoint_dir(output)  # what finetune --init, evaluate and export read
    assert loaded.mlm_head is not None and loaded.sp_model_path.is_file()
    cache = output / "teacher_cache"
    shards = shard_files(cache, output / "teacher_cache_eval")
    assert len(shards) == 2
    assert list((output / "logs").iterdir())
    # The same command on the finished run refuses.
    assert cli.main(distill_args(world, "student", *args)) == 2
    # A new run given the cache (--teacher-cache; its --eval outputs sit beside it) reads the
    # teacher's outputs from it: the teacher runs on no text and no shard is written again.
    # That run takes no step, so what it writes is its --init.
    untrained = distill_args(world, "untrained", "--train-steps", "0", *heldout,
                             "--teacher-cache", str(cache))  # fmt: skip
    assert cli.main(untrained) == 0
    assert teacher_texts == [48, 12]
    assert shard_files(cache, output / "teacher_cache_eval") == shards
    # The student learned from the teacher: its held-out cosine to the teacher beats its
    # --init's by far (measured: 0.98 against 0.34).
    init = json.loads((world / "untrained" / "distill.json").read_text())["eval"]["cosine"]
    assert record["eval"]["cosine"] > init + 0.4, (record["eval"]["cosine"], init)


@pytest.mark.slow
def test_stopped_run_resumes_where_it_stopped(world, monkeypatch, teacher_texts):
    from albert_tf.distill import trainer

    args = ["--train-steps", "6", "--save-every", "100", "--mlm-weight", "0.5"]
    assert cli.main(distill_args(world, "straight", *args)) == 0
    original = trainer._batch

    def stop_at_three(step, *rest):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(step, *rest)

    monkeypatch.setattr(trainer, "_batch", stop_at_three)
    assert cli.main(distill_args(world, "resumed", *args)) == 75
    assert not (world / "resumed" / "distill.json").exists()
    monkeypatch.setattr(trainer, "_batch", original)
    stopped = shard_files(world / "resumed" / "teacher_cache")
    del teacher_texts[:]
    assert cli.main(distill_args(world, "resumed", *args)) == 0
    # The resumed run read the teacher's outputs the stopped one cached.
    assert teacher_texts == [] and shard_files(world / "resumed" / "teacher_cache") == stopped
    a, b = load_checkpoint_dir(world / "straight"), load_checkpoint_dir(world / "resumed")
    for x, y in zip(a.encoder.variables, b.encoder.variables, strict=True):
        np.testing.assert_allclose(x.numpy(), y.numpy(), atol=1e-6)
    # Its record says what ran: two processes, the first stopped by SIGTERM, 6 steps in all.
    ran = json.loads((world / "resumed" / "distill.json").read_text())["ran"]
    stop = ran["segments"][0]["to_step"]
    assert [(s["from_step"], s["to_step"], s["ended"]) for s in ran["segments"]] == [
        (0, stop, "SIGTERM"),
        (stop, 6, "finished"),
    ]
    assert ran["steps"] == ran["steps_taken"] == 6 and ran["settings_changes"] == []
    assert ran["dtype"] == [{"from_step": 0, "to_step": 6, "dtype": "float32"}]
    assert ran["hardware"] == [hardware()]
    # Another seed cannot resume this run.
    assert cli.main(distill_args(world, "resumed", *args[:4], "--seed", "9")) == 2


def test_a_resumed_run_records_the_settings_it_changed(world, monkeypatch):
    """Stage 1 of albert_en_mini's distillation in small: stopped, its distill_run.json edited
    by hand to fewer steps, resumed with those steps and another dtype. The record keeps both
    changes at the step they happened, and the dtype of each step range."""
    from albert_tf.distill import trainer

    args = ["--train-steps", "6", "--save-every", "100"]
    original = trainer._batch

    def stop_at_two(step, *rest):
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(step, *rest)

    monkeypatch.setattr(trainer, "_batch", stop_at_two)
    assert cli.main(distill_args(world, "edited", *args)) == 75
    monkeypatch.setattr(trainer, "_batch", original)
    run_file = world / "edited" / "run" / "distill_run.json"
    saved = json.loads(run_file.read_text())
    run_file.write_text(json.dumps({**saved, "train_steps": 5}))
    resumed = ["--train-steps", "5", "--save-every", "100", "--dtype", "bfloat16"]
    assert cli.main(distill_args(world, "edited", *resumed)) == 0
    record = json.loads((world / "edited" / "distill.json").read_text())
    stop = record["ran"]["segments"][0]["to_step"]
    assert record["ran"]["settings_changes"] == [
        {"step": stop, "key": "dtype", "old": "float32", "new": "bfloat16"},
        {"step": stop, "key": "train_steps", "old": 6, "new": 5},
    ]
    assert record["ran"]["dtype"] == [
        {"from_step": 0, "to_step": stop, "dtype": "float32"},
        {"from_step": stop, "to_step": 5, "dtype": "bfloat16"},
    ]
    assert record["ran"]["steps"] == record["ran"]["steps_taken"] == 5
    assert record["settings"]["train_steps"] == 5  # the last segment's settings


@pytest.fixture(scope="module")
def classifier(world):
    """A classifier that learned its task: dev accuracy 1.0 from epoch 3 (the tiny model learns
    it with initializer range 0.1 and learning rate 1e-2; with 0.02 and 2e-3 it stays at the
    majority class, and a student of it could learn nothing but that)."""
    write_labeled(world / "train.tsv", 48, seed=0)
    write_labeled(world / "dev.tsv", 16, seed=1)
    (world / "task").mkdir()
    config = write_config(world / "task", initializer_range=0.1)
    teacher = finetune_files(world, "classify", output="teacher_clf", config=str(config),
                             max_seq_length=24, epochs=6, batch_size=8, learning_rate=1e-2,
                             dtype="float32", seed=1)  # fmt: skip
    assert teacher.record.best_value == 1.0, teacher.record.history
    return world / "teacher_clf"


def _labels(path, data):
    """The labels the fine-tuned directory `path` predicts for the file `data`, and its scores."""
    from albert_tf.finetune.predict import load_finetuned, predict_file

    records, scores, _ = predict_file(load_finetuned(path), str(data))
    return np.array([r["label"] for r in records]), scores


@pytest.mark.slow
def test_distill_a_fine_tuned_classifier(world, classifier):
    from albert_tf.finetune.predict import load_finetuned

    dev = world / "dev.tsv"
    # The student (of the teacher's config) reads the teacher's training texts without labels.
    task = dict(teacher="teacher_clf", unlabeled="train.tsv", config="task/albert_config.json")
    args = ["--text-column", "sentence", "--mlm-weight", "0", "--learning-rate", "1e-2",
            "--seed", "1", "--eval", str(dev)]  # fmt: skip
    assert cli.main(distill_args(world, "task_student", "--train-steps", "48", *args, **task)) == 0
    output = world / "task_student"
    record = json.loads((output / "distill.json").read_text())
    assert set(record["eval"]) == {"student", "teacher"}
    assert "agreement" in record["history"][-1]
    student = load_finetuned(output)  # predict, export and serving read it as it is
    assert student.record.settings.labels == ("neg", "pos") and (output / "serving").is_dir()
    labels, scores = _labels(output, dev)
    assert scores["accuracy"] == pytest.approx(record["eval"]["student"]["accuracy"])
    # The student learned the teacher's decisions: on dev it gives each text the teacher's
    # label, where its --init (the same run with no step) gives every text one label, the
    # teacher's on 6 of 16.
    assert cli.main(distill_args(world, "task_untrained", "--train-steps", "0", *args, **task)) == 0
    taught, _ = _labels(classifier, dev)
    init, _ = _labels(world / "task_untrained", dev)
    agreement, init_agreement = (labels == taught).mean(), (init == taught).mean()
    assert agreement >= 15 / 16 and agreement > init_agreement + 0.25, (agreement, init_agreement)
    assert record["eval"]["student"]["accuracy"] >= 15 / 16


def test_defaults_on_a_few_hundred_texts_keep_the_teacher(world, classifier, capsys):
    """Issue 60: with no flag but the ones it needs, a student of a fine-tuned classifier ends
    near its teacher. One pass over 300 texts at batch 64 is 5 steps (the old default); the
    defaults take MIN_TRAIN_STEPS, the teacher's own 48 labeled texts with their labels, and its
    own dev file to set the student beside it."""
    from albert_tf.distill.settings import MIN_TRAIN_STEPS

    texts = [line.split("\t")[0] for line in write_labeled(world / "more.tsv", 300, seed=7)
             .read_text().splitlines()[1:]]  # fmt: skip
    (world / "few_hundred.txt").write_text("\n".join(texts) + "\n")
    args = ["distill", "--teacher", str(classifier), "--unlabeled", str(world / "few_hundred.txt"),
            "--init", "random", "--output", str(world / "defaults_student"), "--quiet",
            "--config", str(world / "task" / "albert_config.json"),
            "--sp-model", str(FIXTURES / "tokenizer" / "spm.model")]  # fmt: skip
    capsys.readouterr()
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    record = json.loads((world / "defaults_student" / "distill.json").read_text())
    assert record["texts"] == 300 + 48 and record["settings"]["train_steps"] == MIN_TRAIN_STEPS
    scores = record["eval"]  # on the teacher's dev.tsv, which its finetune.json names
    assert scores["teacher"]["accuracy"] == 1.0
    assert scores["student"]["accuracy"] >= 15 / 16, (scores, record["history"][-1])
    student = scores["student"]["accuracy"]
    assert f"student accuracy {student:.4f}, teacher 1.0000 (± 0.0000), on {world}/dev.tsv" in err
    assert "warning" not in err


def test_a_student_that_trails_its_teacher_is_warned_of():
    from albert_tf.distill.output import beside_teacher
    from albert_tf.distill.settings import DistillSettings

    settings = DistillSettings("t", ("u",), "o", "i", eval_path="dev.tsv", train_steps=23)
    lines = beside_teacher("accuracy", 0.714, 0.795, 400, settings)
    assert lines[0] == "student accuracy 0.7140, teacher 0.7950 (± 0.0202), on dev.tsv"
    assert lines[1].startswith("warning: the student trails its teacher by 8.1 points")
    assert "(now 23)" in lines[1] and len(lines) == 2
    assert len(beside_teacher("accuracy", 0.78, 0.795, 400, settings)) == 1  # within 2 points


def test_soft_targets_at_temperature():
    logits = tf.constant([[2.0, 0.0]])
    same = losses.soft_target_loss(logits, logits, 2.0)
    p = tf.nn.softmax(logits / 2.0)
    entropy = -tf.reduce_sum(p * tf.math.log(p))
    np.testing.assert_allclose(same.numpy(), 4.0 * entropy.numpy(), rtol=1e-6)
    assert losses.embedding_loss(tf.constant([[1.0, 0.0]]), tf.constant([[0.0, 1.0]])) == 2.0


def test_masking_keeps_cls_sep_and_padding():
    ids = np.array([[2, 10, 11, 12, 13, 14, 15, 3, 0, 0]], np.int32)
    masked, positions, labels, weights = mask_tokens(
        ids, np.array([8]), np.random.default_rng(0), mask_id=4, vocab_size=30, probability=0.5
    )
    assert weights.sum() == 3 and set(positions[0]) <= set(range(1, 7))
    np.testing.assert_array_equal(labels[0], ids[0, positions[0]])
    np.testing.assert_array_equal(masked[0, [0, 7, 8, 9]], [2, 3, 0, 0])


def _fails(capsys, args, words):
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


@pytest.mark.slow
def test_bad_inputs_fail_with_one_line(world, classifier, capsys):
    (world / "nothing").mkdir()
    (world / "nothing" / "weights.bin").write_bytes(b"0")
    _fails(capsys, distill_args(world, "o1", teacher="nothing"), "neither a BERT sentence encoder")
    write_bert_teacher(world / "novocab", vocab=False)
    _fails(capsys, distill_args(world, "o2", teacher="novocab"), "no WordPiece vocabulary")
    (world / "empty.txt").write_text("\n  \n")
    args = distill_args(world, "o3")
    args[args.index("--unlabeled") + 1] = str(world / "empty.txt")
    _fails(capsys, args, "holds no text")
    # A fine-tuned student cannot follow a sentence encoder, nor a classifier of other labels.
    _fails(capsys, distill_args(world, "o4", init=(str(classifier),)), "sentence-encoder teacher")
    other = world / "other.tsv"
    other.write_text(
        "sentence\tlabel\n" + "".join(f"text {i} here.\t{'xyz'[i % 3]}\n" for i in range(12))
    )
    finetune_files(world, "classify", train_file="other.tsv", eval_file=None, output="other_clf",
                   max_seq_length=24, epochs=1, batch_size=8, dtype="float32", seed=1)  # fmt: skip
    capsys.readouterr()
    args = distill_args(world, "o5", teacher="teacher_clf", init=(str(world / "other_clf"),))
    _fails(capsys, args, "cannot follow")
    for name in ("o1", "o2", "o3", "o4", "o5"):
        assert not (world / name).exists()
