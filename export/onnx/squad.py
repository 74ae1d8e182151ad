"""A fine-tuned SQuAD model as raw-string ONNX models, with ALBERT's SQuAD 2.0 head or BERT's.

`squad_graphs(finetuned, encoders)` builds, for each encoder graph, one model: inputs
`question` and `context` strings [B]; outputs as `serving/`'s signature (`Squad.serving_function`):
`answer` string [B] (the answer's pieces joined, "▁" as a space, stripped; "" for no answer),
`start_token`, `end_token` int32 [B] (0 for no answer), `null_score_diff` float32 [B] (ALBERT's
answer-class logit; BERT's null score less the best pair's), then ALBERT's beam
(`start_top_log_probs`, `start_top_index` [B, K], `end_top_log_probs`, `end_top_index`
[B, K * K']) or BERT's `start_logits`, `end_logits` [B, S], and `context_before` string [B]
(the context's pieces before the answer joined, "▁" as a space, not stripped; "" for no answer:
where `albert_tf.runtimes.triton.model` finds the answer's characters in the context). One
window per question, as `serving/`: the question keeps its first `max_query_length` tokens and
the context the rest (`albert_tf.export.onnx.text.preprocess_graph`'s `first_bound`).

The head is `albert_tf.finetune.tasks.squad.heads`'s computation in ONNX operators (TopK for the
beam, OneHot products for the start states, LayerNormalization), and the answer is chosen as
`Squad._serve_beam` does; BERT's pairs are scored and chosen as `Squad._serve_pairs` does.
`export --finetuned --onnx` (`write_onnx_squad`) writes ALBERT's head's; `export --triton`
(`albert_tf.export.triton.repository`) either.

The SQuAD task's one part outside its package (`albert_tf.finetune.tasks.squad`): it builds on
this folder's graph builder and raw-string preprocessing (`encoder.GraphBuilder`,
`text.preprocess_graph`), and the layers (pyproject.toml's import-linter contracts) put
`albert_tf.export` above `albert_tf.finetune`, so the task may not import them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops serving/ uses)
from onnx import TensorProto, helper

from albert_tf.export.onnx import optimize
from albert_tf.export.onnx.encoder import OPSET, GraphBuilder, encoder_graph
from albert_tf.export.onnx.text import CONTRIB, preprocess_graph, raw_string_models
from albert_tf.export.onnx.writer import run, save_models, session
from albert_tf.finetune.directory import SERVING_DIR
from albert_tf.preprocess.corpus import pydoc_topic_documents

SQUAD_INPUTS = ("question", "context")
BEAM_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index")
SERVING_OUTPUTS = ("answer", "start_token", "end_token", "null_score_diff", *BEAM_OUTPUTS)
MASKED = 1e30  # tasks.squad.heads.MASKED


class _Decoding:
    """What choosing an answer reads: the beam sizes, `max_answer_length`, and the null
    threshold `Squad.null_threshold` gives (None: answer every question)."""

    def __init__(
        self, start_n_top: int, end_n_top: int, max_answer_length: int, threshold: float | None
    ) -> None:
        self.start_n_top, self.end_n_top = start_n_top, end_n_top
        self.max_answer_length, self.threshold = max_answer_length, threshold

    @classmethod
    def of(cls, task: Any) -> _Decoding:
        s = task.settings
        return cls(s.start_n_top, s.end_n_top, s.max_answer_length, task.null_threshold())


def _constants(g: GraphBuilder, seq_length: int) -> None:
    for name, value, dtype in (
        ("zero", 0, np.int64),
        ("one", 1, np.int64),
        ("one_f", 1.0, np.float32),
        ("masked", MASKED, np.float32),
        ("axis_1", [1], np.int64),
        ("axis_2", [2], np.int64),
        ("axis_last", [-1], np.int64),
        ("positions", np.arange(seq_length)[np.newaxis], np.int64),  # [1, S]
        ("onehot_values", [0.0, 1.0], np.float32),
        ("depth", seq_length, np.int64),
        ("empty", np.array([""], dtype=object), object),
        ("flat_beam", [0, -1], np.int64),
    ):
        g.constant(f"const/{name}", value, dtype)


def _answer_mask(g: GraphBuilder, mask: str, types: str) -> tuple[str, str]:
    """(p_mask float [B, S], in_context bool [B, S]) of int64 `mask` and `types` [B, S]."""
    length = g.node("ReduceSum", [mask, "const/axis_1"], "mask", keepdims=1)  # [B, 1]
    last = g.node("Sub", [length, "const/one"], "mask")
    context = g.node(
        "And",
        [
            g.node("Equal", [types, "const/one"], "mask"),
            g.node("Less", ["const/positions", last], "mask"),
        ],
        "mask",
    )
    keep = g.node(
        "Or", [context, g.node("Equal", ["const/positions", "const/zero"], "mask")], "mask"
    )
    p_mask = g.node(
        "Sub", ["const/one_f", g.node("Cast", [keep], "mask", to=TensorProto.FLOAT)], "mask"
    )
    return p_mask, context


def _masked_log_softmax(g: GraphBuilder, logits: str, p_mask: str, prefix: str) -> tuple[str, str]:
    """(masked logits, their log-softmax over the last axis): x (1 - p) - 1e30 p."""
    kept = g.node("Mul", [logits, g.node("Sub", ["const/one_f", p_mask], prefix)], prefix)
    masked = g.node("Sub", [kept, g.node("Mul", [p_mask, "const/masked"], prefix)], prefix)
    return masked, g.node("LogSoftmax", [masked], prefix, axis=-1)


def _end_log_probs(
    g: GraphBuilder, head: Any, states: str, start_states: str, p_mask: str, hidden: int
) -> str:
    """End log-probs [B, K, S] for each beam start (states [B, S, H], start states [B, K, H])."""
    end = head.end_logits
    kernel = end.dense_0.kernel.numpy()  # [2H, H]: the position's state first
    top = g.constant("end_logits/dense_0/kernel_position", kernel[:hidden])
    bottom = g.constant("end_logits/dense_0/kernel_start", kernel[hidden:])
    x = g.node(
        "Add",
        [
            g.node("Unsqueeze", [g.node("MatMul", [states, top], "end"), "const/axis_1"], "end"),
            g.node(
                "Unsqueeze",
                [g.node("MatMul", [start_states, bottom], "end"), "const/axis_2"],
                "end",
            ),
        ],
        "end",
    )  # [B, K, S, H]
    x = g.node("Tanh", [g.node("Add", [x, g.weight(end.dense_0.bias)], "end")], "end")
    norm = end.layer_norm
    x = g.node(
        "LayerNormalization",
        [x, g.weight(norm.gamma), g.weight(norm.beta)],
        "end",
        axis=-1,
        epsilon=float(norm.epsilon),
    )
    x = g.node(
        "Add",
        [g.node("MatMul", [x, g.weight(end.dense_1.kernel)], "end"), g.weight(end.dense_1.bias)],
        "end",
    )
    logits = g.node("Squeeze", [x, "const/axis_last"], "end")  # [B, K, S]
    mask = g.node("Unsqueeze", [p_mask, "const/axis_1"], "end")  # [B, 1, S]
    return _masked_log_softmax(g, logits, mask, "end")[1]


def _beam(g: GraphBuilder, head: Any, states: str, p_mask: str, hidden: int) -> dict[str, str]:
    """The head's inference outputs (`SquadV2Head._beam`, `cls_logits`) from states [B, S, H]."""
    k, k_end = head.start_n_top, head.end_n_top
    start = g.node(
        "Add",
        [
            g.node("MatMul", [states, g.weight(head.start_logits.kernel)], "start"),
            g.weight(head.start_logits.bias),
        ],
        "start",
    )
    masked, start_log_probs = _masked_log_softmax(
        g, g.node("Squeeze", [start, "const/axis_last"], "start"), p_mask, "start"
    )
    top_k = g.constant("beam/k", [k], np.int64)
    start_top, start_index = g.multi_node("TopK", [start_log_probs, top_k], "beam", 2, axis=-1)
    one_hot = g.node("OneHot", [start_index, "const/depth", "const/onehot_values"], "beam", axis=-1)
    start_states = g.node("MatMul", [one_hot, states], "beam")  # [B, K, H]
    end_log_probs = _end_log_probs(g, head, states, start_states, p_mask, hidden)
    top_end = g.constant("beam/k_end", [k_end], np.int64)
    end_top, end_index = g.multi_node("TopK", [end_log_probs, top_end], "beam", 2, axis=-1)
    answer = head.answer_class
    weights = g.node(
        "Unsqueeze", [g.node("Softmax", [masked], "answer", axis=-1), "const/axis_1"], "answer"
    )
    weighted = g.node(
        "Squeeze", [g.node("MatMul", [weights, states], "answer"), "const/axis_1"], "answer"
    )
    cls_state = g.node("Gather", [states, "const/zero"], "answer", axis=1)  # [B, H]
    x = g.node("Concat", [weighted, cls_state], "answer", axis=-1)
    x = g.node(
        "Tanh",
        [
            g.node(
                "Add",
                [
                    g.node("MatMul", [x, g.weight(answer.dense_0.kernel)], "answer"),
                    g.weight(answer.dense_0.bias),
                ],
                "answer",
            )
        ],
        "answer",
    )
    cls_logits = g.node(
        "Squeeze",
        [g.node("MatMul", [x, g.weight(answer.dense_1.kernel)], "answer"), "const/axis_last"],
        "answer",
    )
    return {
        "start_top_log_probs": start_top,
        "start_top_index": start_index,  # int64 [B, K]
        "end_top_log_probs": g.node("Reshape", [end_top, "const/flat_beam"], "beam"),
        "end_top_index": g.node("Reshape", [end_index, "const/flat_beam"], "beam"),
        "cls_logits": cls_logits,
    }


def _at(g: GraphBuilder, values: str, positions: str, prefix: str) -> str:
    """values [B, S] at positions int64 [B, N] -> [B, N]."""
    return g.node("GatherElements", [values, positions], prefix, axis=1)


def _per_entry(g: GraphBuilder, values: str, settings: Any) -> str:
    """A start's value [B, K] repeated for each of its ends: [B, K * K'] in the beam's order."""
    shape = g.constant(
        f"pick/beam_shape_{len(g.nodes)}", [1, settings.start_n_top, settings.end_n_top], np.int64
    )
    expanded = g.node(
        "Expand", [g.node("Unsqueeze", [values, "const/axis_2"], "pick"), shape], "pick"
    )
    return g.node("Reshape", [expanded, "const/flat_beam"], "pick")


def _valid(
    g: GraphBuilder, starts: str, ends: str, ids: str, context: str, settings: Any, blank_id: int
) -> str:
    """bool [B, N] of pairs (int64 [B, N] each) that may be answers (`squad._Spans.valid`):
    both in the context, end >= start, at most max_answer_length tokens, not only blanks."""
    blank = g.node("Equal", [ids, g.constant("pick/blank", blank_id, np.int64)], "pick")
    words = g.node("Cast", [g.node("Not", [blank], "pick")], "pick", to=TensorProto.INT64)
    cumulative = g.node("CumSum", [words, "const/one"], "pick")
    inner = g.node(
        "Sub", [_at(g, cumulative, ends, "pick"), _at(g, cumulative, starts, "pick")], "pick"
    )
    count = g.node("Add", [inner, _at(g, words, starts, "pick")], "pick")
    context_int = g.node("Cast", [context], "pick", to=TensorProto.INT64)
    length = g.node("Sub", [ends, starts], "pick")
    longest = g.constant("pick/max_answer_length", settings.max_answer_length, np.int64)
    conditions = [
        g.node("Equal", [_at(g, context_int, starts, "pick"), "const/one"], "pick"),
        g.node("Equal", [_at(g, context_int, ends, "pick"), "const/one"], "pick"),
        g.node("GreaterOrEqual", [length, "const/zero"], "pick"),
        g.node("Less", [length, longest], "pick"),
        g.node("Greater", [count, "const/zero"], "pick"),
    ]
    valid = conditions[0]
    for condition in conditions[1:]:
        valid = g.node("And", [valid, condition], "pick")
    return valid


def _choose(
    g: GraphBuilder, beam: dict, ids: str, context: str, blank_id: int, settings: Any
) -> dict:
    """The best valid pair of the beam (`Squad._serve_beam`): tokens int64 [B] and has_answer."""
    starts = _per_entry(g, beam["start_top_index"], settings)  # [B, K * K']
    ends = beam["end_top_index"]
    valid = _valid(g, starts, ends, ids, context, settings, blank_id)
    score = g.node(
        "Add",
        [_per_entry(g, beam["start_top_log_probs"], settings), beam["end_top_log_probs"]],
        "pick",
    )
    score = g.node("Where", [valid, score, g.node("Neg", ["const/masked"], "pick")], "pick")
    best = g.node("ArgMax", [score], "pick", axis=-1, keepdims=1)  # [B, 1]
    valid_int = g.node("Cast", [valid], "pick", to=TensorProto.INT64)
    any_valid = g.node("ReduceMax", [valid_int], "pick", axes=[1], keepdims=0)  # opset 17
    has_answer = g.node("Cast", [any_valid], "pick", to=TensorProto.BOOL)
    threshold = settings.threshold
    if threshold is not None:
        limit = g.constant("pick/threshold", threshold, np.float32)
        below = g.node("Less", [beam["cls_logits"], limit], "pick")
        has_answer = g.node("And", [has_answer, below], "pick")
    start_token = g.node("Squeeze", [_at(g, starts, best, "pick"), "const/axis_1"], "pick")
    end_token = g.node("Squeeze", [_at(g, ends, best, "pick"), "const/axis_1"], "pick")
    return {"start": start_token, "end": end_token, "has_answer": has_answer}


def _answer_text(
    g: GraphBuilder, tokenizer: Any, ids: str, chosen: dict, context: str
) -> tuple[str, str]:
    """(the pieces from start to end token joined, "▁" as a space, stripped; the context's
    pieces before the start token joined, "▁" as a space), "" each if no answer."""
    sp = tokenizer.sp_model
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    pieces = [" ⁇ " if sp.is_unknown(i) else p for i, p in enumerate(pieces)]
    table = g.constant("text/pieces", np.array(pieces, dtype=object), object)
    text = g.node("Gather", [table, ids], "text")  # [B, S]
    start = g.node("Unsqueeze", [chosen["start"], "const/axis_1"], "text")
    end = g.node("Unsqueeze", [chosen["end"], "const/axis_1"], "text")
    inside = g.node(
        "And",
        [
            g.node("GreaterOrEqual", ["const/positions", start], "text"),
            g.node("LessOrEqual", ["const/positions", end], "text"),
        ],
        "text",
    )
    before = g.node("And", [context, g.node("Less", ["const/positions", start], "text")], "text")
    answer = _joined(g, g.node("Where", [inside, text, "const/empty"], "text"), strip=True)
    prefix = _joined(g, g.node("Where", [before, text, "const/empty"], "text"), strip=False)
    return tuple(
        g.node("Where", [chosen["has_answer"], joined, "const/empty"], "text")
        for joined in (answer, prefix)
    )


def _joined(g: GraphBuilder, text: str, strip: bool) -> str:
    """The pieces [B, S] of each row joined, "▁" as a space, stripped if `strip`: [B]."""
    joined = g.multi_node(
        "StringJoin", [text, "const/empty", "const/axis_1"], "text", 1, domain=CONTRIB
    )[0]
    for pattern, rewrite in (("▁", " "), (r"^\s+|\s+$", ""))[: 2 if strip else 1]:
        joined = g.multi_node(
            "StringRegexReplace",
            [
                joined,
                g.constant(f"text/pattern_{len(g.nodes)}", [pattern], object),
                g.constant(f"text/rewrite_{len(g.nodes)}", [rewrite], object),
            ],
            "text",
            1,
            domain=CONTRIB,
        )[0]
    return joined


def _pairs(
    g: GraphBuilder,
    head: Any,
    inputs: tuple[str, str, str],
    blank_id: int,
    settings: Any,
    length: int,
) -> tuple[dict, dict]:
    """BERT's head and its choice (`Squad._serve_pairs`): the best valid (start, end) pair of
    all; (the chosen tokens int64 [B] and has_answer, the outputs `null_score_diff` [B] and
    `start_logits`, `end_logits` [B, S], padding at -10000 as `Squad.forward` gives them).
    `inputs`: the ids, input mask (int64 [B, S]) and context positions (bool [B, S]); `length`:
    S."""
    ids, mask, context = inputs
    kernel, bias = head.output_weights()
    logits = g.node(
        "Add",
        [
            g.node("MatMul", ["sequence_output", g.constant("pairs/kernel", kernel)], "pairs"),
            g.constant("pairs/bias", bias),
        ],
        "pairs",
    )  # [B, S, 2]
    padding = g.node(
        "Mul",
        [
            g.node(
                "Sub",
                ["const/one_f", g.node("Cast", [mask], "pairs", to=TensorProto.FLOAT)],
                "pairs",
            ),
            g.constant("pairs/padding", -10000.0, np.float32),
        ],
        "pairs",
    )  # [B, S]
    start, end = (
        g.node(
            "Add",
            [
                g.node("Gather", [logits, g.constant(f"pairs/{n}", i, np.int64)], "pairs", axis=2),
                padding,
            ],
            "pairs",
        )
        for i, n in enumerate(("start", "end"))
    )  # [B, S] each
    pair = g.node(
        "Add",
        [
            g.node("Unsqueeze", [start, "const/axis_2"], "pairs"),
            g.node("Unsqueeze", [end, "const/axis_1"], "pairs"),
        ],
        "pairs",
    )  # [B, S(start), S(end)]
    flat = g.node("Reshape", [pair, "const/flat_beam"], "pairs")  # [B, S * S]
    shape = g.node("Shape", [flat], "pairs")
    starts, ends = (
        g.node(
            "Expand", [g.constant(f"pairs/{n}_of_pair", v[np.newaxis], np.int64), shape], "pairs"
        )
        for n, v in (
            ("starts", np.repeat(np.arange(length), length)),
            ("ends", np.tile(np.arange(length), length)),
        )
    )  # [B, S * S] each
    valid = _valid(g, starts, ends, ids, context, settings, blank_id)
    scores = g.node("Where", [valid, flat, g.constant("pairs/invalid", -1e9, np.float32)], "pairs")
    best = g.node("ArgMax", [scores], "pairs", axis=-1, keepdims=1)  # [B, 1]
    best_score = g.node("ReduceMax", [scores], "pairs", axes=[1], keepdims=0)  # [B]
    null = g.node("Gather", [pair, "const/zero"], "pairs", axis=1)  # [B, S(end)]
    null = g.node("Gather", [null, "const/zero"], "pairs", axis=1)  # [B]: start[0] + end[0]
    diff = g.node("Sub", [null, best_score], "pairs")
    has_answer = g.node("Greater", [best_score, g.constant("pairs/any", -1e8, np.float32)], "pairs")
    if settings.threshold is not None:
        limit = g.constant("pairs/threshold", settings.threshold, np.float32)
        below = g.node("LessOrEqual", [diff, limit], "pairs")
        has_answer = g.node("And", [has_answer, below], "pairs")
    chosen = {
        name: g.node("Squeeze", [_at(g, positions, best, "pairs"), "const/axis_1"], "pairs")
        for name, positions in (("start", starts), ("end", ends))
    }
    chosen["has_answer"] = has_answer
    return chosen, {"null_score_diff": diff, "start_logits": start, "end_logits": end}


def head_graph(finetuned: Any) -> onnx.ModelProto:
    """`sequence_output` float32 [B, S, H] and the three encoder inputs int32 [B, S] -> the
    serving outputs (see the module docstring) of ALBERT's head or BERT's."""
    settings, head = finetuned.task.settings, finetuned.model.task_head
    length, hidden = settings.max_seq_length, finetuned.model.encoder.config.hidden_size
    g = GraphBuilder()
    _constants(g, length)
    ids, mask, types = (
        g.node("Cast", [name], "inputs", to=TensorProto.INT64)
        for name in ("input_word_ids", "input_mask", "input_type_ids")
    )
    p_mask, context = _answer_mask(g, mask, types)
    # the threshold decode and serving/ apply (None on v1.1 data: every question answered)
    decoding = _Decoding.of(finetuned.task)
    blank_id = _blank_id(finetuned.tokenizer)
    if finetuned.task.albert_head:
        beam = _beam(g, head, "sequence_output", p_mask, hidden)
        chosen = _choose(g, beam, ids, context, blank_id, decoding)
        returned = {"null_score_diff": beam["cls_logits"], **{k: beam[k] for k in BEAM_OUTPUTS}}
    else:
        chosen, returned = _pairs(g, head, (ids, mask, context), blank_id, decoding, length)
    answer, before = _answer_text(g, finetuned.tokenizer, ids, chosen, context)

    def token(name: str) -> str:
        value = g.node("Where", [chosen["has_answer"], chosen[name], "const/zero"], "out")
        return g.node("Cast", [value], "out", to=TensorProto.INT32)

    values = {
        "answer": answer,
        "start_token": token("start"),
        "end_token": token("end"),
        **returned,
        "context_before": before,
    }
    for name in ("start_top_index", "end_top_index"):
        if name in values:
            values[name] = g.node("Cast", [values[name]], "out", to=TensorProto.INT32)
    for name, value in values.items():
        g.nodes.append(helper.make_node("Identity", [value], [name], name=name))
    k, beam_size = settings.start_n_top, settings.start_n_top * settings.end_n_top
    shapes = {
        "answer": (TensorProto.STRING, ["batch"]),
        "start_token": (TensorProto.INT32, ["batch"]),
        "end_token": (TensorProto.INT32, ["batch"]),
        "null_score_diff": (TensorProto.FLOAT, ["batch"]),
        "start_top_log_probs": (TensorProto.FLOAT, ["batch", k]),
        "start_top_index": (TensorProto.INT32, ["batch", k]),
        "end_top_log_probs": (TensorProto.FLOAT, ["batch", beam_size]),
        "end_top_index": (TensorProto.INT32, ["batch", beam_size]),
        "start_logits": (TensorProto.FLOAT, ["batch", length]),
        "end_logits": (TensorProto.FLOAT, ["batch", length]),
        "context_before": (TensorProto.STRING, ["batch"]),
    }
    inputs = [
        helper.make_tensor_value_info(
            "sequence_output", TensorProto.FLOAT, ["batch", length, hidden]
        )
    ] + [
        helper.make_tensor_value_info(name, TensorProto.INT32, ["batch", length])
        for name in ("input_word_ids", "input_mask", "input_type_ids")
    ]
    read = {name for node in g.nodes for name in node.input}
    graph = helper.make_graph(
        g.nodes,
        "albert_squad_v2_head" if finetuned.task.albert_head else "bert_squad_head",
        inputs,
        [helper.make_tensor_value_info(n, *shapes[n]) for n in values],
        # the constants one head does not read are left out (ONNX Runtime warns of each)
        initializer=[v for k, v in g.initializers.items() if k in read],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB, 1)],
    )
    model.ir_version = 8
    return model


def _blank_id(tokenizer: Any) -> int:
    """The bare word-start piece's id, -1 without one (as `serving.ServingModule.blank_id`)."""
    sp = tokenizer.sp_model
    blank = sp.piece_to_id("▁")
    return blank if sp.id_to_piece(blank) == "▁" else -1


def _renamed_inputs(model: onnx.ModelProto, names: dict[str, str]) -> onnx.ModelProto:
    """`model` with its graph inputs renamed (`names`: old -> new) wherever they are read,
    in the branches and bodies of `If` and `Loop` nodes too (they read the outer graph's)."""
    for value in model.graph.input:
        value.name = names.get(value.name, value.name)
    _rename_reads(model.graph, names)
    return model


def _rename_reads(graph: onnx.GraphProto, names: dict[str, str]) -> None:
    for node in graph.node:
        node.input[:] = [names.get(name, name) for name in node.input]
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                _rename_reads(subgraph, names)


def squad_graphs(
    finetuned: Any, encoders: dict[str, onnx.ModelProto]
) -> dict[str, onnx.ModelProto]:
    """The raw-string SQuAD model around each of `encoders` (kind -> encoder graph)."""
    settings = finetuned.task.settings
    preprocess = preprocess_graph(
        finetuned.tokenizer,
        settings.max_seq_length,
        finetuned.tokenizer.do_lower_case,
        2,
        first_bound=settings.max_query_length,
    )
    preprocess = _renamed_inputs(
        preprocess, dict(zip(("text", "text_pair"), SQUAD_INPUTS, strict=True))
    )
    return raw_string_models(preprocess, head_graph(finetuned), encoders)


SQUAD_FILES = {"float32": "squad.onnx", "int8": "squad_int8.onnx"}


def probe_questions(tokenizer: Any, vocab_size: int) -> dict[str, np.ndarray]:
    """Questions and contexts from English prose (pydoc help topics): each question the first
    words of a sentence of its context, so that answers are found as well as refused. Pairs
    with a piece past the encoder's `vocab_size` are left out (a test model's small
    vocabulary)."""
    questions, contexts = [], []
    for _, sentences in list(pydoc_topic_documents())[:16]:
        context = " ".join(sentences[:4])
        words = sentences[min(1, len(sentences) - 1)].split()
        for question in (" ".join(words[:6]) + "?", "What is " + " ".join(words[-3:])):
            if max(tokenizer.encode(question + " " + context), default=0) < vocab_size:
                questions.append(question)
                contexts.append(context)
    return {
        "question": np.array(questions, dtype=object),
        "context": np.array(contexts, dtype=object),
    }


def write_onnx_squad(source: Any, target: Any) -> dict[str, Any]:
    """The fine-tuned `onnx` writer for a SQuAD model with ALBERT's head: `squad.onnx` (float32
    encoder) and `squad_int8.onnx` (ORT's fusions and dynamic int8 on the encoder) into
    `target`, checked against serving/ on `probe_questions`; returns the report. The model has
    ALBERT's head (`albert_tf.export.onnx.classifier.write_onnx_classifier` refuses BERT's)."""
    finetuned = source.finetuned
    config = finetuned.model.encoder.config
    float32 = encoder_graph(finetuned.model.encoder)
    fused = optimize.fuse(float32, config.num_attention_heads, config.hidden_size)
    graphs = squad_graphs(
        finetuned, {"float32": float32, "int8": optimize.quantize_dynamic_int8(fused)}
    )
    files = {SQUAD_FILES[kind]: graph for kind, graph in graphs.items()}
    inputs = probe_questions(finetuned.tokenizer, config.vocab_size)
    serving = tf.saved_model.load(str(source.finetuned_dir / SERVING_DIR))
    expected = serving.signatures["serving_default"](
        **{k: tf.constant(v.astype(str)) for k, v in inputs.items()}
    )
    answers = np.array([a.decode() for a in expected["answer"].numpy()], dtype=object)
    agreement = {}
    for name, model in files.items():
        got = run(session(model), inputs)
        agreement[name] = dict(
            answers_equal=got["answer"].tolist() == answers.tolist(),
            answer_agreement=float(np.mean(got["answer"] == answers)),
            null_score_diff_max_abs_diff=float(
                np.abs(got["null_score_diff"] - expected["null_score_diff"].numpy()).max()
            ),
        )
    report = {
        "task": "squad",
        "seq_length": finetuned.task.settings.max_seq_length,
        "inputs": list(SQUAD_INPUTS),
        "probe_questions": len(inputs["question"]),
        "fused_ops": {
            op: n for op, n in optimize.op_counts(fused).items() if op in optimize.FUSED_OPS
        },
        "serving_dtype": finetuned.record.dtype,
        "answered_by_serving": int(np.sum(answers != "")),
        "against_serving": agreement,
    }
    return save_models(target, files, report)


def describe_onnx_squad(path: Any, report: dict[str, Any]) -> list[str]:
    """The lines `albert-tf export` prints for a SQuAD model's onnx/."""
    lines = [f"wrote {path}: fused {report['fused_ops']}"]
    for name, agreement in report["against_serving"].items():
        lines.append(
            f"  {name}: answers equal to serving/ on {agreement['answer_agreement']:.1%} of the "
            f"probe questions, null_score_diff within {agreement['null_score_diff_max_abs_diff']:.1e}"
        )
    return lines
