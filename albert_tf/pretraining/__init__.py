"""ALBERT pretraining (MLM + SOP) with tf.distribute.

`data` reads and validates create-pretraining-data shards, `losses` is the original objective in
replica-additive form, `optimizer` builds LAMB through tf-models-official, `strategy` names the
distribution strategies, and `trainer.pretrain` is the training loop behind `albert-tf pretrain`.
`evaluate.evaluate` scores a checkpoint on held-out shards (`albert-tf evaluate`) and
`check.run_check` is `albert-tf check`.
"""

from albert_tf.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".settings": "PretrainSettings",
        ".trainer": "PretrainResult pretrain",
        ".strategy": "make_strategy",
        ".preemption": "WorkerLost",
        ".guard": "DivergenceError",
        ".check": "CheckSettings run_check",
    },
    globals(),
)
