"""Token ids with the character span each token covers in the original (unnormalized) text.

ALBERT tokenizes `preprocess_text(text)` (whitespace collapsed, NFKD with combining marks dropped,
lowercased), so SentencePiece offsets refer to the normalized string. We normalize character by
character, remembering which original character each normalized character came from, and walk
the surface pieces along the normalized string; a token's span is then the original characters
of its first to last normalized character.
"""

from __future__ import annotations

import unicodedata

from albert_tf.preprocess.tokenizer import WORD_START, AlbertTokenizer, is_digit_comma_piece


def _normalize_with_map(text: str, lower: bool) -> tuple[str, list[int]]:
    """(normalized text, original index of each normalized character)."""
    chars: list[str] = []
    origin: list[int] = []
    pending_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            pending_space = bool(chars)
            continue
        if pending_space:
            chars.append(" ")
            origin.append(i - 1)
            pending_space = False
        for c in unicodedata.normalize("NFKD", ch):
            if unicodedata.combining(c):
                continue
            for lowered in c.lower() if lower else c:
                chars.append(lowered)
                origin.append(i)
    return "".join(chars), origin


def _surface_pieces(tokenizer: AlbertTokenizer, normalized: str) -> list[str]:
    """The tokenizer's pieces of already-normalized text, unknown text in surface form."""
    sp = tokenizer.sp_model
    pieces = []
    for piece in sp.encode(normalized, out_type=str):
        if is_digit_comma_piece(piece):
            pieces.extend(sp.encode(piece[:-1].replace(WORD_START, ""), out_type=str))
            pieces.append(piece[-1])
        else:
            pieces.append(piece)
    return pieces


def encode_with_offsets(
    tokenizer: AlbertTokenizer, text: str
) -> tuple[list[int], list[int], list[int]]:
    """Returns (ids, starts, ends): `text[starts[i]:ends[i]]` is what token i stands for.

    ids equal `tokenizer.encode(text)`. A token made only of "▁" covers no characters
    (start == end, at the next word). Spans never include surrounding whitespace.
    """
    normalized, origin = _normalize_with_map(text, tokenizer.do_lower_case)
    pieces = _surface_pieces(tokenizer, normalized)
    ids = [tokenizer.sp_model.piece_to_id(p) for p in pieces]
    starts, ends = [], []
    cursor = 0
    for piece in pieces:
        body = piece.replace(WORD_START, "")
        while cursor < len(normalized) and normalized[cursor] == " " and body[:1] != " ":
            cursor += 1
        begin = cursor
        for ch in body:
            if cursor < len(normalized) and (normalized[cursor] == ch or ch != " "):
                cursor += 1
        if begin == cursor:
            position = origin[begin] if begin < len(origin) else len(text)
            starts.append(position)
            ends.append(position)
        else:
            starts.append(origin[begin])
            ends.append(origin[cursor - 1] + 1)
    return ids, starts, ends
