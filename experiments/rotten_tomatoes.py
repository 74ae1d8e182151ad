"""The Rotten Tomatoes sentences, the downstream task of the experiments.

The 10,605 movie-review sentences with human ratings shipped in the vaderSentiment 3.3.2 sdist
(`additional_resources/hutto_ICWSM_2014.tar.gz`, `movieReviewSnippets_GroundTruth.txt`, TSV
id/rating/text, latin-1): rating > 0 is positive, < 0 negative, 0 (37 sentences) dropped, and a
seeded 80/10/10 train/dev/test split written as GLUE-style TSVs. Fetched with `pip download` when
missing (the only download) and kept under data/ (git-ignored).

`finetune_and_score` is one fine-tuning run as every experiment does it: the best dev epoch is
kept and the test split is scored once.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from albert_tf.io_utils import atomic_file

VADER_DIR = "hutto_ICWSM_2014"
TRUTH = "_GroundTruth.txt"
SNIPPETS = f"{VADER_DIR}/movieReviewSnippets{TRUTH}"


def fetch(work: Path, name: str = SNIPPETS) -> Path:
    """A file of the VADER ground truth (the movie sentences by default), fetched from the
    vaderSentiment sdist if not there yet."""
    target = work / name
    if target.is_file():
        return target
    work.mkdir(parents=True, exist_ok=True)
    sdist = work / "vaderSentiment-3.3.2.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "vaderSentiment==3.3.2",
                "-d",
                str(work),
            ],
            check=True,
        )
    with tarfile.open(sdist) as outer:
        member = outer.getmember(
            "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
        )
        with tarfile.open(fileobj=outer.extractfile(member)) as inner:
            inner.extract(name, work, filter="data")
    return target


def snippet_rows(path: Path) -> list[tuple[str, float, str]]:
    """`(id, rating, text)` of a VADER ground-truth TSV (latin-1), whitespace normalized."""
    rows = []
    for line in path.read_text(encoding="latin-1").splitlines():
        fields = line.split("\t")
        if len(fields) >= 3:
            rows.append((fields[0], float(fields[1]), " ".join("\t".join(fields[2:]).split())))
    return rows


def write_task_text(work: Path, train: Path, out: Path) -> int:
    """Unlabeled text for task-adaptive pretraining; returns the number of documents.

    The training split's sentences (one document each; no dev or test sentence, no label) and
    VADER's other snippets: Amazon reviews and NYT editorials grouped into their documents
    (ids `doc_sentence`), tweets one per document. Blank lines separate documents, the format
    `albert-tf create-pretraining-data` reads.
    """
    lines = train.read_text(encoding="utf-8").splitlines()[1:]
    documents = [line.rsplit("\t", 1)[0] for line in lines]
    for name in ("amazonReviewSnippets", "nytEditorialSnippets"):
        grouped: dict[str, list[str]] = {}
        for snippet_id, _, text in snippet_rows(fetch(work, f"{VADER_DIR}/{name}{TRUTH}")):
            grouped.setdefault(snippet_id.split("_")[0], []).append(text)
        documents += ["\n".join(sentences) for sentences in grouped.values()]
    documents += [text for _, _, text in snippet_rows(fetch(work, f"{VADER_DIR}/tweets{TRUTH}"))]
    with atomic_file(out) as tmp:
        tmp.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return len(documents)


def split(snippets: Path, out: Path, seed: int = 0) -> dict[str, Path]:
    """Seeded 80/10/10 split into GLUE-style TSVs (`sentence`, `label`)."""
    rows = [
        (text, "positive" if rating > 0 else "negative")
        for _, rating, text in snippet_rows(snippets)
        if rating != 0
    ]
    random.Random(seed).shuffle(rows)
    n = len(rows)
    parts = {
        "train": rows[: int(0.8 * n)],
        "dev": rows[int(0.8 * n) : int(0.9 * n)],
        "test": rows[int(0.9 * n) :],
    }
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, part in parts.items():
        paths[name] = out / f"{name}.tsv"
        text = "sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in part)
        if paths[name].is_file() and paths[name].read_text(encoding="utf-8") == text:
            continue  # runs started side by side read it while it is being written otherwise
        with atomic_file(paths[name]) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return paths


def finetune_and_score(
    paths: dict[str, Path],
    output: Path,
    *,
    init: str,
    sp_model: Path,
    config: Path | None = None,
    seed: int,
    epochs: int,
    learning_rate: float,
    batch_size: int = 32,
    max_seq_length: int = 64,
    dtype: str = "float32",
    max_steps: int | None = None,
) -> dict:
    """Fine-tunes a classifier on `paths["train"]` (best epoch on `paths["dev"]`) and scores
    `paths["test"]` once.

    `init` is a pretrained checkpoint directory or "random" (then `config` gives the
    architecture; a file). `max_steps` cuts training short (smoke runs). Returns dev and test
    accuracy, test F1, the best epoch, what ran (dtype, steps, hardware) and the minutes taken.
    """
    from albert_tf.finetune.predict import load_finetuned, predict_file
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.trainer import finetune

    started = time.time()
    result = finetune(
        FinetuneSettings(
            train=str(paths["train"]),
            output=str(output),
            init=init,
            task="classify",
            max_seq_length=max_seq_length,
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            seed=seed,
            restarts=0,  # one draw per seed: these runs measure, not pick
            reinit_pooler=False,  # as when the committed results were measured
            dtype=dtype,
            train_steps=max_steps,
            eval=str(paths["dev"]),
            config=str(config) if config else None,
            sp_model=str(sp_model),
            overwrite=True,
            export_serving=False,
        )
    )
    _, scores, _ = predict_file(load_finetuned(output), str(paths["test"]))
    return {
        "seed": seed,
        "dev_accuracy": result.record.best_value,
        "best_epoch": result.record.best_epoch,
        "test_accuracy": scores["accuracy"],
        "test_f1": scores["f1"],
        **result.record.ran(),
        "minutes": (time.time() - started) / 60,
    }
