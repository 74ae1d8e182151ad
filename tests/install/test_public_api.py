"""The public Python API: every package's `__all__` resolves, and importing it needs no TensorFlow."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

# Every package with a public `__all__` (docs/reference/api/ documents each name).
PACKAGES = (
    "albert_tf",
    "albert_tf.layers",
    "albert_tf.convert",
    "albert_tf.pretraining",
    "albert_tf.finetune",
    "albert_tf.finetune.tasks",
    "albert_tf.finetune.tasks.squad",
    "albert_tf.quickstart",
    "albert_tf.runtimes",
    "albert_tf.benchmarking",
    "albert_tf.preprocess",
    "albert_tf.preprocess.pretraining_data",
    "albert_tf.export",
    "albert_tf.export.onnx",
)
LIGHT = tuple(p for p in PACKAGES if p not in ("albert_tf.benchmarking", "albert_tf.export.onnx"))


def test_importing_the_packages_imports_no_tensorflow():
    code = f"import importlib, sys\nfor p in {LIGHT!r}: importlib.import_module(p)\n"
    code += "print(sorted(m for m in ('tensorflow', 'tf_keras') if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves_to_its_definition(package):
    module = importlib.import_module(package)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert len(set(module.__all__)) == len(module.__all__)
    # An exported name equal to a submodule's would be replaced when the submodule is imported.
    assert not set(module.__all__) & submodules
    for name in module.__all__:
        value = getattr(module, name)
        assert name in dir(module)
        if callable(value):  # ours, under its own name (no third-party object re-exported)
            assert value.__name__ == name
            assert value.__module__.split(".")[0] == "albert_tf"


def test_unknown_names_raise_attribute_error():
    import albert_tf

    with pytest.raises(AttributeError, match="module 'albert_tf' has no attribute 'Nope'"):
        albert_tf.Nope  # noqa: B018
    assert albert_tf.AlbertEncoder is importlib.import_module("albert_tf.encoder").AlbertEncoder
