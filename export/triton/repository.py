"""The writer of a fine-tuned model's Triton model repository: `export --finetuned DIR --triton`.

`write_triton` lays `DIR/triton/` out as `albert_tf.runtimes.triton.layout` says (the names,
`config.pbtxt`): the int8 raw-string model (a classifier, a regression, or SQuAD with either
head), the Python-backend model file that runs it (`albert_tf.runtimes.triton.model`, copied as
`model.py`), and the report of its agreement with `predict` on probe texts. `albert-tf serve
DIR` serves what it writes. The ONNX model is the `onnx` extra's, imported by the functions that
make it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from albert_tf.errors import ExportError
from albert_tf.finetune.predict import load_examples, predict_examples
from albert_tf.runtimes.triton import model as served
from albert_tf.runtimes.triton.layout import (
    CONFIG_FILE,
    MODEL_NAMES,
    VERSION,
    config_pbtxt,
    default_config,
)

# A noncharacter, which no tokenizer trained on text holds: given to ONNX Runtime for a NUL
# when the model's tokenizer gives both the same ids (`nul_substitute`).
NUL_SUBSTITUTE = "\ufdd0"


def nul_substitute(tokenizer: Any) -> str:
    """`NUL_SUBSTITUTE` if `tokenizer` (an `AlbertTokenizer`) gives it the ids of a NUL in
    every probe position (alone, inside, beside spaces and digits, runs), else ""."""
    probes = ["\x00", "a\x00b", "a \x00 b", "\x00\x00a", "1,\x00", "x\x00\u00e9", "\x00 \x00"]
    for probe in probes:
        if tokenizer.encode(probe) != tokenizer.encode(probe.replace("\x00", NUL_SUBSTITUTE)):
            return ""
    return NUL_SUBSTITUTE


def _predict_probabilities(finetuned: Any, texts: dict[str, list[str]]) -> np.ndarray:
    """`predict`'s probabilities [n, k] of `texts`, read from a TSV file as `predict` reads one."""
    labels = list(finetuned.settings.labels)
    records = predict_texts(finetuned, texts)
    return np.array([[r["probabilities"][label] for label in labels] for r in records])


def predict_texts(finetuned: Any, texts: dict[str, list[str]]) -> list[dict]:
    """`predict`'s records of `texts` (`text`, and `text_pair`: n each), read from a TSV file
    as `predict` reads one."""
    names = list(texts)
    rows = zip(*(texts[n] for n in names), strict=True)
    with tempfile.TemporaryDirectory(prefix="albert-tf-triton-") as tmp:
        path = Path(tmp) / "probes.tsv"
        lines = ["\t".join(names)] + ["\t".join(row) for row in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        columns = dict(text_column=names[0], quoting="none")
        if len(names) == 2:
            columns["text_pair_column"] = names[1]
        records, _ = predict_examples(finetuned, load_examples(finetuned, str(path), **columns))
    return records


def probe_texts(inputs: list[str]) -> dict[str, list[str]]:
    """Probe texts for the agreement report: prose and long topics (`classifier.probe_texts`),
    one line each, and texts with NULs."""
    from albert_tf.export.onnx.classifier import probe_texts as prose

    flat = {n: [" ".join(t.split()) for t in v] for n, v in prose(len(inputs)).items()}
    nuls = ["a\x00b", "the \x00 film", "\x00"]
    return {n: flat[n] + (nuls if i == 0 else nuls[::-1]) for i, n in enumerate(inputs)}


def predict_squad(finetuned: Any, questions: list[str], contexts: list[str]) -> list[dict]:
    """`predict`'s records (`answer`, `char_start`, `char_end`, `null_score_diff`) of the
    questions on their contexts, read from a SQuAD file as `predict` reads one."""
    paragraphs = [
        {"context": c, "qas": [{"id": str(i), "question": q, "answers": []}]}
        for i, (q, c) in enumerate(zip(questions, contexts, strict=True))
    ]
    with tempfile.TemporaryDirectory(prefix="albert-tf-triton-") as tmp:
        path = Path(tmp) / "probes.json"
        path.write_text(json.dumps({"data": [{"paragraphs": paragraphs}]}), encoding="utf-8")
        records, _ = predict_examples(finetuned, load_examples(finetuned, str(path)))
    return sorted(records, key=lambda r: int(r["id"]))


def _one_window(finetuned: Any, question: str, context: str) -> str:
    """The longest run of `context`'s first words that fits one window beside `question` (the
    served model reads one window; `predict` strides over more)."""
    settings, tokenizer = finetuned.settings, finetuned.tokenizer
    room = (
        settings.max_seq_length
        - 3
        - min(len(tokenizer.encode(question)), settings.max_query_length)
    )
    words = context.split()
    while words and len(tokenizer.encode(" ".join(words))) > room:
        words.pop()
    return " ".join(words)


def _squad_model(finetuned: Any, encoder: Any) -> tuple[Any, dict[str, Any]]:
    """(the raw-string SQuAD model around `encoder`, either head, its report's task fields)."""
    from albert_tf.export.onnx.squad import SQUAD_INPUTS, squad_graphs

    (graph,) = squad_graphs(finetuned, {"int8": encoder}).values()
    head = "albert" if finetuned.task.albert_head else "bert"
    return graph, {"task": "squad", "squad_head": head, "inputs": list(SQUAD_INPUTS)}


def _squad_agreement(finetuned: Any, runner: Any) -> dict[str, Any]:
    """How the served SQuAD model agrees with `predict` on probe questions (each context cut
    to one window)."""
    from albert_tf.export.onnx.squad import probe_questions

    probes = probe_questions(finetuned.tokenizer, finetuned.model.encoder.config.vocab_size)
    questions = [str(q) for q in probes["question"]]
    contexts = [
        _one_window(finetuned, q, str(c)) for q, c in zip(questions, probes["context"], strict=True)
    ]
    got = runner(runner.texts({"question": questions, "context": contexts}))
    want = predict_squad(finetuned, questions, contexts)
    spans = [(r["answer"], r["char_start"], r["char_end"]) for r in want]
    served = list(
        zip(got["answer"], got["char_start"].tolist(), got["char_end"].tolist(), strict=True)
    )
    # predict has no null score on v1.1 data with BERT's head (null); the model gives one
    nulls = [(g, r["null_score_diff"]) for g, r in zip(got["null_score_diff"], want, strict=True)]
    null_diffs = [abs(float(g) - w) for g, w in nulls if w is not None]
    return dict(
        texts=len(want),
        answered_by_predict=sum(bool(r["answer"]) for r in want),
        answers_equal=served == spans,
        answer_agreement=float(np.mean([a == b for a, b in zip(served, spans, strict=True)])),
        null_score_diff_max_abs_diff=max(null_diffs) if null_diffs else None,
    )


def _classifier_agreement(finetuned: Any, runner: Any, inputs: list[str], nul: str) -> dict:
    """How the served classifier or regression agrees with `predict` on `probe_texts`."""
    labels = list(finetuned.settings.labels or [])
    texts = probe_texts(inputs)
    if not nul:  # NULs are refused (400), not compared
        texts = {n: [t.replace("\x00", " ") for t in v] for n, v in texts.items()}
    got = runner(runner.texts(texts))
    if "value" in got:
        want = np.array([r["prediction"] for r in predict_texts(finetuned, texts)])
        return dict(texts=len(want), values_max_abs_diff=float(np.abs(got["value"] - want).max()))
    want = _predict_probabilities(finetuned, texts)
    want_labels = [labels[i] for i in want.argmax(axis=1)]
    return dict(
        texts=len(want_labels),
        labels_equal=[str(x) for x in got["label"]] == want_labels,
        probabilities_max_abs_diff=float(np.abs(got["probabilities"] - want).max()),
    )


def write_triton(source: Any, target: Path) -> dict[str, Any]:
    """The fine-tuned `triton` writer (`albert_tf.export.writers`): the repository that
    `albert_tf.runtimes.triton.layout` describes, into `target`; returns the report (agreement
    with `predict`). ExportError for a task it does not serve (`MODEL_NAMES` lists those it
    does)."""
    import onnx

    from albert_tf.export.onnx import optimize
    from albert_tf.export.onnx.classifier import classifier_graphs
    from albert_tf.export.onnx.encoder import encoder_graph

    finetuned = source.finetuned
    task = finetuned.task.settings.task
    if task not in MODEL_NAMES:
        raise ExportError(
            f"Triton export of fine-tuned models covers {', '.join(MODEL_NAMES)} tasks; "
            f"this one is {task}"
        )
    settings = finetuned.settings
    config = finetuned.model.encoder.config
    fused = optimize.fuse(
        encoder_graph(finetuned.model.encoder), config.num_attention_heads, config.hidden_size
    )
    encoder = optimize.quantize_dynamic_int8(fused)
    if task == "squad":
        graph, fields = _squad_model(finetuned, encoder)
    else:
        (graph,) = classifier_graphs(finetuned, {"int8": encoder}).values()
        inputs = ["text", "text_pair"][: 2 if settings.has_pair else 1]
        fields = {"task": task, "inputs": inputs}
        if task == "classify":
            fields["labels"] = list(settings.labels or [])
    name = MODEL_NAMES[task]
    version = target / name / VERSION
    version.mkdir(parents=True)
    onnx.save(graph, str(version / served.MODEL_FILE))
    shutil.copyfile(served.__file__, version / "model.py")
    substitute = nul_substitute(finetuned.tokenizer)
    serving = default_config()
    num_labels = len(fields.get("labels", []))
    (target / name / CONFIG_FILE).write_text(
        config_pbtxt(name, fields["inputs"], num_labels, serving, substitute, task),
        encoding="utf-8",
    )
    runner = served.RUNNERS[task](version / served.MODEL_FILE, 1, 1, substitute)
    if task == "squad":
        agreement = _squad_agreement(finetuned, runner)
    else:
        agreement = _classifier_agreement(finetuned, runner, fields["inputs"], substitute)
    return {
        "model": name,
        **fields,
        "max_seq_length": settings.max_seq_length,
        "nul": f"given to ONNX Runtime as U+{ord(substitute):04X}" if substitute else "refused",
        "nul_substitute": f"{ord(substitute):x}" if substitute else "",
        "config": dataclasses.asdict(serving),
        "against_predict": agreement,
        "bytes": (version / served.MODEL_FILE).stat().st_size,
    }


def describe_triton(path: Path, report: dict[str, Any]) -> list[str]:
    """The `triton` writer's lines for `albert-tf export` (`albert_tf.export.writers`)."""
    agreement = report["against_predict"]
    if report.get("task") == "squad":
        null = agreement["null_score_diff_max_abs_diff"]
        return [
            f"wrote {path}: answers and character offsets equal to predict's on "
            f"{agreement['answer_agreement']:.1%} of {agreement['texts']} probe questions"
            + ("" if null is None else f", null_score_diff within {null:.1e}")
        ]
    if report.get("task") == "regress":
        return [
            f"wrote {path}: values within {agreement['values_max_abs_diff']:.1e} of predict's "
            f"on {agreement['texts']} probe texts"
        ]
    return [
        f"wrote {path}: labels equal to predict's on {agreement['texts']} probe texts: "
        f"{agreement['labels_equal']}, probabilities within "
        f"{agreement['probabilities_max_abs_diff']:.1e}"
    ]
