"""LAMB or AdamW with linear warmup and linear decay, built by tf-models-official's
OptimizerFactory: the one optimizer builder of pretraining (LAMB) and fine-tuning (either), below
both. tf-models-official is imported when an optimizer is built, so the settings modules can
take `OPTIMIZERS` from here without loading TensorFlow.

Why no TF_USE_LEGACY_KERAS: tf-models-official 2.20 imports `tf_keras` explicitly everywhere in
`official.modeling.optimization` (never `tf.keras`, which is Keras 3 in TF 2.20), and its LAMB is
a `tf_keras.optimizers.legacy.Optimizer`. Our models are tf_keras models, so the optimizer and
the variables it updates come from the same Keras whatever that variable says; the legacy
optimizer also aggregates gradients across replicas inside `apply_gradients` and clips them by
global norm AFTER that aggregation, which is what a distributed custom loop needs.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from albert_tf.errors import ConfigError

WEIGHT_DECAY_RATE = 0.01
EXCLUDE_FROM_WEIGHT_DECAY = ["LayerNorm", "layer_norm", "bias"]
CLIP_NORM = 1.0
OPTIMIZERS = ("lamb", "adamw")

if TYPE_CHECKING:
    from official.modeling.optimization.configs import optimization_config


def optimization_settings(
    learning_rate: float,
    train_steps: int,
    warmup_steps: int,
    name: str = "lamb",
    weight_decay: float = WEIGHT_DECAY_RATE,
) -> optimization_config.OptimizationConfig:
    """The original ALBERT recipe as a tf-models-official OptimizationConfig.

    `name` (LAMB for pretraining, LAMB or AdamW for fine-tuning) with beta 0.9/0.999, eps 1e-6,
    `weight_decay` except on LayerNorm and biases, global-norm clipping 1.0; learning rate:
    polynomial (power 1) decay from `learning_rate` to 0 over `train_steps`, overridden during
    the first `warmup_steps` by a linear ramp from 0 (to the decayed rate at `warmup_steps`:
    tf-models-official's LinearWarmup, continuous where the original ramped to the peak and then
    jumped down). ConfigError naming the flag for a value out of range.
    """
    from official.modeling.optimization.configs import optimization_config

    if name not in OPTIMIZERS:
        raise ConfigError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ConfigError(f"--learning-rate must be positive, got {learning_rate}")
    if train_steps <= 0:
        raise ConfigError(f"train steps must be positive, got {train_steps}")
    if not 0 <= warmup_steps <= train_steps:
        raise ConfigError(f"warmup steps must be in [0, {train_steps}], got {warmup_steps}")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ConfigError(f"--weight-decay must be a number >= 0, got {weight_decay}")
    settings = {
        "optimizer": {
            "type": name,
            name: {
                "weight_decay_rate": weight_decay,
                "exclude_from_weight_decay": EXCLUDE_FROM_WEIGHT_DECAY,
                "epsilon": 1e-6,
                "global_clipnorm": CLIP_NORM,
            },
        },
        "learning_rate": {
            "type": "polynomial",
            "polynomial": {
                "initial_learning_rate": learning_rate,
                "decay_steps": train_steps,
                "end_learning_rate": 0.0,
                "power": 1.0,
            },
        },
    }
    if warmup_steps:
        settings["warmup"] = {"type": "linear", "linear": {"warmup_steps": warmup_steps}}
    return optimization_config.OptimizationConfig(settings)


def build_optimizer(
    learning_rate: float,
    train_steps: int,
    warmup_steps: int,
    dtype: str = "float32",
    *,
    name: str = "lamb",
    weight_decay: float = WEIGHT_DECAY_RATE,
    lr_scale=None,
):
    """The optimizer of `optimization_settings` (tf_keras legacy) with its schedule; float16
    wraps it in loss scaling. `lr_scale` (a float32 tf.Variable, not checkpointed by the
    optimizer) multiplies the schedule: pretraining's divergence guard lowers it.

    Create it inside the distribution strategy's scope.
    """
    import tf_keras as keras
    from official.modeling.optimization import optimizer_factory

    factory = optimizer_factory.OptimizerFactory(
        optimization_settings(learning_rate, train_steps, warmup_steps, name, weight_decay)
    )
    schedule = factory.build_learning_rate()
    if lr_scale is not None:
        schedule = scaled_schedule(schedule, lr_scale)
    optimizer = factory.build_optimizer(schedule)
    if dtype == "float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


@functools.cache
def _scaled_schedule_class() -> type:
    """ScaledSchedule, defined on first use (tf_keras is imported only when an optimizer is)."""
    import tf_keras as keras

    class ScaledSchedule(keras.optimizers.schedules.LearningRateSchedule):
        """`schedule(step) * scale`, with `scale` a variable the host may lower mid-run."""

        def __init__(self, schedule, scale) -> None:
            self.schedule = schedule
            self.scale = scale

        def __call__(self, step):
            return self.schedule(step) * self.scale

        def get_config(self) -> dict:
            return {"schedule": self.schedule.get_config(), "scale": float(self.scale.numpy())}

    return ScaledSchedule


def scaled_schedule(schedule, scale):
    """A learning-rate schedule that multiplies `schedule` by the variable `scale`."""
    return _scaled_schedule_class()(schedule, scale)
