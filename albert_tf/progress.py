"""Progress bars, one rule for every bar: drawn on a terminal, left out everywhere else.

A tqdm bar redraws itself with carriage returns. On a terminal that is a bar; written to a log
file or a pipe (CI, `nohup`, `2> run.log`) every redraw stays, and an epoch becomes thousands of
carriage returns on one line. So `bar` draws only when its stream (stderr) is a terminal or a
Jupyter notebook's output (which draws tqdm's own widget), and not under `--quiet` (the CLI sets
TQDM_DISABLE, which tqdm reads when imported: `bar` imports it). Where no bar is drawn, a
command says the same in a line per epoch (`finetune`) or per summary step (`pretrain`):
`interactive()` tells it which.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO, Any


def interactive(stream: IO[str] | None = None) -> bool:
    """Whether a bar on `stream` (default: stderr) is seen as one: a terminal, or the output
    of a Jupyter kernel; False under TQDM_DISABLE (`--quiet`)."""
    if os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes"):
        return False
    stream = sys.stderr if stream is None else stream
    if type(stream).__module__.startswith("ipykernel"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def bar(iterable: Iterable | None = None, *, enabled: bool = True, **kwargs: Any):
    """`tqdm(iterable, **kwargs)`, drawn only when `enabled` and `interactive(kwargs' file)`;
    otherwise a tqdm whose `update`, `set_postfix` and `close` do nothing."""
    # environment: tqdm reads TQDM_DISABLE when imported, and `--quiet` sets it first
    from tqdm.auto import tqdm

    shown = enabled and interactive(kwargs.get("file"))
    return tqdm(iterable, disable=not shown, **kwargs)
