"""albert_tf laid out as an install has it, for the tools that read a package from its folder.

The repository's albert_tf/ folder does not hold preprocess/ and export/, which install inside it
as `albert_tf.preprocess` and `albert_tf.export` (pyproject.toml's package-dir). import-linter and
the API reference's griffe find a package's modules by walking its folder, so they read a
temporary folder whose albert_tf/ links to each entry of the repository's albert_tf/ and to the
folders that install under it: `tests/install/test_import_layers.py` runs the layer contracts there,
and mkdocs.yml names this file as a hook, so `mkdocs build` and `mkdocs serve` document from there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from setuptools.config.pyprojecttoml import load_file

REPO = Path(__file__).resolve().parent.parent.parent  # docs/scripts/ -> the repository


def installed_layout(folder: Path) -> Path:
    """Fills the empty `folder` with `albert_tf/` as installed, made of links into the
    repository's folders; returns `folder`."""
    package_dir = load_file(REPO / "pyproject.toml")["tool"]["setuptools"]["package-dir"]
    root = folder / "albert_tf"
    root.mkdir()
    for entry in (REPO / package_dir["albert_tf"]).iterdir():
        if entry.name != "__pycache__":
            (root / entry.name).symlink_to(entry)
    for name, source in package_dir.items():
        if name != "albert_tf":
            (folder / name.replace(".", "/")).symlink_to(REPO / source)
    return folder


_LAYOUT = tempfile.TemporaryDirectory(prefix="albert-tf-api-")  # removed when mkdocs exits


@event_priority(100)  # before mkdocstrings reads its handlers' options
def on_config(config):
    """Points the API reference's search path at the installed layout."""
    layout = Path(_LAYOUT.name)
    if not (layout / "albert_tf").exists():
        installed_layout(layout)
    python = config.plugins["mkdocstrings"].config["handlers"]["python"]
    python["paths"] = [str(layout)]
    return config
