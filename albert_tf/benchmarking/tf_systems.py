"""TensorFlow systems: albert-tf, tf-models-official, keras-hub, and raw TF matmul.

Each `build_*` returns `(step, note)`: `step()` runs one iteration to completion. Only called
inside a worker process, after `configure_threads`, with the dtype policy set by the builder.
tf-models-official, Keras 3 and keras-hub are imported by their own builders: a worker imports
only the libraries of the system it times.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tf_keras as keras

from albert_tf.benchmarking.cases import Shape, make_batch, matmul_dims
from albert_tf.benchmarking.machine import onednn_enabled
from albert_tf.config import AlbertConfig
from albert_tf.convert.keras_hub import backbone_config
from albert_tf.encoder import AlbertEncoder
from albert_tf.layers.fused import fused_cpu_inference
from albert_tf.models import AlbertPretrainingModel
from albert_tf.optimizer import build_optimizer
from albert_tf.pretraining.losses import pretraining_sums, replica_loss

Step = Callable[[], object]
ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
TRAIN_KEYS = (
    *ENCODER_KEYS,
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "sentence_order_label",
    "example_weight",
)


def configure_threads(intra: int, inter: int) -> None:
    """TF thread pools; must run before the first op."""
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)


def onednn_in_use() -> bool:
    """Whether this process's TensorFlow runs its oneDNN kernels (TF_ENABLE_ONEDNN_OPTS and the
    CPU kind decide; TensorFlow leaves them off on CPUs without AVX-512 unless asked)."""
    return onednn_enabled()


def _tensors(config: AlbertConfig, shape: Shape, keys: tuple[str, ...]) -> dict[str, tf.Tensor]:
    arrays = make_batch(config, shape)
    return {k: tf.constant(arrays[k]) for k in keys}


def _set_tf_keras_policy(dtype: str) -> None:
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")


def _inference_step(encoder: Callable, inputs: dict[str, tf.Tensor]) -> Step:
    @tf.function(reduce_retracing=True)
    def infer(inputs):
        out = encoder(inputs, training=False)
        return out["sequence_output"], out["pooled_output"]

    def step():
        return infer(inputs)[1].numpy()

    return step


def train_function(
    forward: Callable,
    variables: list[tf.Variable],
    jit_compile: bool = False,
    optimizer: str = "adam",
) -> tf.types.experimental.PolymorphicFunction:
    """The train case's step as a `tf.function(batch) -> loss`: Adam (learning rate 1e-4) on the
    original ALBERT pretraining loss (weighted MLM mean + SOP mean); with `optimizer="lamb"`,
    pretrain's optimizer instead (LAMB, weight decay, global-norm clipping). `forward(batch)`
    returns `(mlm_logits, sop_logits)`; `jit_compile` compiles the step with XLA (the GPU
    export, benchmarks/gpu/)."""
    if optimizer == "lamb":
        optimizer = build_optimizer(1e-4, train_steps=10_000, warmup_steps=0)
    else:
        optimizer = keras.optimizers.Adam(learning_rate=1e-4)

    @tf.function(reduce_retracing=True, jit_compile=jit_compile)
    def train(batch):
        with tf.GradientTape() as tape:
            mlm_logits, sop_logits = forward(batch)
            sums = pretraining_sums(mlm_logits, sop_logits, batch)
            loss = replica_loss(sums, sums["mlm_weight_sum"], sums["example_count"])["loss"]
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    return train


def _train_step(
    forward: Callable,
    variables: list[tf.Variable],
    batch: dict[str, tf.Tensor],
    optimizer: str = "adam",
) -> Step:
    train = train_function(forward, variables, optimizer=optimizer)

    def step():
        return train(batch).numpy()

    return step


# === albert-tf ===


def ours_train_forward(config: AlbertConfig) -> tuple[Callable, list[tf.Variable]]:
    """`(forward, variables)` of our train case: `AlbertPretrainingModel` under the current dtype
    policy, `forward(batch) -> (mlm_logits, sop_logits)` in training mode."""
    model = AlbertPretrainingModel(config)

    def forward(batch):
        out = model(batch, training=True)
        return out["mlm_logits"], out["sop_logits"]

    return forward, model.trainable_variables


def build_ours(
    config: AlbertConfig, dtype: str, case: str, shape: Shape, optimizer: str = "adam"
) -> tuple[Step, str]:
    """Our encoder (or, for the train case, pretraining model and `optimizer`: see
    train_function)."""
    _set_tf_keras_policy(dtype)
    note = "tf_keras mixed_bfloat16 policy" if dtype == "bfloat16" else ""
    if case == "train":
        forward, variables = ours_train_forward(config)
        batch = _tensors(config, shape, TRAIN_KEYS)
        return _train_step(forward, variables, batch, optimizer), note
    encoder = AlbertEncoder(config)
    step = _inference_step(encoder, _tensors(config, shape, ENCODER_KEYS))
    with fused_cpu_inference() as fused:
        step()  # traces the function, as `albert-tf predict` does
    if fused:
        note = ", ".join(filter(None, [note, "oneDNN fused LayerNorm and softmax"]))
    return step, note


# === tf-models-official ===


def _gelu_tanh(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.gelu(x, approximate=True)


def build_tfm(config: AlbertConfig, dtype: str, case: str, shape: Shape) -> tuple[Step, str]:
    """`official.nlp.modeling.networks.AlbertEncoder`; training adds tfm's `MaskedLM` (tied to its
    embedding table) and a dense SOP layer on the pooled output."""
    # start-up: tf-models-official takes seconds to import, and only this system times it
    from official.nlp.modeling import layers, networks

    _set_tf_keras_policy(dtype)
    note = "tf_keras mixed_bfloat16 policy" if dtype == "bfloat16" else ""

    def init():
        return keras.initializers.TruncatedNormal(stddev=config.initializer_range)

    encoder = networks.AlbertEncoder(
        vocab_size=config.vocab_size,
        embedding_width=config.embedding_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        intermediate_size=config.intermediate_size,
        activation=_gelu_tanh,
        dropout_rate=config.hidden_dropout_prob,
        attention_dropout_rate=config.attention_probs_dropout_prob,
        initializer=init(),
        dict_outputs=True,
    )
    if case != "train":
        return _inference_step(encoder, _tensors(config, shape, ENCODER_KEYS)), note
    mlm = layers.MaskedLM(
        embedding_table=encoder.get_embedding_table(), activation=_gelu_tanh, initializer=init()
    )
    sop = keras.layers.Dense(2, kernel_initializer=init())

    def forward(batch):
        out = encoder({k: batch[k] for k in ENCODER_KEYS}, training=True)
        mlm_logits = mlm(out["sequence_output"], masked_positions=batch["masked_lm_positions"])
        return mlm_logits, sop(out["pooled_output"])

    batch = _tensors(config, shape, TRAIN_KEYS)
    forward(batch)  # creates the head variables
    variables = encoder.trainable_variables + mlm.trainable_variables + sop.trainable_variables
    return _train_step(forward, variables, batch), note


# === keras-hub (Keras 3, TensorFlow backend) ===


def build_kerashub(config: AlbertConfig, dtype: str, case: str, shape: Shape) -> tuple[Step, str]:
    import keras
    import keras_hub

    keras.config.set_dtype_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    note = "Keras 3 mixed_bfloat16 policy, tf.function" if dtype == "bfloat16" else "tf.function"
    backbone = keras_hub.models.AlbertBackbone(**backbone_config(config))
    arrays = make_batch(config, shape)
    inputs = dict(
        token_ids=tf.constant(arrays["input_word_ids"]),
        segment_ids=tf.constant(arrays["input_type_ids"]),
        padding_mask=tf.constant(arrays["input_mask"]),
    )

    @tf.function(reduce_retracing=True)
    def infer(inputs):
        out = backbone(inputs, training=False)
        return out["sequence_output"], out["pooled_output"]

    def step():
        return infer(inputs)[1].numpy()

    return step, note


# === the machine: TF matmul at the FFN shape ===


def build_tf_matmul(config: AlbertConfig, dtype: str, shape: Shape) -> tuple[Step, str]:
    m, k, n = matmul_dims(config, shape)
    rng = np.random.default_rng(0)
    tf_dtype = tf.bfloat16 if dtype == "bfloat16" else tf.float32
    a = tf.cast(tf.constant(rng.standard_normal((m, k), np.float32)), tf_dtype)
    b = tf.cast(tf.constant(rng.standard_normal((k, n), np.float32) / math.sqrt(k)), tf_dtype)
    matmul = tf.function(tf.matmul)

    def step():
        return matmul(a, b)[:1, :1].numpy()

    return step, f"tf.matmul [{m},{k}]x[{k},{n}]"
