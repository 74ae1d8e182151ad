"""Distillation: an ALBERT student trained on unlabeled text to match a teacher's outputs."""
