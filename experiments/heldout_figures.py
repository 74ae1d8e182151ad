"""Held-out figures of every model in albert_en_mini's card, on text none of them trained on (issue 61).

The card compared the models on the pretraining run's held-out records and on the distillation
corpus's held-out sentences. Neither was held out from every model: the pretraining corpus held
out 10% of documents by a hash of their name, while the distillation corpus kept every document
and held out 1% of sentences by a hash of the sentence. So the distilled stages trained on the
pretraining corpus's held-out documents, and the pretrain-only model (and stage 3, which went
back to the pretraining corpus) trained on most of the distillation's held-out sentences. Since
then every corpus shares one split (experiments/heldout.py); the models in the card were trained
before it, and are not retrained.

Stages, each skipped when its output under WORK exists (the figures are kept per model, so a
stopped run resumes with the next model):

  1. sources: the pretraining and distillation sources (experiments/corpora.py,
     experiments/distill_corpus.py) and the evaluation sources, read by no corpus
     (heldout.EVALUATION_SOURCES): Botchan, Natsume's novel in Morri's 1919 English translation
     (Project Gutenberg's text, `test/botchan.txt` of sentencepiece's sdist), one document per
     chapter; and the Linux kernel's documentation (Debian `linux-doc-6.1`, reST cleaned to
     prose as the Python docs are, `translations/` skipped), one document per page, the tenth of
     its pages whose name's hash falls in the held-out buckets, to keep the evaluation in minutes.
  2. audit: the corpora the models trained on, rebuilt with their old splits and checked
     against the committed digests (albert_en_mini's manifest, packaged.json's corpus): how many
     documents and sentences of the shared sources no stage trained on. The corpora as built now
     from the same sources: pretraining's must be byte for byte the old one (its split is
     unchanged); distillation's must put no sentence of a held-out document in its training text
     unless a training document holds it too, and none of a training document in its held-out
     text.
  3. records: `albert-tf create-pretraining-data` on the evaluation text with the shipped
     vocabulary, as the pretraining run's held-out records were made (128 pieces, 20 predictions,
     seed 12345).
  4. figures: for each model of the card's table (the pretrain-only model, distillation stages 1
     and 2, stage 3's float32 checkpoint, the shipped float16 weights), held-out loss, masked-LM
     and sentence-order accuracy on those records (`albert_tf.pretraining.evaluate`), and masked-LM
     accuracy on blanks in single sentences (`albert_en_mini_distill.blanks_check`, as the card's
     old column) of the evaluation text and of the shared sources' sentences no stage trained on.

RESULTS/heldout.json is the record; docs/scripts/model_card.py makes the card's held-out table
from it. The old figures stay in albert_en_mini_distill/distill_stage3.json and packaged.json.

Usage (niced on a shared machine; about an hour on two busy shared cores):
  nice -n 19 python -m experiments.heldout_figures
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import platform
import random
import re
import subprocess
import sys
from pathlib import Path

from albert_tf.preprocess.corpus import is_heldout as name_hash_heldout
from experiments import albert_en_mini as pretraining
from experiments import albert_en_mini_distill as distillation
from experiments import history
from experiments.corpora import (
    clean_rst,
    english_readers,
    python_docs_documents,
    sentences,
    strip_gutenberg,
    write_split,
)
from experiments.distill_corpus import (
    SEED,
    corpus_sentences,
    normalized,
    rotten_tomatoes_keys,
    wikipedia_documents,
    write_corpus,
)
from experiments.heldout import HELDOUT_PERCENT, is_heldout

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "heldout"
WORK = ROOT / "data" / "heldout"
SENTENCEPIECE = "sentencepiece==0.2.1"  # its sdist carries test/botchan.txt
LINUX_DOC = "linux-doc-6.1"
OLD_DISTILL_PERCENT = 1  # the distillation corpus's old split: 1% of sentences by their hash


# === Sources ===


def botchan_documents(dest: Path) -> list[tuple[str, list[str]]]:
    """One document per chapter of Botchan (Gutenberg's header and footer and the translator's
    note dropped), named `botchan/<chapter>`."""
    text = dest / "sentencepiece-0.2.1" / "test" / "botchan.txt"
    if not text.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*command, SENTENCEPIECE, "-d", str(dest)], check=True)
        member = "sentencepiece-0.2.1/test/botchan.txt"
        subprocess.run(["tar", "xzf", "sentencepiece-0.2.1.tar.gz", member], cwd=dest, check=True)
    body = strip_gutenberg(text.read_text(encoding="utf-8-sig"))
    parts = re.split(r"^CHAPTER ([IVX]+)\.?\s*$", body, flags=re.MULTILINE)
    return [
        (f"botchan/{number}", sentences(chapter))
        for number, chapter in zip(parts[1::2], parts[2::2], strict=True)
    ]


def linux_doc_documents(dest: Path) -> list[tuple[str, list[str]]]:
    """One document per page of the kernel's documentation (`translations/` skipped), one
    paragraph a line, named `linux-doc/<path>`: the pages in the held-out buckets of the name's
    hash only (a tenth), and only those of two paragraphs or more."""
    root = dest / "pkg" / "usr" / "share" / "doc" / LINUX_DOC / "Documentation"
    if not root.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", LINUX_DOC], cwd=dest, check=True)
        deb = sorted(dest.glob(f"{LINUX_DOC}_*.deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest / "pkg")], check=True)
    documents = []
    for path in sorted(root.glob("**/*.rst.gz")):
        name = f"linux-doc/{path.relative_to(root).as_posix().removesuffix('.rst.gz')}"
        if name.startswith("linux-doc/translations/") or not name_hash_heldout(
            name, HELDOUT_PERCENT
        ):
            continue
        paragraphs = clean_rst(gzip.decompress(path.read_bytes()).decode("utf-8", "replace"))
        if len(paragraphs) >= 2:
            documents.append((name, paragraphs))
    return documents


def shared_readers(sources: Path) -> dict:
    """The distillation corpus's readers (the pretraining corpus's sources and Wikipedia)."""
    readers = english_readers(sources, wordnet=True)
    readers["python-docs"] = python_docs_documents(sources / "python-docs")
    readers["wikipedia"] = wikipedia_documents(sources / "gensim")
    return readers


def _sha256_lines(lines: list[str]) -> str:
    return hashlib.sha256(("\n".join(lines) + "\n").encode("utf-8")).hexdigest()


# === Audit ===


def _old_distill_heldout(key: str) -> bool:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % 100 < OLD_DISTILL_PERCENT


def audit(work: Path) -> tuple[dict, list[str], list[str]]:
    """The old splits rebuilt and checked, what no stage trained on, and the new corpora's
    agreement: (the record's audit, the unseen sentences, the old distillation training text)."""
    sources = work / "sources"
    excluded = rotten_tomatoes_keys(sources / "vader")
    documents = {s: list(d) for s, d in shared_readers(sources).items()}
    # The old distillation corpus, as distill_corpus.py built it before the shared split.
    kept: dict[str, str] = {}
    for docs in documents.values():
        for _, lines in docs:
            for sentence in corpus_sentences(lines):
                key = normalized(sentence)
                if key not in excluded and key not in kept:
                    kept[key] = sentence
    order = list(kept.values())
    random.Random(SEED).shuffle(order)
    old_train = [s for s in order if not _old_distill_heldout(normalized(s))]
    old_heldout = [s for s in order if _old_distill_heldout(normalized(s))]
    packaged = json.loads((distillation.RESULTS / distillation.PACKAGED_RECORD).read_text())
    old_corpus = packaged["corpus"]
    distill_matches = (
        _sha256_lines(old_train) == old_corpus["train"]["sha256"]
        and _sha256_lines(old_heldout) == old_corpus["heldout"]["sha256"]
    )
    # The pretraining corpus (Wikipedia is not in it), its split unchanged: built now, it must be
    # the committed one.
    folder = work / "pretraining"
    readers = {s: iter(d) for s, d in documents.items() if s != "wikipedia"}
    train_txt, heldout_txt = folder / "train.txt", folder / "heldout.txt"
    if not (train_txt.exists() and heldout_txt.exists()):
        write_split(readers, train_txt, heldout_txt, mix_seed=pretraining.RUN["seed"])
    manifest = json.loads((pretraining.RESULTS / "manifest.json").read_text())["sha256"]
    pretraining_matches = (
        pretraining.sha256(train_txt) == manifest["train_txt"]
        and pretraining.sha256(heldout_txt) == manifest["heldout_txt"]
    )
    if not (distill_matches and pretraining_matches):
        sys.exit("error: the rebuilt corpora differ from the ones the models trained on")
    distill_train = {normalized(s) for s in old_train}
    pretraining_train: set[str] = set()
    held_documents: list[tuple[str, str, list[str]]] = []
    for name, docs in documents.items():
        for document, lines in docs:
            keys = [normalized(s) for s in corpus_sentences(lines)]
            if name == "wikipedia":
                continue
            if is_heldout(document):
                held_documents.append((name, document, keys))
            else:
                pretraining_train.update(keys)
    per_source: dict[str, dict[str, int]] = {}
    unseen: dict[str, str] = {}
    for name, _, keys in held_documents:
        count = per_source.setdefault(
            name, {"documents": 0, "sentences": 0, "in_distillation_training": 0, "unseen": 0}
        )
        count["documents"] += 1
        count["sentences"] += len(keys)
        count["in_distillation_training"] += sum(k in distill_train for k in keys)
        for key in keys:
            if key in kept and key not in distill_train and key not in pretraining_train:
                unseen.setdefault(key, kept[key])
    for key in unseen:
        name = next(n for n, _, keys in held_documents if key in keys)
        per_source[name]["unseen"] += 1
    documents_unseen = sum(
        1 for _, _, keys in held_documents if keys and not any(k in distill_train for k in keys)
    )
    old_heldout_keys = [normalized(s) for s in old_heldout]
    record = {
        "old_splits": {
            "pretraining": "10% of documents held out by a hash of the document's name; the "
            "rebuilt corpus equals albert_en_mini's manifest",
            "distillation": "every document kept, 1% of sentences held out by a hash of the "
            "sentence; the rebuilt corpus equals packaged.json's",
        },
        "pretraining_heldout_documents": per_source,
        "documents_no_stage_trained_on": documents_unseen,
        "sentences_no_stage_trained_on": len(unseen),
        "distillation_heldout_sentences": len(old_heldout),
        "distillation_heldout_sentences_in_pretraining_training_documents": sum(
            k in pretraining_train for k in old_heldout_keys
        ),
        "shared_split_now": shared_split_check(work, documents, excluded),
    }
    return record, sorted(unseen.values()), old_train


def shared_split_check(work: Path, documents: dict, excluded: set[str]) -> dict:
    """The distillation corpus as built now, from the same documents: the sentences that sit on
    the side opposite their document's split (expected: none)."""
    folder = work / "distillation"
    if not (folder / "corpus.json").exists():
        write_corpus({s: iter(d) for s, d in documents.items()}, excluded, folder)
    side = {normalized(s): False for s in (folder / "train.txt").read_text().splitlines()}
    side |= {normalized(s): True for s in (folder / "heldout.txt").read_text().splitlines()}
    in_training_document = {
        normalized(s)
        for docs in documents.values()
        for name, lines in docs
        if not is_heldout(name)
        for s in corpus_sentences(lines)
    }
    wrong, checked = 0, 0
    for docs in documents.values():
        for name, lines in docs:
            checked += 1
            keys = [k for k in map(normalized, corpus_sentences(lines)) if k in side]
            if is_heldout(name):
                wrong += sum(not side[k] and k not in in_training_document for k in keys)
            else:
                wrong += sum(side[k] for k in keys)
    corpus = json.loads((folder / "corpus.json").read_text())
    return {
        "documents": checked,
        "sentences_on_the_wrong_side": wrong,
        "distillation_corpus": {s: corpus[s]["sentences"] for s in ("train", "heldout")},
    }


# === Evaluation ===


def evaluation_text(work: Path) -> dict[str, tuple[Path, list[str]]]:
    """Per evaluation source: its pretraining-format file (written when missing) and its
    sentences of 4 to 64 words."""
    sources = work / "sources"
    readers = {
        "botchan": lambda: botchan_documents(sources / "botchan"),
        "linux-doc": lambda: linux_doc_documents(sources / "linux-doc"),
    }
    out = {}
    for name, read in readers.items():
        documents = read()
        assert all(is_heldout(document) for document, _ in documents)
        path = work / "evaluation" / f"{name}.txt"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join("\n".join(d) + "\n" for _, d in documents if d))
        lines = [s for _, d in documents for s in corpus_sentences(d)]
        out[name] = (path, list(dict.fromkeys(lines)))
    return out


def records(work: Path, text: Path) -> Path:
    """Pretraining records of `text`, made as the pretraining run's held-out records were."""
    from albert_tf.pretrained import model_dir

    out = work / "records" / text.stem
    if not out.exists():
        run = pretraining.RUN
        pretraining.albert_tf(
            "create-pretraining-data", "--input", str(text), "--sp-model",
            str(model_dir(pretraining.NAME) / "spm.model"), "--output", str(out),
            "--max-seq-length", str(run["seq_length"]),
            "--max-predictions-per-seq", str(run["max_predictions"]), "--dupe-factor", "1",
            "--seed", str(run["seed"]), "--num-shards", "1", "--workers", "1",
        )  # fmt: skip
    return out


def models(work: Path) -> dict[str, Path]:
    """The card's models: checkpoint directories (from git history when not in the tree; the
    shipped float16 weights as the package's cache writes them)."""
    from albert_tf.pretrained import checkpoint_dir

    def restore(stage: int) -> Path:
        return history.restore(distillation.resume_dir(stage), distillation.CHECKPOINTS)

    return {
        "pretrain-only": distillation.pretrain_only(work),
        "stage 1": restore(1),
        "stage 2": restore(2),
        "stage 3, float32 checkpoint": restore(3),
        "shipped float16 weights": checkpoint_dir(pretraining.NAME),
    }


def _binomial_se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


def figures(work: Path, texts: dict, unseen: list[str], train: list[str]) -> dict:
    """Each model's figures, kept per model in `work/figures` so a stopped run resumes."""
    from albert_tf.pretraining.evaluate import evaluate

    cache = work / "figures"
    cache.mkdir(parents=True, exist_ok=True)
    evaluation_sentences = [s for _, lines in texts.values() for s in lines]
    out: dict = {}
    for name, model in models(work).items():
        path = cache / f"{name.replace(' ', '_').replace(',', '')}.json"
        if not path.exists():
            scores: dict = {}
            for source, (text, _) in texts.items():
                result = evaluate(
                    str(model), str(records(work, text) / "*.tfrecord"), batch_size=64
                )
                keys = ("num_examples", "num_masked_tokens", "loss", "mlm_accuracy", "sop_accuracy")
                scores[source] = {key: result[key] for key in keys}
            blanks = {
                "evaluation sentences": distillation.blanks_check(
                    {name: model}, evaluation_sentences, train
                ),
                "unseen sentences of the shared sources": distillation.blanks_check(
                    {name: model}, unseen, train
                ),
            }
            scores["blanks"] = blanks
            path.write_text(json.dumps(scores, indent=1) + "\n")
            print(f"{name}: {json.dumps(scores)}", flush=True)
        out[name] = json.loads(path.read_text())
    return out


def _combined(per_source: dict) -> dict:
    """The evaluation sources' figures pooled (accuracies over examples or blanks, loss over
    examples), each with its binomial standard error."""
    examples = sum(s["num_examples"] for s in per_source.values())
    blanks = sum(s["num_masked_tokens"] for s in per_source.values())
    mlm = sum(s["mlm_accuracy"] * s["num_masked_tokens"] for s in per_source.values()) / blanks
    sop = sum(s["sop_accuracy"] * s["num_examples"] for s in per_source.values()) / examples
    loss = sum(s["loss"] * s["num_examples"] for s in per_source.values()) / examples
    return {
        "num_examples": examples,
        "num_masked_tokens": blanks,
        "mlm_accuracy": mlm,
        "mlm_accuracy_se": _binomial_se(mlm, blanks),
        "sop_accuracy": sop,
        "sop_accuracy_se": _binomial_se(sop, examples),
        "loss": loss,
    }


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work", type=Path, default=WORK, help="sources and stages (ignored by git)"
    )
    args = parser.parse_args(argv)
    audited, unseen, old_train = audit(args.work)
    print(json.dumps(audited, indent=1), flush=True)
    texts = evaluation_text(args.work)
    scores = figures(args.work, texts, unseen, old_train)
    rows = {}
    for name, score in scores.items():
        per_source = {s: score[s] for s in texts}
        blanks = {
            column: {"accuracy": b[name], "accuracy_se": _binomial_se(b[name], b["blanks"]),
                     "blanks": b["blanks"], "unigram guess": b["unigram guess"]}
            for column, b in score["blanks"].items()
        }  # fmt: skip
        rows[name] = {
            "sequences": _combined(per_source),
            "per_source": per_source,
            "blanks": blanks,
        }
    record = {
        "about": __doc__.split("\n\n")[1].replace("\n", " "),
        "split": "experiments/heldout.py: HELDOUT_PERCENT of documents held out by a hash of the "
        "document's name, in every corpus; evaluation sources held out whole",
        "heldout_percent": HELDOUT_PERCENT,
        "old_distillation_heldout_percent": OLD_DISTILL_PERCENT,
        "audit": audited,
        "evaluation_text": {
            name: {
                "documents": path.read_text().count("\n\n") + 1,
                "sentences_4_to_64_words": len(lines),
                "sha256": pretraining.sha256(path),
            }
            for name, (path, lines) in texts.items()
        },
        "sources": {
            "botchan": f"PyPI sdist {SENTENCEPIECE}, test/botchan.txt (Project Gutenberg EBook #8868, public domain)",
            "linux-doc": f"Debian {sorted((args.work / 'sources' / 'linux-doc').glob('*.deb'))[-1].name} (GPL-2.0)",
        },
        "models": rows,
        "hardware": {"cpu": _cpu(), "cores": 2, "note": "niced, shared with other work"},
        "standard_errors": "binomial over examples (sentence order) and over blanks (masked-LM); "
        "blanks in one sequence are not independent, so these understate the spread somewhat",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "heldout.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
