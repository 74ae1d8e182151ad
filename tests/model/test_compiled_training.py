"""The training step's compiled kernels (layers/compiled.py) leave its loss and gradients alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.convert.tf1 import load_tf1_checkpoint
from albert_tf.layers import compiled
from albert_tf.layers.dropout import seeded_dropout
from albert_tf.pretraining.losses import pretraining_sums, replica_loss
from tests import helpers

pytestmark = pytest.mark.slow


def _loss_and_gradients(fixture: Path, dtype: str, enabled: bool):
    """Loss and gradients of the pretraining loss (dropout seeded) on the fixture's checkpoint,
    with the compiled kernels on or off, and the names of the traced graph's functions."""
    config = AlbertConfig.from_json_file(fixture / "albert_config.json")
    policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    with helpers.mixed_precision(policy):
        model = load_tf1_checkpoint(fixture / "model.ckpt", config)
    inputs = helpers.make_inputs(config, batch=3, seq=12, seed=1, positions=4)
    rng = np.random.default_rng(2)
    batch = dict(
        inputs,
        masked_lm_ids=tf.constant(rng.integers(0, config.vocab_size, (3, 4)), tf.int32),
        masked_lm_weights=tf.constant([[1.0, 1.0, 1.0, 0.0]] * 3),
        sentence_order_label=tf.constant([0, 1, 1]),
        example_weight=tf.ones([3]),
    )
    layers = (model.encoder, model.mlm_head, model.sop_head)
    variables = [v for layer in layers for v in layer.trainable_variables]

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape, seeded_dropout(tf.constant([3, 4], tf.int64)):
            out = model.encoder(batch, training=True)
            mlm_logits = model.mlm_head(out["sequence_output"], batch["masked_lm_positions"])
            sop_logits = model.sop_head(out["pooled_output"])
            sums = pretraining_sums(mlm_logits, sop_logits, batch)
            loss = replica_loss(sums, sums["mlm_weight_sum"], sums["example_count"])["loss"]
        return loss, tape.gradient(loss, variables)

    with compiled.compiled_training(enabled):
        concrete = step.get_concrete_function(batch)
    functions = {f.signature.name for f in concrete.graph.as_graph_def().library.function}
    loss, grads = concrete(batch)
    return float(loss), [np.asarray(tf.convert_to_tensor(g)) for g in grads], functions


def _relative_errors(grads, reference) -> np.ndarray:
    """Each gradient's max abs error over the reference's largest magnitude, leaving out the
    gradients that are zero up to rounding (a bias that a LayerNorm cancels)."""
    largest = max(np.abs(r).max() for r in reference)
    errors = []
    for g, r in zip(grads, reference, strict=True):
        scale = np.abs(r).max()
        if scale < 1e-6 * largest:
            assert np.abs(g).max() < 1e-5 * largest
        else:
            errors.append(np.abs(g - r).max() / scale)
    return np.array(errors)


@pytest.mark.parametrize("name", ["albert_tf1_tiny", "albert_tf1_groups"])
def test_compiled_step_matches_plain_step(fixtures_dir: Path, name: str):
    fixture = fixtures_dir / name
    runs = {
        (dtype, enabled): _loss_and_gradients(fixture, dtype, enabled)
        for dtype in ("float32", "bfloat16")
        for enabled in (True, False)
    }
    compiled_kernels = {"_layer_norm_forward", "_layer_norm_backward"}
    if name == "albert_tf1_tiny":  # gelu; the groups fixture is relu
        compiled_kernels |= {"_bias_gelu_forward", "_bias_gelu_backward"}
    for (_, enabled), (_, _, functions) in runs.items():
        for kernel in compiled_kernels:
            assert any(kernel in f for f in functions) == enabled, kernel

    # float32: the same arithmetic in another order.
    loss, grads, _ = runs["float32", True]
    reference_loss, reference, _ = runs["float32", False]
    assert loss == pytest.approx(reference_loss, rel=1e-5)
    assert _relative_errors(grads, reference).max() < 2e-5

    # bfloat16: both steps round to bfloat16 (the plain one also the residual sums and the
    # GELU's intermediate values); against float32 the compiled step's errors are the plain
    # step's, up to that rounding noise (measured: max 2.1% vs 1.9% on the tiny fixture,
    # 9.9% vs 6.9% through the groups fixture's 12 relu blocks; means 0.75% vs 0.86%, 2.6%
    # vs 2.0%).
    loss, grads, _ = runs["bfloat16", True]
    plain_loss, plain_grads, _ = runs["bfloat16", False]
    assert loss == pytest.approx(reference_loss, rel=1e-3)
    assert plain_loss == pytest.approx(reference_loss, rel=1e-3)
    errors = _relative_errors(grads, reference)
    plain_errors = _relative_errors(plain_grads, reference)
    assert errors.max() <= 2 * plain_errors.max()
    assert errors.mean() <= 2 * plain_errors.mean()
