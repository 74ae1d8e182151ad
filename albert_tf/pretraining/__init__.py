"""ALBERT pretraining (MLM + SOP) with tf.distribute.

`data` reads and validates create-pretraining-data shards, `losses` is the original objective in
replica-additive form, `optimizer` builds LAMB through tf-models-official, `strategy` names the
distribution strategies, and `trainer.pretrain` is the training loop behind `albert-tf pretrain`.
"""
