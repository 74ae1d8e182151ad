"""The embedded default corpus: English prose every CPython installation carries.

Two sources, read without importing arbitrary modules (importing `this`, `antigravity` or
`tkinter` has side effects): the docstrings of the standard library's source files, parsed with
`ast`, and the help topics of `pydoc_data.topics` (the language reference's prose).

The output is the plain-text format `create-pretraining-data` reads, as the original ALBERT
data: one sentence per line, a blank line between documents. Each module and each help topic is
one document. Documents are assigned to the training or held-out file by a hash of their name,
so the split is the same on every machine that has the same standard library.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import os
import re
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from pydoc_data.topics import topics
from typing import NamedTuple

from albert_tf.io_utils import atomic_file
from albert_tf.preprocess.pretraining_data.documents import split_sentences

TRAIN_FILE = "corpus.txt"
HELDOUT_FILE = "heldout.txt"

# Parts of the standard library that are tests, tools with their own grammar files, or
# generated tables rather than prose.
SKIPPED_DIRS = frozenset(
    {
        "test",
        "tests",
        "idlelib",
        "lib2to3",
        "site-packages",
        "dist-packages",
        "__pycache__",
        "encodings",
        "pydoc_data",
        "turtledemo",
    }
)

# A sentence ends at ., ! or ? (optionally closed by a quote or bracket) before an uppercase
# letter, a digit or a quote. "e.g. foo" and "i.e. bar" do not match (lowercase follows).

# reST roles (:func:`name`, :class:`~a.B`), literals, emphasis, links and substitutions.
_ROLE = re.compile(r":[a-zA-Z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]+)``|`([^`]+)`_?")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}([^*\s][^*]*?)\*{1,2}(?![\w*])")
_HEADING_RULE = re.compile(r"^\s*([=\-~^*#+\"'`]){3,}\s*$")
_DIRECTIVE = re.compile(r"^\s*\.\.\s")
_FIELD = re.compile(r"^\s*:[a-zA-Z_ ]+:")
_CODE_LINE = re.compile(
    r"^\s*(>>>|\.\.\.|\$ |%|#|def |class |import |from \S+ import|return\b|raise\b|if .*:$"
    r"|for .*:$|while .*:$|try:|except\b|with .*:$|@\w)"
)
_CODEISH_CHARS = set("=(){}[]<>_|\\/@#$%^&*+~`")
_WORD = re.compile(r"[A-Za-z]{2,}")


class CorpusPaths(NamedTuple):
    """The files `build_default_corpus` wrote and what they hold."""

    train: Path  # one sentence per line, blank line between documents
    heldout: Path  # same format; documents whose name hashes into the held-out bucket
    train_documents: int
    heldout_documents: int
    train_bytes: int
    heldout_bytes: int


def stdlib_root() -> Path:
    """The directory holding the running interpreter's standard-library source files."""
    return Path(sysconfig.get_paths()["stdlib"])


def _clean_inline(text: str) -> str:
    text = _ROLE.sub(lambda m: m.group(1).strip(), text)
    text = _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)
    text = _EMPHASIS.sub(lambda m: m.group(1), text)
    text = text.replace("|", " ")
    return re.sub(r"\s+", " ", text).strip()


def _is_prose(sentence: str) -> bool:
    """An English sentence rather than code, a table row or a signature."""
    words = _WORD.findall(sentence)
    if len(words) < 3 or (sentence.endswith(":") and len(words) < 5):
        return False
    codeish = sum(ch in _CODEISH_CHARS for ch in sentence)
    letters = sum(ch.isalpha() for ch in sentence)
    if codeish > 0.08 * len(sentence) or letters < 0.6 * len(sentence):
        return False
    # Identifiers with dots or underscores inside ("os.path.join", "max_seq_length").
    identifiers = len(re.findall(r"\w[._]\w", sentence))
    return identifiers <= max(2, len(words) // 4)


def _paragraphs(text: str) -> Iterator[str]:
    """Blocks of lines separated by blank lines, with code, markup and indented blocks removed."""
    block: list[str] = []
    for line in [*inspect.cleandoc(text).splitlines(), ""]:
        if line.strip():
            block.append(line)
            continue
        if block:
            yield from _paragraph_text(block)
        block = []


def _paragraph_text(lines: list[str]) -> Iterator[str]:
    # A block indented as a whole is a code sample, a grammar rule or a table.
    if all(line.startswith("   ") for line in lines):
        return
    kept: list[str] = []
    for line in lines:
        if _HEADING_RULE.match(line) or _DIRECTIVE.match(line) or _FIELD.match(line):
            continue
        if _CODE_LINE.match(line):
            return
        kept.append(line.strip().lstrip("*-").strip())
    text = _clean_inline(" ".join(kept))
    if text.endswith("::"):
        text = text[:-1]
    if text and "===" not in text:
        yield text


def prose_sentences(paragraph: str) -> list[str]:
    """Prose sentences of one paragraph (pretraining data's split_sentences); sentences that
    look like code, table rows or signatures are dropped."""
    return [s for s in split_sentences(paragraph) if _is_prose(s)]


def document_sentences(texts: list[str]) -> list[str]:
    """Cleaned sentences of one document made of several raw texts (docstrings or a topic)."""
    return [s for text in texts for p in _paragraphs(text) for s in prose_sentences(p)]


def _docstrings(tree: ast.AST) -> Iterator[str]:
    """Docstrings of a module, its classes and functions, in source order."""
    if isinstance(tree, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        doc = ast.get_docstring(tree, clean=False)
        if doc:
            yield doc
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _docstrings(child)


def _source_files(root: Path) -> list[Path]:
    """Sorted `.py` files under `root`, never descending into SKIPPED_DIRS (site-packages)."""
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS]
        found.extend(Path(directory, f) for f in files if f.endswith(".py"))
    return sorted(found)


def stdlib_documents(root: str | Path | None = None) -> Iterator[tuple[str, list[str]]]:
    """(module name, sentences) for each standard-library source file with prose, sorted by path."""
    root = Path(root) if root is not None else stdlib_root()
    for path in _source_files(root):
        rel = path.relative_to(root)
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        sentences = document_sentences(list(_docstrings(tree)))
        if sentences:
            parts = rel.with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), sentences


def pydoc_topic_documents() -> Iterator[tuple[str, list[str]]]:
    """(topic name, sentences) for each of `pydoc_data.topics`' help topics, sorted by name."""
    for name in sorted(topics):
        sentences = document_sentences([topics[name]])
        if sentences:
            yield f"topic:{name}", sentences


def probe_sentences(count: int) -> list[str]:
    """The first `count` sentences of the help topics: English prose every Python carries, on
    which the exporters compare a converted model with its source."""
    return [s for _, doc in pydoc_topic_documents() for s in doc][:count]


def is_heldout(name: str, heldout_percent: int = 5) -> bool:
    """Whether document `name` belongs to the held-out part (a stable hash of the name)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % 100 < heldout_percent


def build_default_corpus(
    output_dir: str | Path,
    heldout_percent: int = 5,
    overwrite: bool = True,
    stdlib_dir: str | Path | None = None,
) -> CorpusPaths:
    """Writes `output_dir/corpus.txt` and `output_dir/heldout.txt` from the embedded sources.

    Both files hold one sentence per line and a blank line between documents (one document per
    standard-library module and per pydoc topic). About 2 MB in CPython 3.11; deterministic for
    a given standard library. Each file is written atomically. `stdlib_dir` replaces the running
    interpreter's standard library as the source of docstrings.
    """
    output_dir = Path(output_dir)
    parts: dict[bool, list[str]] = {False: [], True: []}
    for name, sentences in [*stdlib_documents(stdlib_dir), *pydoc_topic_documents()]:
        parts[is_heldout(name, heldout_percent)].append("\n".join(sentences) + "\n")
    sizes = {}
    paths = {}
    for heldout, filename in ((False, TRAIN_FILE), (True, HELDOUT_FILE)):
        text = "\n".join(parts[heldout])
        paths[heldout] = output_dir / filename
        with atomic_file(paths[heldout], overwrite=overwrite) as tmp:
            tmp.write_text(text, encoding="utf-8")
        sizes[heldout] = len(text.encode("utf-8"))
    return CorpusPaths(
        train=paths[False],
        heldout=paths[True],
        train_documents=len(parts[False]),
        heldout_documents=len(parts[True]),
        train_bytes=sizes[False],
        heldout_bytes=sizes[True],
    )
