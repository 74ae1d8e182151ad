"""Pretraining: pretrain and evaluate, the training loop, distribution, resume and preemption, the
divergence guard, the ablation runner."""
