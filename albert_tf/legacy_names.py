"""The import names the notebooks taught before albert-tf had one import root, kept for one
release: `export.bundle`, `preprocess.corpus`, `preprocess.spm_train` and
`preprocess.pretraining_data` (with their parents `export` and `preprocess`).

`import albert_tf` installs a finder that answers only for a top-level name that nothing on
`sys.path` provides: a user's own `preprocess.py` or `export.py` always wins.
The old name then gives the new module itself (`albert_tf.export.bundle`, ...), with one
`FutureWarning` per name that says what to import instead. No other old name is kept.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

# Old name -> the module it now is. Only names that docs or notebooks taught.
TAUGHT = {
    old: "albert_tf." + old
    for old in (
        "export",
        "export.bundle",
        "preprocess",
        "preprocess.corpus",
        "preprocess.spm_train",
        "preprocess.pretraining_data",
    )
}


class _LegacyLoader(importlib.abc.Loader):
    """Gives the module under its new name; the old name in `sys.modules` points at it."""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"`{spec.name}` is a deprecated name that will be removed after albert-tf 0.2: "
            f"import `{self.new}` instead",
            FutureWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: `create_module` returned the imported module."""


class _LegacyFinder(importlib.abc.MetaPathFinder):
    """First on `sys.meta_path`, but a top-level old name found on `sys.path` is left to it."""

    def find_spec(self, fullname, path=None, target=None):
        new = TAUGHT.get(fullname)
        if new is None:
            return None
        parent, _, _ = fullname.rpartition(".")
        if not parent and importlib.machinery.PathFinder.find_spec(fullname) is not None:
            return None  # the user's own preprocess.py or export.py
        if parent and sys.modules.get(parent) is not sys.modules.get(TAUGHT[parent]):
            return None  # the parent is the user's, not ours
        found = importlib.util.find_spec(new)
        package = found is not None and found.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, _LegacyLoader(new), is_package=package)


def install() -> None:
    """Puts the finder first on `sys.meta_path`, once."""
    if not any(isinstance(finder, _LegacyFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LegacyFinder())
