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

import unicodedata


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
