"""AdamW or LAMB from tf-models-official's OptimizerFactory, with the fine-tuning schedule.

tf-models-official 2.20 builds tf_keras (legacy) optimizers, matching our tf_keras models.
"""

from __future__ import annotations

from albert_tf.errors import ConfigError

OPTIMIZERS = ("adamw", "lamb")


def build_optimizer(name: str, learning_rate: float, steps: int, warmup: int, weight_decay: float):
    """AdamW or LAMB (tf-models-official) with linear warmup, then linear decay to 0."""
    from official.modeling.optimization import optimizer_factory
    from official.modeling.optimization.configs import optimization_config

    if name not in OPTIMIZERS:
        raise ConfigError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")
    if learning_rate <= 0:
        raise ConfigError(f"--learning-rate must be positive, got {learning_rate}")
    settings = {
        "optimizer": {
            "type": name,
            name: {
                "weight_decay_rate": weight_decay,
                "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"],
                "epsilon": 1e-6,
                "global_clipnorm": 1.0,
            },
        },
        "learning_rate": {
            "type": "polynomial",
            "polynomial": {
                "initial_learning_rate": learning_rate,
                "decay_steps": steps,
                "end_learning_rate": 0.0,
            },
        },
    }
    if warmup:
        settings["warmup"] = {"type": "linear", "linear": {"warmup_steps": warmup}}
    factory = optimizer_factory.OptimizerFactory(optimization_config.OptimizationConfig(settings))
    return factory.build_optimizer(factory.build_learning_rate())
