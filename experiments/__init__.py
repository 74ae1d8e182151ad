"""Resumable experiments with committed results (not tests, not benchmarks).

Each experiment is a module run from the repository root as `python -m experiments.NAME`; it
resumes where it stopped and writes small result files under `experiments/results/`, while
corpora, runs and downloads go under `data/` (ignored by git). The code the experiments share
lives in library modules of this package: `corpora` (the pretraining corpora from registry
packages), `rotten_tomatoes` (the downstream task and its fine-tuning), `history` (the
intermediate checkpoints that left the tree, taken from git history by digest), and the
experiments whose functions others reuse, imported by name. The package is not installed
with albert_tf: it runs from a checkout, and imports that checkout's `albert_tf`.
"""
