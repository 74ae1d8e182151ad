"""Subcommands of `albert-tf`; see `albert_tf.cli`.

Each imports TensorFlow, and what needs an extra, inside `run`: the parser (`albert-tf --help`,
every argument check before a command starts) loads neither.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any


def keyword_arguments(
    args: argparse.Namespace, function: Callable[..., Any], **given: Any
) -> dict[str, Any]:
    """The keyword arguments of `function` (a function or a dataclass) that a flag of the same
    name sets in `args`, with `given` (renamed or computed ones) over them: a command passes its
    flags on without typing each name twice."""
    names = inspect.signature(function).parameters
    taken = {name: getattr(args, name) for name in names if hasattr(args, name)}
    return {**taken, **given}
