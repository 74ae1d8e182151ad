"""Typed exceptions for mistakes a user can make.

The CLI turns any `AlbertError` into one line on stderr and exit code 2; anything else is a bug
and keeps its traceback.
"""


class AlbertError(Exception):
    """Base class of every user-facing error raised by albert-tf."""


class ConfigError(AlbertError, ValueError):
    """An invalid `AlbertConfig`: unknown key, bad size, unknown preset."""


class CheckpointError(AlbertError):
    """A checkpoint that is missing, unreadable, or disagrees with its config."""


class TokenizerError(AlbertError):
    """A SentencePiece model that is missing, corrupt, or lacks ALBERT's special pieces."""


class DataError(AlbertError):
    """Input data (corpus, TFRecords, task files) that cannot be used."""


class ExportError(AlbertError):
    """An export that cannot be written or loaded."""


class OutputError(AlbertError):
    """An output path that exists, cannot be written, or holds something else."""


class InstallError(AlbertError):
    """An installation albert-tf cannot run in: a package it imports is missing or broken."""
