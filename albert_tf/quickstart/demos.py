"""The quickstart's demos: what a few minutes of pretraining learned, trained beside random init.

- Fill in the blank: sentences in the corpus's own domain whose answer is not one of the
  RARE_RANK most frequent pieces, so guessing frequent words cannot answer them. Each predictor's
  rank of the answer among all pieces (1 = its first guess) is printed: trained, random weights,
  and the unigram guess (the answer's frequency rank in the training data).
- Nearest neighbours in the word-embedding table: for word pairs that play the same part in a
  sentence (read/write, true/false), the rank of one among the other's neighbours by cosine,
  trained against random init (there about vocab/2 whatever the pair).
A median rank summarizes each demo; the margin is the baseline's median over the trained one's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from albert_tf.config import SP_MODEL_FILE, resolve_config
from albert_tf.preprocess.tokenizer import AlbertTokenizer
from albert_tf.pretrained import checkpoint_dir
from albert_tf.quickstart.evaluation import RARE_RANK, frequency_order, load_model

# Sentences of the corpus's domain (not taken from it), with the word the demo masks.
BLANKS = (
    ("If the file does not [MASK], an exception is raised.", "exist"),
    ("Return the number of [MASK] in the list.", "elements"),
    ("The socket is closed when the [MASK] ends.", "connection"),
    ("Open the file for [MASK] and return a file object.", "reading"),
    ("Raise ValueError if the [MASK] is negative.", "argument"),
    ("The thread waits until the [MASK] is released.", "lock"),
)
# Pairs of words that fill the same slots in a sentence.
NEIGHBOUR_PAIRS = (
    ("read", "write"),
    ("true", "false"),
    ("open", "close"),
    ("get", "set"),
    ("start", "end"),
    ("first", "last"),
    ("input", "output"),
    ("key", "value"),
    ("client", "server"),
    ("encode", "decode"),
)
SHOWN_NEIGHBOURS = ("file", "true", "read")


@dataclass(frozen=True)
class DemoFigures:
    """Median ranks (1 = best) of each demo's answers, by predictor."""

    blanks: dict[str, float]  # trained, random, unigram
    neighbours: dict[str, float]  # trained, random
    blank_count: int
    pair_count: int
    # Each blank ({sentence, answer, trained, random, unigram}) and pair ({pair, trained, random}).
    details: dict[str, list[dict]] = field(default_factory=dict)


def rank_of(scores: np.ndarray, answer: int) -> int:
    """1 + how many entries of `scores` [V] beat `answer`'s (ties in the answer's favour)."""
    return int((scores > scores[answer]).sum()) + 1


def single_piece(tokenizer, word: str) -> int | None:
    """The id of `word` as one piece after a space ("▁word"), None when it splits."""
    ids = tokenizer.encode(f" {word}")
    return ids[0] if len(ids) == 1 else None


def blank_rows(tokenizer, mask_id: int) -> list[tuple[str, int, list[int], int]]:
    """(sentence, answer id, ids with [MASK], mask position) per BLANKS entry whose answer is
    a single piece and whose sentence tokenizes around it unchanged."""
    rows = []
    for sentence, answer in BLANKS:
        before, after = sentence.split("[MASK]")
        left, right = tokenizer.encode(before.rstrip()), tokenizer.encode(after)
        full = tokenizer.encode(sentence.replace("[MASK]", answer))
        answer_id = single_piece(tokenizer, answer)
        if answer_id is not None and full == [*left, answer_id, *right]:
            rows.append((sentence, answer_id, [*left, mask_id, *right], len(left)))
    return rows


def blank_logits(model, rows, cls_id: int, sep_id: int) -> np.ndarray:
    """float32 [N, V]: `model`'s MLM logits at each row's mask ([CLS] ids [SEP], no padding)."""
    import tensorflow as tf

    length = max(len(ids) for _, _, ids, _ in rows) + 2
    ids = np.zeros((len(rows), length), np.int32)
    for i, (_, _, row, _) in enumerate(rows):
        ids[i, : len(row) + 2] = [cls_id, *row, sep_id]
    inputs = {
        "input_word_ids": tf.constant(ids),
        "input_mask": tf.constant((ids != 0).astype(np.int32)),
        "input_type_ids": tf.zeros_like(ids),
        "masked_lm_positions": tf.constant([[p + 1] for *_, p in rows], tf.int32),
    }
    return model(inputs, training=False)["mlm_logits"].numpy()[:, 0, :]


def embedding_neighbours(table: np.ndarray) -> Callable[[int], np.ndarray]:
    """For a piece id, the cosine of its embedding with every row of `table` [V, E]: [V]."""
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    return lambda piece: unit @ unit[piece]


def _pieces(tokenizer, ids) -> str:
    return ", ".join(p.replace("▁", "") or "▁" for p in tokenizer.convert_ids_to_tokens(list(ids)))


def run_demos(
    models: dict[str, object],
    tokenizer,
    counts: np.ndarray,
    special: dict[str, int],
    log: Callable[[str], None],
) -> DemoFigures:
    """Prints both demos for `models` {"trained": ..., "random": ...} (AlbertPretrainingModel)
    and returns their median ranks. `counts`: training piece frequencies [V]; `special`: the
    ids of cls, sep and mask."""
    order = frequency_order(counts)
    unigram_rank = np.empty_like(order)
    unigram_rank[order] = np.arange(1, len(order) + 1)

    rows = [r for r in blank_rows(tokenizer, special["mask"]) if unigram_rank[r[1]] > RARE_RANK]
    logits = {k: blank_logits(m, rows, special["cls"], special["sep"]) for k, m in models.items()}
    ranks: dict[str, list[int]] = {"trained": [], "random": [], "unigram": []}
    log(f"      Fill in the blank (answers outside the {RARE_RANK} most frequent pieces);")
    log("      rank of the answer among all pieces, 1 = first guess:")
    log(f"      {'sentence':<56} {'answer':<11} trained  random unigram")
    for i, (sentence, answer, _, _) in enumerate(rows):
        for name in ("trained", "random"):
            ranks[name].append(rank_of(logits[name][i], answer))
        ranks["unigram"].append(int(unigram_rank[answer]))
        word = tokenizer.convert_ids_to_tokens([answer])[0].replace("▁", "")
        log(
            f"      {sentence:<56} {word:<11} {ranks['trained'][-1]:>7} {ranks['random'][-1]:>7}"
            f" {ranks['unigram'][-1]:>7}"
        )
        top = np.argsort(-logits["trained"][i])[:5]
        log(f"        trained top-5: {_pieces(tokenizer, top)}")
    blanks = {k: float(np.median(v)) for k, v in ranks.items()} if rows else {}
    blank_details = [
        {"sentence": sentence, "answer": tokenizer.convert_ids_to_tokens([answer])[0]}
        | {k: v[i] for k, v in ranks.items()}
        for i, (sentence, answer, _, _) in enumerate(rows)
    ]

    tables = {k: m.encoder.get_embedding_table().numpy() for k, m in models.items()}
    cosines = {k: embedding_neighbours(t) for k, t in tables.items()}
    pairs = [
        (a, b, ia, ib)
        for a, b in NEIGHBOUR_PAIRS
        if (ia := single_piece(tokenizer, a)) is not None
        and (ib := single_piece(tokenizer, b)) is not None
    ]
    log("\n      Nearest neighbours in the embedding table (cosine), trained | random init:")
    for word in SHOWN_NEIGHBOURS:
        piece = single_piece(tokenizer, word)
        if piece is None:
            continue
        shown = []
        for name in ("trained", "random"):
            near = [int(j) for j in np.argsort(-cosines[name](piece)) if j != piece][:5]
            shown.append(_pieces(tokenizer, near))
        log(f"      {word:<8} {shown[0]}  |  {shown[1]}")
    pair_ranks: dict[str, list[int]] = {"trained": [], "random": []}
    for _, _, ia, ib in pairs:
        for name in pair_ranks:
            scores = cosines[name](ia).copy()
            scores[ia] = -np.inf  # a word is not its own neighbour
            pair_ranks[name].append(rank_of(scores, ib))
    log(
        "      rank of the partner among the neighbours, trained | random: "
        + ", ".join(
            f"{a}/{b} {t} | {r}"
            for (a, b, _, _), t, r in zip(
                pairs, pair_ranks["trained"], pair_ranks["random"], strict=True
            )
        )
    )
    neighbours = {k: float(np.median(v)) for k, v in pair_ranks.items()} if pairs else {}
    pair_details = [
        {"pair": f"{a}/{b}"} | {k: v[i] for k, v in pair_ranks.items()}
        for i, (a, b, _, _) in enumerate(pairs)
    ]
    details = {"fill_in_the_blank": blank_details, "neighbours": pair_details}
    return DemoFigures(blanks, neighbours, len(rows), len(pairs), details)


def sentencepiece_frequencies(tokenizer) -> np.ndarray:
    """float64 [V]: each piece's probability under the SentencePiece unigram model (fitted to
    the model's training text): the unigram baseline of a model whose training data is not at
    hand (a shipped model). Control, unknown and user-defined pieces score 0 in the model (a
    learned piece's score is its log-probability, below 0): they get probability 0."""
    sp = tokenizer.sp_model
    scores = np.array([sp.GetScore(piece) for piece in range(sp.GetPieceSize())])
    return np.where(scores < 0, np.exp(np.minimum(scores, 0.0)), 0.0)


def shipped_demos(name: str, seed: int, log: Callable[[str], None]) -> DemoFigures:
    """Both demos for the shipped pretrained model `name` (albert_tf.pretrained) beside the same
    shape with random weights; the unigram baseline is its SentencePiece model's
    (sentencepiece_frequencies)."""
    import tensorflow as tf

    directory = checkpoint_dir(name)
    config = resolve_config(name)
    models = {
        "trained": load_model(config, tf.train.latest_checkpoint(str(directory)), seed),
        "random": load_model(config, None, seed),
    }
    tokenizer = AlbertTokenizer(directory / SP_MODEL_FILE)
    special = {
        key: tokenizer.convert_tokens_to_ids([token])[0]
        for key, token in (("cls", "[CLS]"), ("sep", "[SEP]"), ("mask", "[MASK]"))
    }
    return run_demos(models, tokenizer, sentencepiece_frequencies(tokenizer), special, log)
