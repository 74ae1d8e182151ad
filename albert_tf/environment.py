"""Checks of the installed packages that albert-tf cannot fix itself but can name in one line."""

from __future__ import annotations

import importlib.metadata
import importlib.util

from albert_tf.errors import InstallError


def missing_pkg_resources() -> InstallError:
    """The error for a setuptools without `pkg_resources`, which tensorflow-hub 0.16.1 imports
    (setuptools 82 removed it, tensorflow/hub#934)."""
    try:
        setuptools = f"setuptools {importlib.metadata.version('setuptools')} has"
    except importlib.metadata.PackageNotFoundError:
        setuptools = "setuptools is not installed, so there is"
    return InstallError(
        f"tensorflow_hub cannot be imported: {setuptools} no pkg_resources (removed in "
        'setuptools 82); run pip install "setuptools<82", and add the Hugging Face extras '
        'with pip install -e ".[hf]", which keeps that pin'
    )


def check_tensorflow_hub() -> None:
    """Raises `InstallError` (see `missing_pkg_resources`) if `import tensorflow_hub` would
    fail for want of `pkg_resources`; looks the module up without importing it."""
    if importlib.util.find_spec("pkg_resources") is None:
        raise missing_pkg_resources()
