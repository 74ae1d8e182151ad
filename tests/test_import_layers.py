"""The house's layers hold: pyproject.toml's import-linter contracts, as `lint-imports` checks
them (the command line over albert_tf.export over albert_tf.runtimes over the formats over
training over the model core over albert_tf.preprocess over the ground floor, no circle among a
package's files and folders).

A wrong arrow fails here, with the import that breaks the contract named. About a second.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytest.importorskip("importlinter")

LINT_IMPORTS = (
    "import sys\nfrom importlinter.cli import lint_imports\nsys.exit(lint_imports(no_cache=True))"
)


def test_the_import_layers_hold():
    done = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
