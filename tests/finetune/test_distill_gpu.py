"""experiments/distill_gpu.py, the distillation under torch for a GPU machine, held to
`albert-tf distill` on the CPU: the student's weights travel to transformers and back exactly,
the first steps' losses are distill's, and a run resumed from its checkpoint is the unbroken run.
The student is the shipped albert_en_mini; the teacher a tiny random BERT (test_distill's)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import cli
from albert_tf.checkpoint import load_checkpoint_dir
from albert_tf.distill.settings import DistillSettings
from albert_tf.distill.trainer import distill
from albert_tf.pretrained import checkpoint_dir
from experiments import distill_gpu
from tests.conftest import REPO
from tests.finetune.test_distill import sentences, write_bert_teacher

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# What a GPU machine lacks (tensorflow, tf_keras) or lacks without an install of albert_tf.
BLOCKED = ("tensorflow", "tf_keras", "albert_tf.preprocess", "albert_tf.export")
# Both paths run these; warmup 2 of 5 steps, so the first update has rate 0 and the others not.
RUN = dict(batch_size=8, max_seq_length=16, train_steps=5, warmup_steps=2, learning_rate=5e-4,
           seed=7, log_every=1)  # fmt: skip
# float32 on one CPU, two frameworks: the first 5 steps' losses differed by at most 8.9e-6
# (relative) with masked-LM and 2.4e-6 without. Planted faults moved them by 1.5e-3 or more:
# the clipping norm over the tables' summed rows (1.5e-3), Adam's epsilon 1e-8 (0.046), targets
# rescaled to norm 0.9 (0.24).
RTOL = 5e-5


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("distill_gpu")
    # distill() seeds, then resolves its init: a shipped model not yet in albert-tf's cache is
    # written there first, drawing random numbers before the projection's (see pack).
    checkpoint_dir("albert_en_mini")
    write_bert_teacher(root / "bert")
    (root / "texts.txt").write_text("\n".join(sentences(36, 3)) + "\n")
    return root


@pytest.fixture(scope="module")
def bundle(world):
    """A bundle of 6 steps with masked-LM, the teacher's outputs in float16 (as shipped)."""
    return pack(world, "bundle", 0.2, targets="float16", train_steps=6)


def pack(world, name, mlm_weight, targets="float32", **changes):
    """The bundle `name` for RUN (with `changes`) over world's texts and teacher cache."""
    run = RUN | changes
    args = ["pack", "--teacher", str(world / "bert"), "--unlabeled", str(world / "texts.txt"),
            "--teacher-cache", str(world / "cache"), "--bundle", str(world / name),
            "--targets", targets, "--mlm-weight", str(mlm_weight)]  # fmt: skip
    for key, value in run.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    assert distill_gpu.main(args) == 0
    return world / name


def train(bundle, output, *extra):
    args = ["train", str(bundle), "--output", str(output), "--device", "cpu", *extra]
    assert distill_gpu.main(args) == 0
    return json.loads((output / distill_gpu.STATE_FILE).read_text())


def reference_history(world, name, mlm_weight):
    """`albert-tf distill`'s per-step losses for RUN from albert_en_mini."""
    settings = DistillSettings(
        teacher=str(world / "bert"), unlabeled=(str(world / "texts.txt"),),
        output_dir=str(world / name), init="albert_en_mini",
        teacher_cache=str(world / "cache"), mlm_weight=mlm_weight, quiet=True, **RUN,
    )  # fmt: skip
    distill(settings, log=lambda line: None, progress=False)
    lines = (world / name / "run" / "history.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("mlm_weight", [0.2, 0.0])
def test_first_steps_are_distills(world, mlm_weight):
    """The same init, batches, masks and targets: the torch path's losses at steps 1-5 are
    distill's. Without masked-LM the word table's gradient is TensorFlow's per-token rows in
    the clipping norm, with it the whole table (`Trainer.global_norm`)."""
    ours = reference_history(world, f"reference_{mlm_weight}", mlm_weight)
    bundle = pack(world, f"bundle_{mlm_weight}", mlm_weight)
    theirs = train(bundle, world / f"torch_{mlm_weight}")["history"]
    keys = ["loss", "distill_loss", "cosine"] + (["mlm_loss"] if mlm_weight else [])
    assert [h["step"] for h in theirs] == [h["step"] for h in ours] == [1, 2, 3, 4, 5]
    for key in keys:
        np.testing.assert_allclose([h[key] for h in theirs], [h[key] for h in ours], rtol=RTOL,
                                   err_msg=key)  # fmt: skip
    # The clipping acted (the rate is 0 at step 1 and warm after), and the losses moved.
    assert theirs[1]["grad_norm"] > 1 and theirs[-1]["loss"] != theirs[0]["loss"]


def test_weights_travel_to_transformers_and_back_exactly(bundle, tmp_path):
    """albert_en_mini -> the bundle's transformers ALBERT -> a train checkpoint (0 steps) ->
    `albert-tf convert --hf-checkpoint`: the same weights, the same outputs; and transformers'
    model computes what ours does."""
    trainer = distill_gpu.Trainer(bundle, "cpu")
    trainer.save(tmp_path / "checkpoint")
    converted = tmp_path / "converted"
    assert cli.main(["convert", "--hf-checkpoint", str(tmp_path / "checkpoint"), "--output",
                     str(converted), "--quiet"]) == 0  # fmt: skip
    shipped, back = (
        load_checkpoint_dir(checkpoint_dir("albert_en_mini")),
        load_checkpoint_dir(converted),
    )
    ids = np.array([[2, 40, 41, 99, 3, 0], [2, 7, 3000, 15999, 12, 3]], np.int32)
    mask = (ids > 0).astype(np.int32)
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    a, b = shipped.encoder(inputs), back.encoder(inputs)
    for key in ("pooled_output", "sequence_output"):
        assert np.abs(a[key].numpy() - b[key].numpy()).max() == 0.0, key
    positions = tf.constant([[1, 2], [3, 4]])
    mlm = (
        shipped.mlm_head(a["sequence_output"], positions),
        back.mlm_head(b["sequence_output"], positions),
    )
    assert np.abs(mlm[0].numpy() - mlm[1].numpy()).max() == 0.0
    with torch.no_grad():
        out = trainer.model.albert(input_ids=torch.as_tensor(ids, dtype=torch.long),
                                   attention_mask=torch.as_tensor(mask, dtype=torch.long))  # fmt: skip
    pooled = out.pooler_output.numpy()
    sequence = out.last_hidden_state.numpy()
    assert np.abs(pooled - a["pooled_output"].numpy()).max() < 1e-5
    assert np.abs((sequence - a["sequence_output"].numpy())[mask > 0]).max() < 1e-4
    # Weight decay spares the same weights here as TensorFlow's names do.
    from albert_tf.convert.hf import target_of

    for name in trainer.params:
        if name.startswith(("albert.", "predictions.")):
            ours = target_of(name.removeprefix("albert."))[0]
            assert distill_gpu.decays(name) == distill_gpu.decays(ours), (name, ours)


@pytest.mark.slow
def test_resumed_run_is_the_unbroken_run(bundle, tmp_path):
    """3 steps, a checkpoint, 3 more from it = 6 steps at once. The second half runs as on the
    GPU machine: a process without TensorFlow, albert_tf not installed (its `preprocess` and
    `export`, which the install maps in, absent)."""
    whole = train(bundle, tmp_path / "whole")
    train(bundle, tmp_path / "half", "--max-steps", "3")
    args = ["train", str(bundle), "--output", str(tmp_path / "resumed"), "--device", "cpu",
            "--resume", str(tmp_path / "half")]  # fmt: skip
    blocked = ", ".join(f"'{name}': None" for name in BLOCKED)
    code = (f"import sys; sys.modules.update({{{blocked}}}); "
            "from experiments.distill_gpu import main; sys.exit(main(sys.argv[1:]))")  # fmt: skip
    subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, check=True)
    resumed = json.loads((tmp_path / "resumed" / distill_gpu.STATE_FILE).read_text())
    assert resumed["step"] == whole["step"] == 6
    assert [c["from_step"] for c in resumed["calls"]] == [0, 3]
    for ours, theirs in zip(resumed["history"], whole["history"], strict=True):
        assert ours["step"] == theirs["step"]
        np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-6)
    # The record says where each call ran; every file fits what a call brings back (16 MiB).
    record = distill_gpu.record(bundle, tmp_path / "resumed", tmp_path / "record.json")
    assert [c["device"] for c in record["calls"]] == ["cpu", "cpu"]
    assert all(c["hardware"] and c["seconds"] >= 0 for c in record["calls"])
    sizes = record["checkpoint_bytes"]
    assert max(v for k, v in sizes.items() if k != "total") < 16 << 20, sizes
