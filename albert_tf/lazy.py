"""Lazy package exports, so that `import albert_tf` and the CLI's start import no TensorFlow.

A package names, per defining module, the public names that would import TensorFlow (or an
optional runtime), and gets its `__all__` part and the module-level `__getattr__` and `__dir__`
of PEP 562 from `lazy_exports`: `albert_tf.AlbertEncoder` imports `albert_tf.encoder` on first
use. No exported name may equal a submodule's name: importing the submodule would replace it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, modules: Mapping[str, str], eager: Mapping[str, Any]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """The lazy names, `__getattr__` and `__dir__` of `package`.

    Args:
        package: the package's `__name__`.
        modules: defining module -> the names it exports, separated by spaces; a module that
            starts with "." is relative to `package`.
        eager: the package's namespace (its `globals()`), listed by `__dir__` too.

    Returns:
        (the lazy names in order, `__getattr__`, `__dir__`).
    """
    exports = {
        name: package + module if module.startswith(".") else module
        for module, names in modules.items()
        for name in names.split()
    }

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(set(eager) | set(exports))

    return list(exports), __getattr__, __dir__
