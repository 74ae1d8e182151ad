"""Atomic outputs: write beside the target, rename into place only when complete."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from albert_tf.errors import OutputError


def _temp_sibling(target: Path, is_dir: bool) -> Path:
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create {parent}: {e.strerror}") from None
    if not os.access(parent, os.W_OK):
        raise OutputError(f"output location {parent} is not writable")
    prefix = f".{target.name}.tmp-"
    try:
        if is_dir:
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, dir=parent)
            os.close(fd)
            path = Path(name)
    except OSError as e:
        raise OutputError(f"cannot write in {parent}: {e.strerror}") from None
    # mkdtemp/mkstemp create owner-only entries; give the final output the usual umask mode.
    umask = os.umask(0)
    os.umask(umask)
    path.chmod((0o777 if is_dir else 0o666) & ~umask)
    return path


def check_output_path(path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Returns `path` as a Path; raises OutputError if it exists and `overwrite` is False."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise OutputError(f"output {target} already exists (pass --overwrite to replace it)")
    return target


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yields a temporary directory that becomes `path` when the block completes.

    On any exception the temporary directory is removed and `path` is left untouched.
    """
    target = check_output_path(path, overwrite)
    tmp = _temp_sibling(target, is_dir=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if target.exists():
        old = _temp_sibling(target, is_dir=True)
        old.rmdir()
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, overwrite: bool = True) -> Iterator[Path]:
    """Yields a temporary file path that replaces `path` when the block completes."""
    target = check_output_path(path, overwrite)
    tmp = _temp_sibling(target, is_dir=False)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)
