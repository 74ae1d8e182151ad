"""Typed exceptions for mistakes a user can make: defined in `preprocess.base.errors` (the ground floor of the three packages),
importable from here as before."""

from preprocess.base.errors import (
    AlbertError,
    CheckpointError,
    ConfigError,
    DataError,
    ExportError,
    InstallError,
    OutputError,
    TokenizerError,
)

__all__ = [
    "AlbertError",
    "ConfigError",
    "CheckpointError",
    "TokenizerError",
    "DataError",
    "ExportError",
    "OutputError",
    "InstallError",
]
