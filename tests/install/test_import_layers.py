"""The house's layers hold: pyproject.toml's import-linter contracts, as `lint-imports` checks
them (the command line over albert_tf.export over albert_tf.runtimes over the formats over
training over the model core over albert_tf.preprocess over the ground floor, no circle among a
package's files and folders).

A wrong arrow fails here, with the import that breaks the contract named. About a second.

import-linter reads a package's files from its folder, and the repository's albert_tf/ folder does
not hold export/ and preprocess/, which install inside it (pyproject.toml's package-dir). So the
contracts are checked on the tree as an install lays it out (docs/scripts/installed_layout.py, of
links into the repository), where the arrows from albert_tf/ into export/ and preprocess/ are
seen as they are.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytest.importorskip("importlinter")

_spec = importlib.util.spec_from_file_location(
    "installed_layout", REPO / "docs" / "scripts" / "installed_layout.py"
)
installed_layout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(installed_layout)

LINT_IMPORTS = (
    "import sys\nfrom importlinter.cli import lint_imports\n"
    "sys.exit(lint_imports(config_filename=sys.argv[2], no_cache=True))"
)


def test_the_import_layers_hold(tmp_path):
    config = ["--config", str(REPO / "pyproject.toml")]
    done = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, *config],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=installed_layout.installed_layout(tmp_path),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
