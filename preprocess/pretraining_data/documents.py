"""Corpus reading: input globs -> files -> documents -> sentences.

Format (the original's): documents are separated by blank lines; within a document each line is
text. Lines are further split into sentences by `split_sentences`, a small deterministic rule
(no model): a sentence ends at ".", "!" or "?" (plus closing quotes or brackets) followed by
whitespace and an upper-case letter, a digit or an opening quote/bracket, except after common
abbreviations and single-letter initials. Files ending in ".gz" are decompressed.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from albert_tf.errors import DataError

_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "cf",
        "al",
        "fig",
        "figs",
        "eq",
        "no",
        "nos",
        "vol",
        "pp",
        "ch",
        "sec",
        "approx",
        "inc",
        "ltd",
        "co",
        "corp",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
    ]
)


def split_sentences(line: str) -> list[str]:
    """Splits one line of text into sentences (stripped, non-empty, in order)."""
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(line):
        before = line[start : match.start() + 1]
        word = before.rsplit(None, 1)[-1] if before.strip() else ""
        word = word.lstrip("\"'“‘([").rstrip(".!?").lower()
        if match.group(0)[0] == "." and (word in _ABBREVIATIONS or len(word) == 1):
            continue
        sentences.append(line[start : match.end()].strip())
        start = match.end()
    sentences.append(line[start:].strip())
    return [s for s in sentences if s]


def resolve_inputs(patterns: list[str]) -> list[Path]:
    """Expands globs (recursive `**` allowed) into a sorted, de-duplicated list of files.

    Raises DataError if a pattern matches no file.
    """
    files: dict[str, Path] = {}
    for pattern in patterns:
        matches = [Path(m) for m in glob.glob(os.path.expanduser(pattern), recursive=True)]
        matches = [m for m in matches if m.is_file()]
        if not matches:
            raise DataError(f"no input file matches {pattern!r}")
        for m in matches:
            files.setdefault(str(m.resolve()), m)
    return [files[k] for k in sorted(files)]


def input_size(path: Path) -> int:
    """Bytes of text in `path`: its size, or for ".gz" the uncompressed size from the trailer."""
    size = path.stat().st_size
    if path.suffix != ".gz" or size < 18:
        return size
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def split_documents(lines: Iterable[str]) -> Iterator[list[str]]:
    """The documents of one file's text lines: runs of non-blank lines (stripped) between blank
    lines, in order."""
    document: list[str] = []
    for line in lines:
        text = line.strip()
        if text:
            document.append(text)
        elif document:
            yield document
            document = []
    if document:
        yield document


def iter_documents(files: list[Path]) -> Iterator[tuple[list[str], int]]:
    """Yields `(lines, num_bytes)` per document: its non-blank lines (stripped) and roughly how
    many input bytes were read since the previous document (for progress). A document never
    spans two files. Raises DataError on a file that is not UTF-8 text or cannot be read."""
    for path in files:
        reported = 0
        try:
            raw = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")  # noqa: SIM115
            with raw, io.TextIOWrapper(raw, encoding="utf-8", errors="strict") as reader:
                for lines in split_documents(reader):
                    position = raw.tell()
                    yield lines, position - reported
                    reported = position
                position = raw.tell()
        except UnicodeDecodeError as e:
            raise DataError(f"{path} is not UTF-8 text ({e.reason})") from None
        except (OSError, EOFError) as e:
            raise DataError(f"cannot read {path}: {e}") from None
        if position > reported:
            yield [], position - reported
