"""preprocess_text: the original ALBERT normalization."""

from __future__ import annotations

import pytest

from albert_tf.preprocess.normalize import preprocess_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Multiple   spaces\tand\ttabs\nand newlines  ", "multiple spaces and tabs and newlines"),
        ("a\u00a0b\u3000c\u2028d\x1ce", "a b c d e"),  # Python's Unicode whitespace
        ("Café naïve ÅNGSTRÖM", "cafe naive angstrom"),  # NFKD, combining marks dropped
        ("ﬁ ① ²", "fi 1 2"),  # compatibility decomposition
        ("straße ẞ", "straße ß"),  # str.lower, not case folding
        ("ΟΔΟΣ Σ", "οδος σ"),  # Final_Sigma as str.lower does it
        ("``Quoted'' text", "``quoted'' text"),  # ALBERT keeps `` and '' (XLNet did not)
        ("", ""),
        (" \t\n ", ""),
    ],
)
def test_preprocess_text(text, expected):
    assert preprocess_text(text) == expected


def test_no_lower_keeps_case_but_strips_accents():
    assert preprocess_text("Émile  ZOLA", lower=False) == "Emile ZOLA"


def test_bytes_are_decoded_with_replacement():
    assert preprocess_text(b"ok \xff\xfe X") == "ok \ufffd\ufffd x"
