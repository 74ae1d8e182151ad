"""What each documented install resolves: an extra may add packages, never narrow the core's.

CI installs every extra at once (the `test` extra), so a pin written in one extra alone holds in
CI and not for a user who installs another extra alone: sentencepiece once resolved to 0.2.2 in
CI and to 0.2.3 for `.[keras-hub]` alone, and the keras-hub export crashed only there.
"""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_no_extra_narrows_a_core_requirement():
    project = _project()
    core = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    narrowed = [
        f"[{extra}] {requirement}"
        for extra, requirements in project["optional-dependencies"].items()
        for requirement in map(Requirement, requirements)
        if requirement.name in core and requirement.specifier != core[requirement.name].specifier
    ]
    assert narrowed == [], "pin these in `dependencies` instead, for every install"
