"""oneDNN's fused CPU kernels (`albert_tf.layers.fused`): same outputs as the original, only in
traced inference graphs inside `fused_cpu_inference()`, never in a saved SavedModel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.convert.tf1 import load_tf1_checkpoint
from albert_tf.encoder import AlbertEncoder
from albert_tf.layers import fused
from tests import helpers

pytestmark = pytest.mark.skipif(
    not fused.onednn_kernels_available(), reason="this TensorFlow does not run oneDNN kernels"
)
FUSED_OP = "_MklLayerNorm"


def _op_types(function: tf.types.experimental.ConcreteFunction) -> set[str]:
    types = {op.type for op in function.graph.get_operations()}
    for inner in function.graph._functions.values():
        types |= {node.op for node in inner.cached_definition.node_def}
    return types


def _traced(encoder: AlbertEncoder, inputs: dict, enabled: bool):
    call = tf.function(lambda x: encoder(x, training=False))
    with fused.fused_cpu_inference(enabled) as on:
        assert on == enabled
        concrete = call.get_concrete_function(inputs)
    return concrete, concrete(inputs)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", ["albert_tf1_tiny", "albert_tf1_groups"])
def test_fused_encoder_matches_the_original(fixtures_dir: Path, name: str, policy: str):
    fixture = fixtures_dir / name
    config = AlbertConfig.from_json_file(fixture / "albert_config.json")
    inputs, data = helpers.fixture_reference(fixture)
    with helpers.mixed_precision(policy):
        encoder = load_tf1_checkpoint(fixture / "model.ckpt", config).encoder
    concrete, out = _traced(encoder, inputs, enabled=True)
    assert FUSED_OP in _op_types(concrete)
    pairs = [
        (out["sequence_output"], data["sequence_output"]),
        (out["pooled_output"], data["pooled_output"]),
        *zip(out["encoder_outputs"], data["encoder_outputs"], strict=True),
    ]
    for actual, expected in pairs:
        if policy == "float32":
            np.testing.assert_allclose(np.asarray(actual), expected, atol=1e-5, rtol=1e-5)
        else:
            helpers.assert_bfloat16_close(actual, expected)


def test_fused_kernels_only_where_requested():
    encoder = AlbertEncoder(helpers.tiny_config())
    inputs = helpers.make_inputs(encoder.config, batch=2, seq=8)
    plain, expected = _traced(encoder, inputs, enabled=False)
    assert FUSED_OP not in _op_types(plain)
    fast, actual = _traced(encoder, inputs, enabled=True)
    assert FUSED_OP in _op_types(fast)
    helpers.assert_outputs_close(actual, expected, atol=1e-5)
    with fused.fused_cpu_inference():
        assert not fused.active()  # eager execution keeps the portable ops
        eager = encoder(inputs, training=False)
    helpers.assert_outputs_close(eager, expected, atol=1e-5)


@pytest.mark.slow
def test_saved_model_never_holds_fused_kernels(tmp_path: Path):
    encoder = AlbertEncoder(helpers.tiny_config())
    inputs = helpers.make_inputs(encoder.config, batch=2, seq=8)
    module = tf.Module()
    module.encoder = encoder
    module.serve = tf.function(lambda x: encoder(x, training=False)["pooled_output"])
    with fused.fused_cpu_inference():
        expected = module.serve(inputs)
        assert FUSED_OP in _op_types(module.serve.get_concrete_function(inputs))
        tf.saved_model.save(module, str(tmp_path))
    saved = (tmp_path / "saved_model.pb").read_bytes()
    assert b"_MklLayerNorm" not in saved
    restored = tf.saved_model.load(str(tmp_path))
    helpers.assert_outputs_close(restored.serve(inputs), expected, atol=1e-5)


def test_prediction_batches_run_fused():
    from albert_tf.finetune.inference import batched_outputs
    from albert_tf.finetune.models import TaskHead, TaskModel
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.tasks import get_task

    encoder = AlbertEncoder(helpers.tiny_config())
    task = get_task(
        FinetuneSettings("classify", "train.tsv", "random", "out", labels=("a", "b", "c"))
    )
    model = TaskModel(encoder, TaskHead(num_outputs=3), task)
    inputs = {k: v.numpy() for k, v in helpers.make_inputs(encoder.config, batch=5).items()}
    outputs = batched_outputs(model, inputs, batch_size=2)
    first_batch = {k: v[:2] for k, v in inputs.items()}  # the shape it was traced for
    assert FUSED_OP in _op_types(model._inference_function.get_concrete_function(first_batch))
    expected = model(inputs, training=False)["logits"]
    np.testing.assert_allclose(outputs["logits"], expected, atol=1e-5)


def test_batches_of_every_length_trace_the_function_once():
    """Batches cut at 16, 48, 80, 112 and 128 tokens: a function traced per length met five
    shapes in five calls, and TensorFlow warned of retracing (a `distill` teacher's pass over
    1,500 tweets printed it)."""
    from albert_tf.finetune.inference import batched_outputs
    from albert_tf.finetune.models import TaskHead, TaskModel
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.tasks import get_task

    encoder = AlbertEncoder(helpers.tiny_config(max_position_embeddings=128))
    task = get_task(FinetuneSettings("classify", "train.tsv", "random", "out", labels=("a", "b")))
    model = TaskModel(encoder, TaskHead(num_outputs=2), task)
    lengths = np.repeat([10, 40, 70, 100, 128], 2)  # two rows a batch, one longest each
    ids = np.random.default_rng(0).integers(5, 100, size=(len(lengths), 128)).astype(np.int32)
    mask = (np.arange(128)[None, :] < lengths[:, None]).astype(np.int32)
    inputs = {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": 0 * mask}
    # Built first, as every model that predicts is (a function that creates the weights is
    # traced twice).
    expected = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)["logits"]
    outputs = batched_outputs(model, inputs, batch_size=2)
    assert model._inference_function.experimental_get_tracing_count() == 1  # 5 by shape
    np.testing.assert_allclose(outputs["logits"], expected, atol=1e-5)
