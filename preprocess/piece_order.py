"""The order of tied pieces as the `sentencepiece` package gives it: the tables both in-graph
tokenizers (the preprocessing SavedModel, `albert_tf.preprocess.graph_piece_order`, and the ONNX text
graph, `albert_tf.export.onnx.piece_order`) redo its Viterbi from.

Other SentencePiece implementations (tensorflow_text's, onnxruntime-extensions') find the same
best segmentation as the `sentencepiece` package the reference runs on, but where several orders
of the same pieces score the same they may pick another order. Pieces can only change places
without changing the text if they are powers of one string (xy = yx only if x and y are powers
of a common word), so these ties live in maximal runs of consecutive pieces of a row that are
all powers of one primitive root ("-" and "--------------", "0" and "00"). Which order wins is
decided by rounding: `sentencepiece` 0.2.2 sums scores left to right in float32 and, at each
position, keeps the first (longest) last piece among exact equals, so the order in a run
depends on the row's score where the run starts. (0.2.0, and 0.2.1 with the same code, compare
the sums in double precision and give onnxruntime-extensions' order: equal on all 3,166 strings
tried. The reference fixture, tests/fixtures/tokenizer, holds 0.2.2's order, which the graphs
reproduce.) Both graphs redo 0.2.2's Viterbi inside each run:

1. per vocabulary id, the tables of `piece_tables`, built at export: its root's class (-1 for
   pieces whose root has one piece length, which cannot be reordered), its length in roots, its
   score as the Viterbi adds it (user-defined pieces `float32(0.1 * (bytes - 1))`; the byte
   pieces of `byte_fallback_model` stand for unknown characters: `min_score - 10` on each
   character's first byte, 0 on continuation bytes, so an unknown run adds its penalty once per
   character);
2. the row's score before each piece: an exclusive float32 cumulative sum along the row;
3. per run of 2 or more pieces of one class, a loop over its positions (in roots) keeps the
   last scores in a window and picks, for each position, the best last piece (ties to the
   longest); a second loop walks back from the run's end;
4. the new order is scattered over the run. A run's start score depends on the order of the
   runs before it, so steps 2-4 repeat until nothing changes (run k is right after pass k, and
   a pass without change proves every run right).

Within a run the result is `sentencepiece`'s: given the score at the run's start, restricting
its Viterbi to the run's pieces keeps its choices (its best path stays a candidate with the
same float32 sums, and every other candidate can only lose). 0.2.2 also rebases its running
score when it passes +-100,000 (past ~15,000 pieces in one text), which the graphs do not: there
a tied order may differ (the SavedModel's does on "the 1,000 " repeated 5,000 times).

This module needs only numpy and `sentencepiece` (no TensorFlow, no onnx).
"""

from __future__ import annotations

import numpy as np
from sentencepiece import sentencepiece_model_pb2

# `sentencepiece` charges an unknown character the lowest piece score minus this.
UNK_PENALTY = 10.0
_NORMAL, _UNKNOWN, _USER_DEFINED = 1, 2, 4
BYTE_PIECES = 256


def primitive_root(piece: str) -> str:
    """The shortest string whose repetition is `piece` ("-" for "---", "ab" for "abab")."""
    n = len(piece)
    for d in range(1, n + 1):
        if n % d == 0 and piece[:d] * (n // d) == piece:
            return piece[:d]
    return piece


def byte_fallback_model(model: bytes) -> bytes:
    """The SentencePiece model with the 256 byte pieces appended (ids V..V+255) and byte
    fallback on: the same segmentation, with each unknown character given as its UTF-8 bytes
    instead of merged into one `<unk>`, so a graph can count its characters."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    for byte in range(BYTE_PIECES):
        proto.pieces.add(piece=f"<0x{byte:02X}>", score=0.0, type=6)
    proto.trainer_spec.byte_fallback = True
    return proto.SerializeToString()


def piece_tables(model: bytes) -> dict[str, np.ndarray] | None:
    """Tables for vocabulary + byte ids (V + 256): `score` float32, `root_class` int64,
    `units` int64 (length in roots); per class and length in roots (1..Lmax),
    `class_scores` float32 [C, Lmax] (-inf where no piece) and `class_ids` int64 [C, Lmax].
    None when no root has two piece lengths (no order can tie)."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    pieces = list(proto.pieces)
    vocab_size = len(pieces)
    min_score = np.float32(min(p.score for p in pieces if p.type == _NORMAL))
    unk_score = np.float32(min_score - np.float32(UNK_PENALTY))
    score = np.zeros(vocab_size + BYTE_PIECES, np.float32)
    units = np.ones(vocab_size + BYTE_PIECES, np.int64)
    lengths: dict[str, dict[int, int]] = {}
    for i, p in enumerate(pieces):
        if p.type == _USER_DEFINED:
            score[i] = np.float32(0.1 * (len(p.piece.encode()) - 1))
        elif p.type == _UNKNOWN:
            score[i] = unk_score
        else:
            score[i] = p.score
        if p.type in (_NORMAL, _USER_DEFINED):
            root = primitive_root(p.piece)
            units[i] = len(p.piece) // len(root)
            lengths.setdefault(root, {})[int(units[i])] = i
    # A UTF-8 lead byte starts an unknown character; continuation bytes (10xxxxxx) add nothing.
    lead = (np.arange(BYTE_PIECES) & 0xC0) != 0x80
    score[vocab_size:] = np.where(lead, unk_score, np.float32(0))
    classes = [ids for ids in lengths.values() if len(ids) > 1]
    if not classes:
        return None
    longest = max(max(ids) for ids in classes)
    root_class = np.full(vocab_size + BYTE_PIECES, -1, np.int64)
    class_scores = np.full((len(classes), longest), -np.inf, np.float32)
    class_ids = np.zeros((len(classes), longest), np.int64)
    for c, ids in enumerate(classes):
        for n, i in ids.items():
            root_class[i] = c
            class_scores[c, n - 1] = score[i]
            class_ids[c, n - 1] = i
    return dict(
        score=score,
        root_class=root_class,
        units=units,
        class_scores=class_scores,
        class_ids=class_ids,
    )
