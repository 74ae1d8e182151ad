"""What the page generators of docs/scripts/ share: rewriting a page's generated regions, and the
command line that writes the page or, with --check, only compares it."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path


def fill_region(page: str, name: str, text: str, target: Path, note: str) -> str:
    """`page` with the region between `<!-- begin: name -->` and `<!-- end: name -->` replaced by
    `note` and `text`; SystemExit naming `target` when the page has no such region."""
    pattern = re.compile(rf"(<!-- begin: {name} -->\n).*?(<!-- end: {name} -->)", re.S)
    if not pattern.search(page):
        raise SystemExit(f"{target.name}: no <!-- begin: {name} --> region")
    return pattern.sub(lambda m: f"{m[1]}{note}\n\n{text}\n\n{m[2]}", page)


def fill_regions(page: str, parts: dict[str, Callable[[], str]], target: Path, note: str) -> str:
    """`page` with each region named in `parts` replaced by what its function returns."""
    for name, part in parts.items():
        page = fill_region(page, name, part(), target, note)
    return page


def generator_main(doc: str, target: Path, render: Callable[[str], str], argv=None) -> int:
    """Writes `render(target's text)` to `target`; with --check, exit 1 if the page differs."""
    options = argparse.ArgumentParser(description=doc.splitlines()[0])
    options.add_argument("--check", action="store_true", help="only compare with the page")
    args = options.parse_args(argv)
    current = target.read_text()
    text = render(current)
    if args.check:
        if current != text:
            print(f"{target} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    return 0
