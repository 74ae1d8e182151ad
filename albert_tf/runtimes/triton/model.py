"""albert-tf's text classifier as a Triton Python-backend model: ONNX Runtime in process.

This file is copied as `model.py` into each version directory of the model repository that
`albert-tf export --finetuned DIR --triton` writes (`albert_tf.export.triton.repository`), beside
`model.onnx` (the int8 classifier with its tokenizer inside, `albert_tf.export.onnx.classifier`).
It imports nothing of albert-tf: a stock Triton server runs it with numpy, onnxruntime and
onnxruntime-extensions installed.

Triton hands `execute` the requests its dynamic batcher gathered. Their texts (`text`, and
`text_pair` for a pair task: BYTES [n, 1] each) are checked one request at a time, run through
one ONNX Runtime call, and split again: `label` BYTES [n, 1] and `probabilities` FP32 [n, k].
A request whose text is not UTF-8 or holds a lone surrogate gets its own error (as `predict`
refuses such a file); the other requests of the batch are answered. ONNX Runtime's strings end
at a NUL, so a NUL is given to it as `nul_substitute`, a character the export found to give the
same ids as a NUL for this model's tokenizer (both are one unknown piece); a model without one
refuses NULs. The session's thread counts come from the model
configuration's `parameters` (`intra_op_threads`, `inter_op_threads`), never from ORT's
default of one thread per core, which oversubscribes the cores when instances run side by side.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

MODEL_FILE = "model.onnx"
OUTPUTS = ("label", "probabilities")


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
    """The raw-string classifier file at `path` in an ONNX Runtime session on the CPU.

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

    def __call__(self, texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
        """`texts` (`Classifier.texts`), n >= 1 of each input -> `label` object [n] (str) and
        `probabilities` float32 [n, k]."""
        feed = {name: np.array(texts[name], dtype=object) for name in self.inputs}
        label, probabilities = self.session.run(list(OUTPUTS), feed)
        return {"label": label, "probabilities": probabilities.astype(np.float32)}


def parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The `Classifier` settings of a model configuration's `parameters` (Triton's JSON form,
    string values): `intra_op_threads`, `inter_op_threads`, `nul_substitute` (a code point in
    hex, "" for none)."""
    given = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
    code = given.get("nul_substitute", "")
    return dict(
        intra_op_threads=int(given.get("intra_op_threads") or 1),
        inter_op_threads=int(given.get("inter_op_threads") or 1),
        nul_substitute=chr(int(code, 16)) if code else "",
    )


def _encoded(labels: np.ndarray) -> np.ndarray:
    """Labels as UTF-8 bytes, object [n, 1] (ONNX Runtime gives str)."""
    return np.array(
        [s.encode("utf-8") if isinstance(s, str) else s for s in labels], dtype=object
    ).reshape(-1, 1)


class TritonPythonModel:
    """The Triton Python-backend interface: `initialize`, `execute`, `finalize`."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        version_dir = Path(args["model_repository"]) / args["model_version"]
        self.classifier = Classifier(version_dir / MODEL_FILE, **parameters(config))

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
            tensors = [
                pb_utils.Tensor("label", _encoded(outputs["label"][part])),
                pb_utils.Tensor("probabilities", outputs["probabilities"][part]),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def finalize(self) -> None:
        self.classifier = None
