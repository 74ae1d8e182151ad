"""Lazy package exports, so that `import albert_tf` and the CLI's start import no TensorFlow.

A package lists its public names in `__all__`, maps each name that would import TensorFlow (or an
optional runtime) to the module that defines it, and gets the module-level `__getattr__` and
`__dir__` of PEP 562 from `lazy_exports`: `albert_tf.AlbertEncoder` imports `albert_tf.encoder`
on first use. No exported name may equal a submodule's name: importing the submodule would
replace it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], eager: Mapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`: `exports` maps a name to its defining module's
    dotted path; `eager` is the package's namespace (its `globals()`), listed by `__dir__`."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(set(eager) | set(exports))

    return __getattr__, __dir__
