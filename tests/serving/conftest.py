"""What the serving tests share: the serving environment and a tiny classifier exported for
Triton, each made once per session."""

from __future__ import annotations

import pytest

from tests import helpers


@pytest.fixture(scope="session")
def serve_env():
    from albert_tf.cli import main
    from albert_tf.runtimes.triton.serve_env import default_env_dir

    assert main(["serve", "--create-env"]) == 0
    return default_env_dir()


@pytest.fixture(scope="session")
def finetuned(tmp_path_factory, serve_env):
    """A tiny classifier fine-tuned, exported with --triton, and its directory."""
    from albert_tf.cli import main

    root = tmp_path_factory.mktemp("serve")
    rows = [(f"the film {w} was {m}", label) for w, m, label in
            [("plot", "great", "pos"), ("cast", "awful", "neg")] * 12]  # fmt: skip
    (root / "train.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8"
    )
    helpers.finetune_files(root, "classify", eval_file=None, max_seq_length=16, epochs=1)
    assert main(["export", "--finetuned", str(root / "model"), "--triton"]) == 0
    return root / "model"
