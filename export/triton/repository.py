"""The writer of a fine-tuned classifier's Triton model repository: `export --finetuned DIR
--triton`.

`write_triton` lays `DIR/triton/` out as `albert_tf.runtimes.triton.layout` says (the names,
`config.pbtxt`): the int8 raw-string classifier, the Python-backend model file that runs it
(`albert_tf.runtimes.triton.model`, copied as `model.py`), and the report of its agreement with
`predict` on probe texts. `albert-tf serve DIR` serves what it writes. The classifier is the
`onnx` extra's, imported by the functions that make it.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from albert_tf.finetune.predict import load_examples, predict_examples
from albert_tf.runtimes.triton import model as served
from albert_tf.runtimes.triton.layout import (
    CONFIG_FILE,
    MODEL_NAME,
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
    labels = list(finetuned.settings.labels)
    return np.array([[r["probabilities"][label] for label in labels] for r in records])


def probe_texts(inputs: list[str]) -> dict[str, list[str]]:
    """Probe texts for the agreement report: prose and long topics (`classifier.probe_texts`),
    one line each, and texts with NULs."""
    from albert_tf.export.onnx.classifier import probe_texts as prose

    flat = {n: [" ".join(t.split()) for t in v] for n, v in prose(len(inputs)).items()}
    nuls = ["a\x00b", "the \x00 film", "\x00"]
    return {n: flat[n] + (nuls if i == 0 else nuls[::-1]) for i, n in enumerate(inputs)}


def write_triton(source: Any, target: Path) -> dict[str, Any]:
    """The fine-tuned `triton` writer (`albert_tf.export.writers`): the repository that
    `albert_tf.runtimes.triton.layout` describes, into `target`; returns the report (agreement
    with `predict`)."""
    import onnx

    from albert_tf.export.onnx import optimize
    from albert_tf.export.onnx.classifier import check_exportable, classifier_graphs
    from albert_tf.export.onnx.encoder import encoder_graph

    finetuned = source.finetuned
    check_exportable(finetuned.task)
    settings = finetuned.settings
    config = finetuned.model.encoder.config
    fused = optimize.fuse(
        encoder_graph(finetuned.model.encoder), config.num_attention_heads, config.hidden_size
    )
    (graph,) = classifier_graphs(
        finetuned, {"int8": optimize.quantize_dynamic_int8(fused)}
    ).values()
    inputs = ["text", "text_pair"][: 2 if settings.has_pair else 1]
    labels = list(settings.labels or [])
    version = target / MODEL_NAME / VERSION
    version.mkdir(parents=True)
    onnx.save(graph, str(version / served.MODEL_FILE))
    shutil.copyfile(served.__file__, version / "model.py")
    substitute = nul_substitute(finetuned.tokenizer)
    serving = default_config()
    (target / MODEL_NAME / CONFIG_FILE).write_text(
        config_pbtxt(MODEL_NAME, inputs, len(labels), serving, substitute), encoding="utf-8"
    )
    classifier = served.Classifier(version / served.MODEL_FILE, 1, 1, substitute)
    texts = probe_texts(inputs)
    if not substitute:  # NULs are refused (400), not compared
        texts = {n: [t.replace("\x00", " ") for t in v] for n, v in texts.items()}
    got = classifier(classifier.texts(texts))
    want = _predict_probabilities(finetuned, texts)
    want_labels = [labels[i] for i in want.argmax(axis=1)]
    return {
        "model": MODEL_NAME,
        "inputs": inputs,
        "labels": labels,
        "max_seq_length": settings.max_seq_length,
        "nul": f"given to ONNX Runtime as U+{ord(substitute):04X}" if substitute else "refused",
        "nul_substitute": f"{ord(substitute):x}" if substitute else "",
        "config": dataclasses.asdict(serving),
        "against_predict": dict(
            texts=len(want_labels),
            labels_equal=[str(x) for x in got["label"]] == want_labels,
            probabilities_max_abs_diff=float(np.abs(got["probabilities"] - want).max()),
        ),
        "bytes": (version / served.MODEL_FILE).stat().st_size,
    }


def describe_triton(path: Path, report: dict[str, Any]) -> list[str]:
    """The `triton` writer's lines for `albert-tf export` (`albert_tf.export.writers`)."""
    agreement = report["against_predict"]
    return [
        f"wrote {path}: labels equal to predict's on {agreement['texts']} probe texts: "
        f"{agreement['labels_equal']}, probabilities within "
        f"{agreement['probabilities_max_abs_diff']:.1e}"
    ]
