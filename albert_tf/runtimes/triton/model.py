"""albert-tf's fine-tuned text models as a Triton Python-backend model: ONNX Runtime in process.

This file is copied as `model.py` into each version directory of the model repository that
`albert-tf export --finetuned DIR --triton` writes (`albert_tf.export.triton.repository`), beside
`model.onnx` (the int8 raw-string model with its tokenizer inside: a classifier or regression,
`albert_tf.export.onnx.classifier`, or SQuAD, `albert_tf.export.onnx.squad`). It imports nothing
of albert-tf: a stock Triton server runs it with numpy, onnxruntime and onnxruntime-extensions
installed.

Triton hands `execute` the requests its dynamic batcher gathered. Their texts (BYTES [n, 1]
each: `text`, and `text_pair` for a pair task; `question` and `context` for SQuAD) are checked
one request at a time, run through one ONNX Runtime call, and split again into the task's
outputs (`albert_tf.runtimes.triton.layout.served_outputs`), [n, k] or [n, 1] each: a
classifier's `label` and `probabilities`, a regression's `value`, SQuAD's `answer`, `char_start`,
`char_end` and `null_score_diff` (`Reader`). A request whose text is not UTF-8 or holds a lone
surrogate gets its own error (as `predict` refuses such a file); the other requests of the batch
are answered. ONNX Runtime's strings end
at a NUL, so a NUL is given to it as `nul_substitute`, a character the export found to give the
same ids as a NUL for this model's tokenizer (both are one unknown piece); a model without one
refuses NULs. The task and the session's thread counts come from the model
configuration's `parameters` (`task`, `intra_op_threads`, `inter_op_threads`), never from ORT's
default of one thread per core, which oversubscribes the cores when instances run side by side.
"""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

MODEL_FILE = "model.onnx"


class TextError(ValueError):
    """A text the classifier refuses: not UTF-8, or holding a NUL or a lone surrogate."""


def check_text(value: bytes | str, index: int, nul_substitute: str = "") -> str:
    """`value` (UTF-8 bytes or a str) as a str, each NUL replaced by `nul_substitute`; TextError,
    naming text `index`, for bytes that are not UTF-8, a lone surrogate, or a NUL without a
    substitute."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise TextError(f"text {index} is not valid UTF-8") from None
    else:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise TextError(
                f"text {index} holds a lone surrogate, which UTF-8 cannot encode"
            ) from None
    if "\x00" in value:
        if not nul_substitute:
            raise TextError(f"text {index} holds a NUL character")
        value = value.replace("\x00", nul_substitute)
    return value


class Classifier:
    """The raw-string classifier file at `path` in an ONNX Runtime session on the CPU; the base
    of the other tasks' models (`Regressor`, `Reader`), which differ in their outputs.

    `intra_op_threads`, `inter_op_threads`: the session's threads (0: ORT's default, one per
    core). `nul_substitute`: what a NUL is given to ONNX Runtime as ("" refuses NULs).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        intra_op_threads: int = 1,
        inter_op_threads: int = 1,
        nul_substitute: str = "",
    ):
        import onnxruntime as ort
        import onnxruntime_extensions

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = inter_op_threads
        options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.nul_substitute = nul_substitute

    def texts(self, values: dict[str, Any]) -> dict[str, list[str]]:
        """Each input's values (bytes or str, any shape holding n) as n checked strings
        (`check_text`); TextError for a missing input, a refused text or unequal counts."""
        texts = {}
        for name in self.inputs:
            if values.get(name) is None:
                raise TextError(f"input {name!r} is missing")
            flat = np.asarray(values[name], dtype=object).reshape(-1)
            texts[name] = [check_text(v, i, self.nul_substitute) for i, v in enumerate(flat)]
        if len({len(v) for v in texts.values()}) > 1:
            raise TextError(f"inputs {', '.join(self.inputs)} differ in length")
        return texts

    def run(self, texts: dict[str, list[str]], outputs: list[str]) -> list[np.ndarray]:
        """The model's `outputs` for `texts` (`Classifier.texts`)."""
        feed = {name: np.array(texts[name], dtype=object) for name in self.inputs}
        return self.session.run(outputs, feed)

    def __call__(self, texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
        """`texts` (`Classifier.texts`), n >= 1 of each input -> `label` object [n] (str) and
        `probabilities` float32 [n, k]."""
        label, probabilities = self.run(texts, ["label", "probabilities"])
        return {"label": label, "probabilities": probabilities.astype(np.float32)}


class Regressor(Classifier):
    """A raw-string regression model: `value` float32 [n] of each text (or pair)."""

    def __call__(self, texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
        (value,) = self.run(texts, ["value"])
        return {"value": value.astype(np.float32)}


def _normalized_length(c: str) -> int:
    """How many characters other than whitespace `c` is once normalized as ALBERT's tokenizer
    normalizes it (NFKD without combining marks, lowercased)."""
    kept = "".join(d for d in unicodedata.normalize("NFKD", c) if not unicodedata.combining(d))
    return sum(not d.isspace() for d in kept.lower())


def answer_span(context: str, before: str, answer: str) -> tuple[int, int]:
    """The characters [start, end) of `context` that the model's `answer` (its pieces joined,
    stripped) spans, `before` being the context's pieces ahead of it: both are counted in
    characters other than whitespace, which the tokenizer's normalization keeps one for one
    (an unknown piece, " ⁇ ", counts one). (-1, -1) for no answer or one the context does not
    reach."""
    first = sum(not c.isspace() for c in before)
    last = first + sum(not c.isspace() for c in answer)
    if not answer or last == first:
        return -1, -1
    start, seen = -1, 0
    for index, c in enumerate(context):
        if start < 0 and seen >= first and not c.isspace():
            start = index
        seen += _normalized_length(c)
        if start >= 0 and seen >= last:
            return start, index + 1
    return -1, -1


class Reader(Classifier):
    """A raw-string SQuAD model (`albert_tf.export.onnx.squad`): `question` and `context` ->
    `answer` object [n] (the context's characters it spans, as `predict` gives it; "" for no
    answer), `char_start`, `char_end` int32 [n] (-1 for no answer) and `null_score_diff`
    float32 [n]. One window per question: a context past the sequence is cut (`predict`
    strides over it)."""

    def __call__(self, texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
        answer, before, null = self.run(texts, ["answer", "context_before", "null_score_diff"])
        spans = [
            answer_span(context, str(b), str(a))
            for context, b, a in zip(texts["context"], before, answer, strict=True)
        ]
        starts = np.array([s for s, _ in spans], dtype=np.int32)
        ends = np.array([e for _, e in spans], dtype=np.int32)
        found = [
            c[s:e] if s >= 0 else "" for c, (s, e) in zip(texts["context"], spans, strict=True)
        ]
        return {
            "answer": np.array(found, dtype=object),
            "char_start": starts,
            "char_end": ends,
            "null_score_diff": null.astype(np.float32),
        }


RUNNERS = {"classify": Classifier, "regress": Regressor, "squad": Reader}


def parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The model's settings of a model configuration's `parameters` (Triton's JSON form, string
    values): `task` (a key of `RUNNERS`, "classify" when not given), `intra_op_threads`,
    `inter_op_threads`, `nul_substitute` (a code point in hex, "" for none)."""
    given = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
    code = given.get("nul_substitute", "")
    return dict(
        task=given.get("task") or "classify",
        intra_op_threads=int(given.get("intra_op_threads") or 1),
        inter_op_threads=int(given.get("inter_op_threads") or 1),
        nul_substitute=chr(int(code, 16)) if code else "",
    )


def _tensor(values: np.ndarray) -> np.ndarray:
    """An output as Triton takes it: strings as UTF-8 bytes (ONNX Runtime gives str), one value
    per text as [n, 1]."""
    if values.dtype == object:
        values = np.array([v.encode("utf-8") if isinstance(v, str) else v for v in values], object)
    return values.reshape(len(values), -1)


class TritonPythonModel:
    """The Triton Python-backend interface: `initialize`, `execute`, `finalize`."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        version_dir = Path(args["model_repository"]) / args["model_version"]
        settings = parameters(config)
        runner = RUNNERS[settings.pop("task")]
        self.classifier = runner(version_dir / MODEL_FILE, **settings)

    def execute(self, requests: list[Any]) -> list[Any]:
        """One response per request, in order; one ONNX Runtime call for the whole batch."""
        import triton_python_backend_utils as pb_utils

        batch: dict[str, list[str]] = {name: [] for name in self.classifier.inputs}
        sizes: list[int | pb_utils.TritonError] = []
        for request in requests:
            values = {}
            for name in self.classifier.inputs:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                values[name] = None if tensor is None else tensor.as_numpy()
            try:
                texts = self.classifier.texts(values)
            except TextError as error:
                sizes.append(pb_utils.TritonError(str(error), pb_utils.TritonError.INVALID_ARG))
                continue
            for name, got in texts.items():
                batch[name] += got
            sizes.append(len(texts[self.classifier.inputs[0]]))
        rows = len(batch[self.classifier.inputs[0]])
        outputs = self.classifier(batch) if rows else {}
        responses, start = [], 0
        for size in sizes:
            if not isinstance(size, int):
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=size))
                continue
            part = slice(start, start + size)
            start += size
            tensors = [pb_utils.Tensor(k, _tensor(v[part])) for k, v in outputs.items()]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def finalize(self) -> None:
        self.classifier = None
