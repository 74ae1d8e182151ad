"""Fine-tuning end to end: classify with pairs; predict and serving equal the in-memory model;
bad input fails with one line and exit code 2."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import cli
from albert_tf.checkpoint import checkpoint_children
from albert_tf.finetune.inference import batched_outputs, trimmed
from albert_tf.finetune.predict import load_finetuned, predict_file
from albert_tf.run_record import hardware
from tests.helpers import finetune_files, write_config, write_pairs

FAST = dict(epochs=2, batch_size=8, learning_rate=1e-3, dtype="float32", seed=1)


@pytest.fixture(scope="module")
def classify_run(tmp_path_factory, fixtures_dir):
    root = tmp_path_factory.mktemp("classify")
    write_pairs(root / "train.tsv", 48, seed=0)
    write_pairs(root / "dev.tsv", 12, seed=1)
    result = finetune_files(root, "classify", max_seq_length=20, **FAST)
    return root, result


@pytest.mark.slow
def test_output_dir_holds_checkpoint_head_and_metadata(classify_run):
    root, result = classify_run
    model_dir = root / "model"
    meta = json.loads((model_dir / "finetune.json").read_text())
    assert meta["task"] == "classify"
    assert meta["labels"] == ["no", "yes"]
    assert meta["max_seq_length"] == 20
    assert [h["epoch"] for h in meta["history"]] == [1, 2]
    # What ran: the dtype, the steps taken (2 epochs of 48 / 8) and the machine.
    assert meta["dtype"] == "float32" and meta["steps"] == 12
    assert meta["hardware"] == hardware() and meta["hardware"]["cpu"]
    best = max(h["eval"]["accuracy"] for h in meta["history"])
    assert meta["best_value"] == best
    prefix = tf.train.latest_checkpoint(str(model_dir))
    assert prefix.endswith(f"ckpt-{meta['best_epoch']}")
    assert {"encoder", "task_head"} <= checkpoint_children(prefix)
    assert (model_dir / "albert_config.json").is_file() and (model_dir / "spm.model").is_file()
    assert meta["skipped"]["train"]["truncated to --max-seq-length"] > 0
    assert list((model_dir / "logs").iterdir())


def test_batches_are_cut_after_their_longest_row_in_buckets():
    mask = np.zeros((3, 2, 64), np.int32)  # windows or choices: [B, K, S]
    mask[0, 1, :21] = 1
    mask[2, 0, :5] = 1
    batch = {"input_mask": mask, "input_word_ids": mask * 7}
    cut = trimmed(batch)
    assert {k: v.shape for k, v in cut.items()} == {k: (3, 2, 32) for k in batch}
    np.testing.assert_array_equal(cut["input_word_ids"], batch["input_word_ids"][..., :32])
    assert trimmed({"input_mask": mask[..., :24]})["input_mask"].shape == (3, 2, 24)
    assert trimmed({"input_mask": np.zeros((2, 64), np.int32)})["input_mask"].shape == (2, 16)


@pytest.mark.slow
def test_predict_and_serving_equal_in_memory(classify_run):
    root, result = classify_run
    dev = result.task.load(str(root / "dev.tsv"), result.tokenizer)
    expected_outputs = batched_outputs(result.model, dev.inputs, 64)
    expected = result.task.decode(expected_outputs, dev)

    records, scores, _ = predict_file(load_finetuned(root / "model"), str(root / "dev.tsv"))
    assert [r["label"] for r in records] == [r["label"] for r in expected]
    np.testing.assert_allclose(
        [list(r["probabilities"].values()) for r in records],
        [list(r["probabilities"].values()) for r in expected],
        atol=1e-6,
    )
    assert 0.0 <= scores["accuracy"] <= 1.0

    out = root / "predictions.jsonl"
    assert (
        cli.main(
            [
                "predict",
                "--checkpoint",
                str(root / "model"),
                "--input",
                str(root / "dev.tsv"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["label"] for r in lines] == [r["label"] for r in expected]

    serving = tf.saved_model.load(str(root / "model" / "serving")).signatures["serving_default"]
    texts = [e.text_a for e in dev.examples]
    pairs = [e.text_b for e in dev.examples]
    got = serving(text=tf.constant(texts), text_pair=tf.constant(pairs))
    np.testing.assert_allclose(got["logits"].numpy(), expected_outputs["logits"], atol=1e-5)
    assert [x.decode() for x in got["label"].numpy()] == [r["label"] for r in expected]


@pytest.mark.slow
def test_predict_carries_ids_and_reads_a_headerless_file(classify_run, capsys):
    root, _ = classify_run
    rows = (root / "dev.tsv").read_text().splitlines()[1:]  # index, sentence1, sentence2, label
    headerless = root / "headerless.tsv"
    headerless.write_text("".join(row.split("\t", 1)[1] + "\n" for row in rows))
    out = root / "headerless.jsonl"
    argv = ["predict", "--checkpoint", root / "model", "--input", headerless, "--output", out]
    argv += ["--no-header", "--text-column", 0, "--text-pair-column", 1, "--label-column", 2]
    assert cli.main([str(a) for a in argv]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"wrote {len(rows)} rows to {out}"
    assert '"metrics"' in err[-2]  # the labels were read from column 2
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == list(range(1, len(rows) + 1))  # line numbers
    argv = ["predict", "--checkpoint", root / "model", "--input", root / "dev.tsv"]
    assert cli.main([str(a) for a in argv]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in records] == [row.split("\t")[0] for row in rows]  # its index column


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_predict_runs_what_serving_runs_in_bfloat16(classify_run, tmp_path, dtype):
    """`predict` on a model that runs in bfloat16 (fine-tuned with `--dtype auto` on an
    AVX512_BF16 CPU) leaves out oneDNN's fused LayerNorm and softmax, so it runs the kernels
    `serving/` runs: their float32 rounding differs by 1e-7, which bfloat16 carried to 3e-4 in
    probability on a fine-tuned 6-layer model (logits bit for bit equal without them). A
    float32 model keeps them where they exist (within 1e-7 of serving/)."""
    from albert_tf.layers.fused import onednn_kernels_available

    root, _ = classify_run
    model_dir = tmp_path / "model"
    shutil.copytree(root / "model", model_dir, ignore=shutil.ignore_patterns("serving"))
    meta = json.loads((model_dir / "finetune.json").read_text())
    (model_dir / "finetune.json").write_text(json.dumps({**meta, "dtype": dtype}))
    finetuned = load_finetuned(model_dir)
    assert finetuned.model.compute_dtype == dtype
    dev = finetuned.task.load(str(root / "dev.tsv"), finetuned.tokenizer)
    outputs = batched_outputs(finetuned.model, dev.inputs, 64)
    assert outputs["logits"].shape == (len(dev.examples), 2)
    # The trace predict ran (the same inputs find it in the function's cache).
    graph = finetuned.model._inference_function.get_concrete_function(dev.inputs).graph
    fused = {op.type for op in graph.get_operations()} & {"_MklLayerNorm"}
    assert bool(fused) == (dtype == "float32" and onednn_kernels_available())


def run_cli(*argv):
    return cli.main(["finetune", *map(str, argv)])


def test_bad_input_one_line_exit_2(tmp_path, fixtures_dir, capsys):
    spm = fixtures_dir / "tokenizer" / "spm.model"
    config = write_config(tmp_path)
    write_pairs(tmp_path / "train.tsv", 8, seed=0)
    common = [
        "--init",
        "random",
        "--config",
        config,
        "--sp-model",
        spm,
        "--dtype",
        "float32",
        "--max-seq-length",
        32,
    ]

    def fails(*extra, match):
        code = run_cli("--task", "classify", "--train", tmp_path / "train.tsv", *common, *extra)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert len(err) == 1 and match in err[0], err
        assert not (tmp_path / "out").exists()

    bad = tmp_path / "bad.tsv"
    bad.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tyes\n1\tmissing fields\n")
    fails(
        "--eval",
        bad,
        "--output",
        tmp_path / "out",
        match=f"{bad}:3: expected 4 fields like the header, got 2",
    )
    unseen = tmp_path / "unseen.tsv"
    unseen.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    fails(
        "--eval",
        unseen,
        "--output",
        tmp_path / "out",
        match=f"{unseen}:2: label 'maybe' was not seen",
    )
    empty = tmp_path / "empty.tsv"
    empty.write_text("index\tsentence1\tsentence2\tlabel\n")
    fails("--eval", empty, "--output", tmp_path / "out", match=f"{empty} holds no examples")
    fails(
        "--max-seq-length",
        "128",
        "--output",
        tmp_path / "out",
        match="exceeds the model's max_position_embeddings 64",
    )
    fails(
        "--output", tmp_path / "out", "--learning-rate", "0", match="learning-rate must be positive"
    )
    out = ["--output", tmp_path / "out"]
    fails(*out, "--max-windows", 0, match="--max-windows must be positive, got 0")
    fails(*out, "--max-windows", 2, "--window-stride", 0, match="--window-stride must be positive")
    fails(
        *out,
        "--max-windows",
        2,
        "--max-first-segment-length",
        29,
        match="--max-first-segment-length must be in [1, 28] at --max-seq-length 32, got 29",
    )
    quoted = tmp_path / "quoted.tsv"
    quoted.write_text('sentence\tlabel\n"an unclosed quote\tyes\n')
    fails(*out, "--eval", quoted, "--quoting", "csv", match=f"{quoted}:2: malformed quoted field")
    conll = tmp_path / "train.conll"
    conll.write_text("EU B-ORG\nrejects O\n")
    code = run_cli("--task", "squad", "--train", conll, *common, *out, "--max-windows", 2)
    assert (
        code == 2 and "applies to classify, regress and tag, not squad" in capsys.readouterr().err
    )


@pytest.mark.parametrize(("name", "kind"), [("adamw", "AdamWeightDecay"), ("lamb", "LAMB")])
def test_optimizer_warmup_then_linear_decay(name, kind):
    from albert_tf.optimizer import build_optimizer

    optimizer = build_optimizer(1e-3, 100, 10, name=name, weight_decay=0.01)
    assert type(optimizer).__name__ == kind
    schedule = optimizer._get_hyper("learning_rate")
    # warmup reaches the decayed value at step 10 (9e-4) linearly; then 1e-3 * (1 - t / 100)
    assert [round(float(schedule(t)), 7) for t in (0, 5, 55, 100)] == [0.0, 4.5e-4, 4.5e-4, 0.0]


def test_a_nan_first_epoch_does_not_stay_best():
    from albert_tf.finetune.summary import improves

    nan = float("nan")
    assert improves(nan, None, first=True)  # the first epoch always gets a checkpoint
    assert improves(0.1, nan)  # any number then replaces a NaN
    assert not improves(nan, 0.1)
    assert not improves(0.1, 0.2) and improves(0.3, 0.2)


def test_train_steps_0_evaluates_the_start_and_reads_the_training_file_once(
    tmp_path, fixtures_dir, monkeypatch, capsys
):
    from albert_tf.finetune import data

    write_pairs(tmp_path / "train.tsv", 8, seed=0)
    write_pairs(tmp_path / "dev.tsv", 4, seed=1)
    reads = []
    read_text_file = data.read_text_file
    monkeypatch.setattr(
        data, "read_text_file", lambda path, **kw: reads.append(path) or read_text_file(path, **kw)
    )
    argv = ["--task", "classify", "--train", tmp_path / "train.tsv", "--eval", tmp_path / "dev.tsv"]
    argv += ["--init", "random", "--config", write_config(tmp_path), "--train-steps", 0]
    argv += ["--sp-model", fixtures_dir / "tokenizer" / "spm.model", "--max-seq-length", 16]
    argv += ["--output", tmp_path / "out", "--dtype", "float32", "--no-serving"]
    assert run_cli(*argv) == 0
    assert "epoch 1: loss n/a (no steps); eval accuracy" in capsys.readouterr().err
    assert [str(p) for p in reads] == [str(tmp_path / "train.tsv"), str(tmp_path / "dev.tsv")]
    meta = json.loads((tmp_path / "out" / "finetune.json").read_text())
    assert [(h["steps"], h["train_loss"]) for h in meta["history"]] == [(0, None)]
    assert meta["best_epoch"] == 1 and tf.train.latest_checkpoint(str(tmp_path / "out"))


def test_predict_ids_are_the_inputs_strings_else_line_numbers():
    from types import SimpleNamespace

    from albert_tf.finetune.predict import example_id

    assert example_id(SimpleNamespace(id="0", source="dev.tsv:2")) == "0"  # not a missing id
    assert example_id(SimpleNamespace(id=7, source="dev.jsonl:1")) == "7"
    assert example_id(SimpleNamespace(id="", source="dev.tsv:5")) == 5  # an empty id cell
    assert example_id(SimpleNamespace(qid="56be4db0acb8001400a502ec", source="s.json:1")) == (
        "56be4db0acb8001400a502ec"
    )
    assert example_id(SimpleNamespace(source="test.txt:12")) == 12
