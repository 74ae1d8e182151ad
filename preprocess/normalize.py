"""Text normalization exactly as the original ALBERT `tokenization.preprocess_text`.

The original (google-research/albert) does, in order:

1. collapse whitespace: `" ".join(text.split())` (Python's Unicode whitespace, leading and
   trailing whitespace removed);
2. Unicode NFKD, then drop every character whose canonical combining class is non-zero
   (`unicodedata.combining(c) != 0`), which strips accents;
3. lowercase with `str.lower` when `lower` is true (full Unicode lowercasing with the Final_Sigma
   rule; this is not case folding, so "ß" stays "ß").

Unlike XLNet's `preprocess_text`, ALBERT's does NOT rewrite "``" and "''" into '"'. The reference
ids in tests/fixtures/tokenizer (produced by the original code) confirm it: "``Quoted''" is
tokenized as "▁``", ..., "'", "'".
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterable, Iterator


def preprocess_text(text: str | bytes, lower: bool = True) -> str:
    """Returns `text` normalized as the original ALBERT does before SentencePiece.

    Args:
      text: a `str`; `bytes` are decoded as UTF-8, invalid sequences becoming U+FFFD. A `str`
        with lone surrogates (from `surrogateescape` decoding, say), which no UTF-8 consumer
        such as SentencePiece accepts, is read as its `surrogatepass` bytes, so each surrogate
        becomes U+FFFD as in those bytes.
      lower: apply `str.lower` (ALBERT's `do_lower_case`).
    """
    if isinstance(text, str) and not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", errors="surrogatepass")
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = " ".join(text.split())
    if text.isascii():
        # NFKD leaves ASCII unchanged and ASCII has no combining marks: skip the per-char pass.
        return text.lower() if lower else text
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    return text


def code_points() -> Iterator[str]:
    """Every Unicode scalar value (surrogates excluded: no UTF-8 string holds them)."""
    return (chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF)


def re2_class_body(chars: Iterable[str]) -> str:
    """RE2 character-class body (`\\x{A}-\\x{B}...`) for `chars`, in code point order: how
    the in-graph tokenizers (TensorFlow's and ONNX's) name a set of characters."""
    ranges: list[tuple[int, int]] = []
    for cp in sorted(map(ord, chars)):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
