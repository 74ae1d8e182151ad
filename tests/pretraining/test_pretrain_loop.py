"""The compiled pretraining step (loop.py): seeded dropout, XLA, accumulation, time budget, check.

Bit-exact comparisons that need op determinism run in subprocesses (test_pretrain_distributed).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from albert_tf.cli import main as cli_main
from albert_tf.dtypes import keras_policy
from albert_tf.layers.dropout import Dropout, fold_seed, seeded_dropout
from albert_tf.models import AlbertPretrainingModel
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.loop import SUM_KEYS, TrainLoop
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.pretraining.trainer import distribute, pretrain
from tests import helpers

SEQ, PREDICTIONS = 16, 4


def test_dropout_is_a_function_of_the_seed_and_the_call_site():
    layer = Dropout(0.5)
    x = tf.ones([8, 32])
    with seeded_dropout(fold_seed(7, 3)):
        first, second = layer(x, training=True), layer(x, training=True)
    with seeded_dropout(fold_seed(7, 3)):
        again = layer(x, training=True)
    with seeded_dropout(fold_seed(7, 4)):
        other_step = layer(x, training=True)
    np.testing.assert_array_equal(first, again)  # same seed, same call: same mask
    assert not np.array_equal(first, second)  # the second call site draws its own mask
    assert not np.array_equal(first, other_step)
    kept = first.numpy() != 0
    assert 0.3 < kept.mean() < 0.7 and np.all(first.numpy()[kept] == 2.0)  # scaled by 1/(1-p)
    # Outside the context, and at inference, it is Keras' Dropout.
    np.testing.assert_array_equal(layer(x, training=False), x)
    assert not np.array_equal(layer(x, training=True), layer(x, training=True))


def test_seeded_model_replays_the_same_masks_per_layer():
    config = helpers.tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = AlbertPretrainingModel(config)
    inputs = helpers.make_inputs(config, batch=2, seq=8, positions=2)

    def run(step):
        with seeded_dropout(fold_seed(1, step)):
            return model(inputs, training=True)["encoder_outputs"]

    first, again, later = run(5), run(5), run(6)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[-1], later[-1])
    # The shared block draws a different mask in each of the layers it is applied in.
    clean = model(inputs, training=False)["encoder_outputs"]
    assert not np.array_equal(first[0] - clean[0], first[2] - clean[2])


def _loop_losses(config, dtype, accum, jit, steps=2, batch=8):
    """Per-step total losses of `steps` steps of a fresh TrainLoop on synthetic batches."""
    keras.utils.set_random_seed(1)  # tf_keras': it also resets tf_keras' seed generator
    strategy = tf.distribute.get_strategy()
    with keras_policy(dtype):
        loop = TrainLoop(
            strategy,
            config,
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDICTIONS,
            dtype=dtype,
            optimizer_args=(1e-2, 10, 0),
            steps_per_loop=steps,
            grad_accum_steps=accum,
            jit_compile=jit,
            seed=3,
        )
        stream = distribute(
            strategy,
            lambda **kw: data_lib.synthetic_dataset(
                config.vocab_size, SEQ, PREDICTIONS, batch, seed=2, **kw
            ),
        )
        rows = loop.run(iter(stream), steps)
    sums = {k: rows[:, i] for i, k in enumerate(SUM_KEYS)}
    return (
        sums["mlm_ce_sum"] / sums["mlm_weight_sum"]
        + sums["sentence_ce_sum"] / sums["example_count"]
    )


def _loss(sums) -> float:
    return float(
        sums["mlm_ce_sum"] / sums["mlm_weight_sum"]
        + sums["sentence_ce_sum"] / sums["example_count"]
    )


def _gradient_step(config, dtype, accum, jit):
    """(loss, gradients) of the part of the replica step that --jit-compile compiles: the
    forward and backward passes over the micro-batches, on one fixed batch."""
    keras.utils.set_random_seed(1)  # tf_keras': it also resets tf_keras' seed generator
    with keras_policy(dtype):
        loop = TrainLoop(
            tf.distribute.get_strategy(),
            config,
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDICTIONS,
            dtype=dtype,
            optimizer_args=(1e-2, 10, 0),
            steps_per_loop=1,
            grad_accum_steps=accum,
        )
        batch = next(iter(data_lib.synthetic_dataset(100, SEQ, PREDICTIONS, 8, seed=2)))
        step = tf.function(loop._accumulated_gradients, jit_compile=jit)
        grads, sums = step(batch, tf.constant(32.0), tf.constant(8.0), fold_seed(1, 2))
    loss = sums["mlm_ce_sum"] / 32.0 + sums["sentence_ce_sum"] / 8.0
    return float(loss), [g.numpy() for g in grads]


@pytest.mark.slow
@pytest.mark.parametrize("accum", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shared", ["all", "attention", "ffn", "none"])
def test_xla_step_matches_the_plain_step(shared, dtype, accum):
    config = helpers.tiny_pretraining_config(vocab_size=100).replace(shared_params=shared)
    plain_loss, plain_grads = _gradient_step(config, dtype, accum, jit=False)
    xla_loss, xla_grads = _gradient_step(config, dtype, accum, jit=True)
    assert xla_loss == pytest.approx(plain_loss, abs=1e-4 if dtype == "float32" else 1e-2)
    if dtype == "float32":  # within 1e-4 of each variable's largest gradient
        for xla, plain in zip(xla_grads, plain_grads, strict=True):
            np.testing.assert_allclose(xla, plain, atol=1e-4 * max(np.abs(plain).max(), 1e-3))
    else:  # bfloat16's 8-bit mantissas, summed in another order by XLA's fusions: compare the
        # whole gradient (tiny ones, such as the query kernel's ~1e-6, are mostly rounding)
        xla, plain = (np.concatenate([g.ravel() for g in gs]) for gs in (xla_grads, plain_grads))
        assert np.dot(xla, plain) / (np.linalg.norm(xla) * np.linalg.norm(plain)) > 0.999
        np.testing.assert_allclose(xla, plain, atol=5e-2 * np.abs(plain).max())


@pytest.mark.slow
def test_xla_training_with_dropout_and_accumulation_runs_and_replays():
    """The whole loop with XLA: finite, and the same seeded dropout masks on a rerun (XLA's
    stateless random bits differ from the TF kernels', so not the plain loop's masks)."""
    config = helpers.tiny_pretraining_config(vocab_size=100).replace(
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1
    )
    first = _loop_losses(config, "bfloat16", 2, jit=True)
    np.testing.assert_array_equal(_loop_losses(config, "bfloat16", 2, jit=True), first)
    assert np.all(np.isfinite(first))
    np.testing.assert_allclose(first, _loop_losses(config, "bfloat16", 2, jit=False), atol=0.1)


@pytest.mark.slow
def test_accumulated_micro_batches_equal_one_batch():
    config = helpers.tiny_pretraining_config(vocab_size=100)
    whole = _loop_losses(config, "float32", 1, jit=False, steps=3)
    for accum in (2, 4):
        np.testing.assert_allclose(
            _loop_losses(config, "float32", accum, jit=False, steps=3), whole, atol=1e-5
        )


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("loop_data")
    helpers.write_pretraining_records(root / "a.tfrecord", 32, vocab_size=100, seed=3)
    return str(root / "a.tfrecord")


@pytest.mark.slow
def test_loops_are_cut_at_checkpoints_and_logs_keep_their_steps(shards, tmp_path):
    settings = PretrainSettings(
        shards,
        helpers.tiny_pretraining_config(vocab_size=100),
        str(tmp_path / "run"),
        train_steps=11,
        batch_size=4,
        save_every=4,
        log_every=3,
        steps_per_loop=3,
        dtype="float32",
        progress=False,
    )
    result = pretrain(settings)
    # Loops: 3, 1 (to the checkpoint at 4), 3, 1 (checkpoint at 8), 3 (the end at 11).
    assert len(result.loop_seconds) == 5 and result.steps_per_loop == 3
    assert [h["step"] for h in result.train_history] == [3, 6, 9, 11]
    assert sorted(p.name for p in (tmp_path / "run").glob("ckpt-*.index"))[-1] == "ckpt-8.index"
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith("ckpt-11")
    record = json.loads((tmp_path / "run" / "pretrain_run.json").read_text())
    assert record["steps_per_loop"] == 3 and record["train_steps"] == 11
    assert record["max_seq_length"] == SEQ


@pytest.mark.slow
def test_minutes_stop_within_one_loop_of_the_budget(shards, tmp_path):
    budget = 0.4  # 24 s: the first loop (which traces the step) takes 6-10 s on a 2-core VM
    settings = PretrainSettings(
        shards,
        helpers.tiny_pretraining_config(vocab_size=100),
        str(tmp_path / "run"),
        train_steps=10**6,
        batch_size=4,
        save_every=10**5,
        eval_every=10**5,
        steps_per_loop=20,
        minutes=budget,
        dtype="float32",
        progress=False,
        # Memorizing 100-piece toy data at a constant rate, the loss swings from 0.02 to 5: the
        # divergence guard would (rightly) roll back, which this timing test is not about.
        spike_factor=float("inf"),
    )
    result = pretrain(settings)
    assert result.stopped_early and result.step % 20 == 0 and len(result.loop_seconds) > 2
    one_loop = max(result.loop_seconds[1:])  # the first loop also traces the step
    assert result.stopped_at <= budget * 60 + one_loop, (result.stopped_at, one_loop)
    assert result.last_save_seconds < one_loop + 1.0  # the checkpoint after the stop
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith(f"ckpt-{result.step}")


@pytest.mark.slow
def test_check_command_runs_every_stage(tmp_path, capsys):
    report = tmp_path / "check.json"
    args = ["check", "--config", "tiny", "--batch-size", "4", "--max-seq-length", "32"]
    args += ["--steps-per-loop", "2", "--loops", "1", "--dtype", "float32", "--json", str(report)]
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out
    written = json.loads(report.read_text())
    stages = [s["name"] for s in written["stages"]]
    assert stages == ["strategy", "dtype", "build", "compile", "train", "host", "checkpoint"]
    assert written["ok"] and written["figures"]["examples_per_second"] > 0
    assert written["figures"]["host_seconds_per_step"] >= 0


def test_check_command_names_the_failing_stage(capsys):
    args = ["check", "--config", "tiny", "--batch-size", "4", "--max-seq-length", "32"]
    assert cli_main([*args, "--strategy", "multi_worker"]) == 2  # no TF_CONFIG: bad input
    assert "TF_CONFIG" in capsys.readouterr().err
    assert cli_main([*args, "--grad-accum-steps", "3"]) == 2
    assert "--grad-accum-steps" in capsys.readouterr().err
    assert cli_main([*args, "--strategy", "tpu", "--tpu", "local"]) == 1  # no TPU here
    out = capsys.readouterr().out
    assert "strategy    FAILED" in out and "check FAILED" in out


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--steps-per-loop", "0"], "--steps-per-loop must be positive"),
        (["--grad-accum-steps", "3"], "--batch-size 4 must be divisible by --grad-accum-steps 3"),
        (["--keep", "1"], "--keep must be at least 2"),
        (["--preemption-grace", "0"], "--preemption-grace must be a positive number of seconds"),
        (["--learning-rate", "nan"], "--learning-rate must be a positive number"),
        (["--train-steps", "-1"], "--train-steps must be positive"),
        (["--minutes", "0"], "--minutes must be a positive number"),
    ],
)
def test_bad_loop_settings_exit_2_before_writing(shards, tmp_path, capsys, flags, message):
    output = tmp_path / "out"
    args = ["pretrain", "--data", shards, "--config", "tiny", "--output", str(output)]
    args += ["--train-steps", "2", "--batch-size", "4", "--quiet", *flags]
    assert cli_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not output.exists()
