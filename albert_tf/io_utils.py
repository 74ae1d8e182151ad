"""Atomic outputs: write beside the target, rename into place only when complete.

Local paths use the OS (pathlib, os.replace). URLs such as `gs://bucket/run` or `ram://x`
(`is_remote`) are for tf.io.gfile; `join`, `parent` and `atomic_remote_file` handle them, and
only they import TensorFlow: the command line imports this module before any command runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

from albert_tf.errors import OutputError


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt inside `sigterm_interrupts` (the CLI exits with 143)."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Inside the block SIGTERM raises Terminated, a KeyboardInterrupt: atomic_dir and
    atomic_file then remove their temporary outputs as on Ctrl-C, where SIGTERM's default
    action would kill the process and leave them behind. Only from the main thread (the only
    one that can install handlers); elsewhere the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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


def check_can_create(path: str | os.PathLike) -> Path:
    """Returns `path` made absolute; raises OutputError unless its nearest existing ancestor is
    a writable directory, so that it can be created with any missing parents."""
    target = Path(path).expanduser().absolute()
    ancestor = target.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"cannot create {target}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputError(f"cannot create {target}: {ancestor} is not writable")
    return target


def check_output_file(path: str | os.PathLike, overwrite: bool, flag: str) -> Path:
    """`path` made absolute, for a file output given as `flag`: OutputError if it exists and
    `overwrite` is False, is a directory, or cannot be created (see check_can_create)."""
    check_output_path(path, overwrite)
    target = check_can_create(path)
    if target.is_dir():
        raise OutputError(f"{flag} {path} is a directory")
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


def write_json(path: str | os.PathLike, record: object) -> None:
    """Writes `record` to `path` as indented JSON, whole or not at all (see `atomic_file`)."""
    with atomic_file(path) as temporary:
        temporary.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


# === tf.io.gfile URLs (gs://, ram://, ...) ===

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(path: str | os.PathLike) -> bool:
    """True if `path` has a URL scheme (gs://bucket/x, ram://x): a tf.io.gfile path, not an OS one."""
    return bool(_URL.match(os.fspath(path)))


def path_str(path: str | os.PathLike) -> str:
    """`path` as a string: a URL as given, a local path as pathlib writes it."""
    return os.fspath(path) if is_remote(path) else str(Path(path))


def join(directory: str | os.PathLike, *names: str) -> str:
    """`directory/names...` as a string; a URL keeps its `scheme://` (pathlib collapses the //)."""
    if is_remote(directory):
        return posixpath.join(os.fspath(directory), *names)
    return str(Path(directory, *names))


def parent(path: str | os.PathLike) -> str:
    """The directory holding `path`, as a string (URLs keep their scheme)."""
    if is_remote(path):
        return posixpath.dirname(os.fspath(path).rstrip("/"))
    return str(Path(path).parent)


def is_file(path: str | os.PathLike) -> bool:
    """Path.is_file for a local path; for a URL, whether tf.io.gfile finds a non-directory there."""
    if not is_remote(path):
        return Path(path).is_file()
    import tensorflow as tf

    return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


@contextlib.contextmanager
def gfile_errors(error: type[Exception], doing: str) -> Iterator[None]:
    """Turns a tf.errors.OpError in the block into `error("{doing}: <first line>")`.

    For filesystem failures on URLs (a missing bucket, no permission), so they reach the user as
    one line of the typed error the input or output calls for.
    """
    import tensorflow as tf

    try:
        yield
    except tf.errors.OpError as e:
        lines = (e.message or type(e).__name__).strip().splitlines()
        raise error(f"{doing}: {lines[0] if lines else type(e).__name__}") from None


@contextlib.contextmanager
def atomic_remote_file(path: str) -> Iterator[str]:
    """Yields a temporary name beside URL `path`, renamed onto `path` when the block completes.

    Object stores have no atomic rename: GCS emulates tf.io.gfile.rename(overwrite=True) with a
    copy and a delete. That copy still makes `path` appear complete or not at all (an object is
    written whole), so readers never see half a file; a crash can leave the temporary behind.
    On an exception in the block the temporary is deleted; OutputError if the filesystem fails.
    """
    import tensorflow as tf

    tmp = join(parent(path), f".{posixpath.basename(path)}.tmp-{uuid.uuid4().hex[:12]}")
    with gfile_errors(OutputError, f"cannot write {path}"):
        try:
            yield tmp
            tf.io.gfile.rename(tmp, path, overwrite=True)
        except BaseException:
            with contextlib.suppress(tf.errors.OpError):
                tf.io.gfile.remove(tmp)
            raise
