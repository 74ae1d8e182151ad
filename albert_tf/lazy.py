"""Lazy package exports: defined in `preprocess.base.lazy` (the ground floor of the three packages),
importable from here as before."""

from preprocess.base.lazy import (
    lazy_exports,
)

__all__ = [
    "lazy_exports",
]
