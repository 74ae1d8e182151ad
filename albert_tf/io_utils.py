"""Atomic outputs and local-or-remote paths: defined in `preprocess.base.io_utils` (the ground floor of the three packages),
importable from here as before."""

from preprocess.base.io_utils import (
    Terminated,
    atomic_dir,
    atomic_file,
    atomic_remote_file,
    check_can_create,
    check_output_file,
    check_output_path,
    gfile_errors,
    is_file,
    is_remote,
    join,
    parent,
    path_str,
    sigterm_interrupts,
    write_json,
)

__all__ = [
    "Terminated",
    "sigterm_interrupts",
    "check_output_path",
    "check_can_create",
    "check_output_file",
    "atomic_dir",
    "atomic_file",
    "write_json",
    "is_remote",
    "path_str",
    "join",
    "parent",
    "is_file",
    "gfile_errors",
    "atomic_remote_file",
]
