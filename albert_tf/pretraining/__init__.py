"""ALBERT pretraining (MLM + SOP) with tf.distribute.

`data` reads and validates create-pretraining-data shards, `losses` is the original objective in
replica-additive form, `optimizer` builds LAMB through tf-models-official, `strategy` names the
distribution strategies, and `trainer.pretrain` is the training loop behind `albert-tf pretrain`.
`evaluate.evaluate` scores a checkpoint on held-out shards (`albert-tf evaluate`) and
`check.run_check` is `albert-tf check`.
"""

from albert_tf.lazy import lazy_exports

_LAZY = {
    "PretrainSettings": "albert_tf.pretraining.settings",
    "PretrainResult": "albert_tf.pretraining.trainer",
    "pretrain": "albert_tf.pretraining.trainer",
    "make_strategy": "albert_tf.pretraining.strategy",
    "WorkerLost": "albert_tf.pretraining.preemption",
    "DivergenceError": "albert_tf.pretraining.guard",
    "CheckSettings": "albert_tf.pretraining.check",
    "run_check": "albert_tf.pretraining.check",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
