"""Issue 53's learning check: SQuAD 2.0 with ALBERT's own head and with BERT's, fine-tuned from
`albert_en_mini`, against the majority "no answer" baseline.

The data: a SQuAD 2.0-format set built from real text every Python carries, the help topics
(`pydoc_data.topics`) and the standard library's docstrings (`albert_tf.preprocess.corpus`).
A sentence "The|A|An|This SUBJECT VERB OBJECT[.,;:]" (VERB: is, are, returns, raises, ...;
see `TEMPLATE`) gives the question "What VERB the SUBJECT?", answered by OBJECT in a context
of up to three sentences (the sentence and its neighbours; the docstrings are the running
Python's: this ran on 3.11). Each answerable question has an unanswerable twin: a question of
the same template about another document's subject, asked of this context. Documents (not
questions) are split 70/15/15 by a stable hash into train, dev and test; repeated sentences
are kept once.

Each head fine-tunes once per seed (`--restarts 0`, no serving export) with --eval dev:
ALBERT's head picks its null threshold there, as run_squad_v2.py does, and keeps it; BERT's
keeps its 0.0. Both are then scored on test, which no choice saw: EM/F1, HasAns and NoAns,
and the majority baseline ("no answer" for every question). Each run's figures go to
experiments/results/squad_heads/HEAD-seedN.json (a run whose file exists is skipped: the
script resumes), the summary to summary.json.

  nice -n 19 python -m experiments.squad_heads --seeds 2
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "squad_heads"
WORK = ROOT / "data" / "squad_heads"
HEADS = ("albert", "bert")
TEMPLATE = re.compile(
    r"^(?:The|A|An|This) (?P<subject>[a-z][a-z ]{2,30}?) "
    r"(?P<verb>is|are|was|returns|raises|contains|has|means|uses|takes|gives|defines|creates) "
    r"(?P<answer>[A-Za-z\"][^,;:()]{2,40}?)[.,;:]"
)
CONTEXT_SENTENCES = 1  # on each side of the answer's sentence
# The run's settings beside the defaults by size (albert_en_mini: learning rate 3e-4, warmup 0.1).
# Sized for 2 shared CPU cores: short contexts in windows of 64 tokens.
RUN = dict(max_seq_length=64, doc_stride=32, max_query_length=16, epochs=5, batch_size=16)
SCORES = ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1")


def _split(name: str) -> str:
    """train, dev or test for a document, by a stable hash of its name (70/15/15)."""
    bucket = int(hashlib.sha256(name.encode()).hexdigest(), 16) % 100
    return "train" if bucket < 70 else "dev" if bucket < 85 else "test"


def _questions() -> dict[str, list[dict]]:
    """The template matches of every document, by split: subject, question, answer, context."""
    from albert_tf.preprocess.corpus import pydoc_topic_documents, stdlib_documents

    by_split, seen = {"train": [], "dev": [], "test": []}, set()
    for name, sentences in itertools.chain(pydoc_topic_documents(), stdlib_documents()):
        for i, sentence in enumerate(sentences):
            match = TEMPLATE.match(sentence)
            if match is None or sentence in seen:
                continue
            seen.add(sentence)
            around = sentences[max(i - CONTEXT_SENTENCES, 0) : i + CONTEXT_SENTENCES + 1]
            context = " ".join(around)
            subject, verb = match["subject"], match["verb"]
            by_split[_split(name)].append(
                {
                    "document": name,
                    "subject": subject,
                    "question": f"What {verb} the {subject}?",
                    "answer": match["answer"],
                    "answer_start": context.index(sentence) + match.start("answer"),
                    "context": context,
                }
            )
    return by_split


def _squad_json(items: list[dict], seed: int) -> dict:
    """A SQuAD 2.0 document: each item's question, and an unanswerable twin about another
    document's subject that its context does not name."""
    rng = random.Random(seed)
    paragraphs = []
    for n, item in enumerate(items):
        qas = [
            {
                "id": f"{n}",
                "question": item["question"],
                "is_impossible": False,
                "answers": [{"text": item["answer"], "answer_start": item["answer_start"]}],
            }
        ]
        others = [
            o
            for o in items
            if o["document"] != item["document"]
            and o["subject"].lower() not in item["context"].lower()
        ]
        if others:
            other = rng.choice(others)
            qas.append(
                {
                    "id": f"{n}-none",
                    "question": other["question"],
                    "is_impossible": True,
                    "answers": [],
                }
            )
        paragraphs.append({"context": item["context"], "qas": qas})
    return {"version": "v2.0", "data": [{"title": "python-docs", "paragraphs": paragraphs}]}


def build() -> dict[str, Path]:
    """Writes WORK/{train,dev,test}-v2.0.json (the same bytes on every run); their paths."""
    WORK.mkdir(parents=True, exist_ok=True)
    paths = {}
    for n, (split, items) in enumerate(sorted(_questions().items())):
        paths[split] = WORK / f"{split}-v2.0.json"
        text = json.dumps(_squad_json(items, seed=n), indent=1) + "\n"
        if not paths[split].is_file() or paths[split].read_text() != text:
            paths[split].write_text(text, encoding="utf-8")
    return paths


def run_one(head: str, seed: int, paths: dict[str, Path]) -> dict:
    """Fine-tunes `head` with `seed` (dev picks the epoch and ALBERT's threshold); test scores."""
    from albert_tf.benchmarking.machine import cpu_description
    from albert_tf.finetune.predict import predict_examples
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.trainer import finetune

    started = time.monotonic()
    settings = FinetuneSettings(
        task="squad",
        train=str(paths["train"]),
        eval=str(paths["dev"]),
        init="albert_en_mini",
        output=str(WORK / "models" / f"{head}-seed{seed}"),
        overwrite=True,
        squad_head=head,
        seed=seed,
        restarts=0,
        export_serving=False,
        **RUN,
    )
    result = finetune(settings, log=print, progress=False)
    test = result.task.load(str(paths["test"]), result.tokenizer)
    _, scores = predict_examples(result, test)
    best = result.record.history[result.record.best_epoch - 1]["eval"]
    return {
        "head": head,
        "seed": seed,
        "settings": {k: result.settings.record()[k] for k in (*RUN, "learning_rate")},
        "null_score_diff_threshold": result.settings.null_score_diff_threshold,
        "best_epoch": result.record.best_epoch,
        "dev": best,
        "test": scores,
        **result.record.ran(),
        "minutes": (time.monotonic() - started) / 60,
        "cpu": cpu_description(),
    }


def summarize(paths: dict[str, Path]) -> dict:
    """Mean and standard deviation over seeds of each head's test scores, and the baseline."""
    from albert_tf.finetune import metrics
    from albert_tf.finetune.tasks.squad import data

    examples, _ = data.read_squad(paths["test"], training=False)
    gold = {e.qid: list(e.gold_texts) for e in examples}
    baseline = metrics.squad_scores({q: "" for q in gold}, gold)
    summary = {"test_questions": len(gold), "majority_no_answer": baseline, "heads": {}}
    for head in HEADS:
        runs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob(f"{head}-seed*.json"))]
        if not runs:
            continue
        figures = {}
        for name in SCORES:
            values = [r["test"][name] for r in runs]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            figures[name] = {"mean": statistics.mean(values), "sd": spread, "runs": values}
        summary["heads"][head] = {"seeds": [r["seed"] for r in runs], "test": figures}
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="runs per head (seeds 1..N)")
    args = parser.parse_args(argv)
    paths = build()
    RESULTS.mkdir(parents=True, exist_ok=True)
    for seed in range(1, args.seeds + 1):
        for head in HEADS:
            path = RESULTS / f"{head}-seed{seed}.json"
            if not path.is_file():
                record = run_one(head, seed, paths)
                path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    summary = summarize(paths)
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
