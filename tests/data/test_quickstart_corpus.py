"""The embedded default corpus (preprocess/corpus.py)."""

from __future__ import annotations

import textwrap

from albert_tf.preprocess.corpus import (
    build_default_corpus,
    document_sentences,
    is_heldout,
    prose_sentences,
    stdlib_documents,
)

DOCSTRING = textwrap.dedent(
    """\
    Frobnicate the :class:`~pkg.Widget` given as ``widget``.

    Call it twice, e.g. after a reset, and it returns the *same* value.
    Nothing else happens.

    >>> frobnicate(widget)
    42

    Example::

        value = frobnicate(widget, depth=3)
        print(value)

    Notes
    =====

    The widget must be registered first.
    """
)


def test_split_sentences_keeps_abbreviations_together():
    text = (
        "Call it twice, e.g. after a reset. It returns the same value! Does it stop? Yes, it does."
    )
    assert prose_sentences(text) == [
        "Call it twice, e.g. after a reset.",
        "It returns the same value!",
        "Does it stop?",
        "Yes, it does.",
    ]


def test_split_sentences_drops_code_and_signatures():
    assert prose_sentences("x = f(a[0], b_c) + g(d)") == []
    assert prose_sentences("Usage:") == []
    assert prose_sentences("os.path.join(a_b, c_d.e_f, g_h.i_j)") == []


def test_document_sentences_removes_doctests_code_and_markup():
    assert document_sentences([DOCSTRING]) == [
        "Frobnicate the pkg.Widget given as widget.",
        "Call it twice, e.g. after a reset, and it returns the same value.",
        "Nothing else happens.",
        "The widget must be registered first.",
    ]


def _fake_stdlib(root):
    (root / "test").mkdir(parents=True)
    (root / "pkg").mkdir()
    # Importing this module would exit the interpreter: the corpus must only parse it.
    (root / "boom.py").write_text(
        '"""The boom module explodes on import."""\nraise SystemExit(3)\n'
    )
    (root / "pkg" / "__init__.py").write_text(
        '"""A package with one module."""\n\n'
        "class Widget:\n"
        '    """A widget holds one value.\n\n    It never changes once set.\n    """\n\n'
        "    def get(self):\n"
        '        """Return the value held by the widget."""\n'
    )
    (root / "test" / "test_x.py").write_text('"""Tests that must not enter the corpus."""\n')
    (root / "broken.py").write_text('"""Half a docstring that never ends.\n')


def test_stdlib_documents_parses_sources_in_order_and_skips_tests(tmp_path):
    _fake_stdlib(tmp_path)
    assert list(stdlib_documents(tmp_path)) == [
        ("boom", ["The boom module explodes on import."]),
        (
            "pkg",
            [
                "A package with one module.",
                "A widget holds one value.",
                "It never changes once set.",
                "Return the value held by the widget.",
            ],
        ),
    ]


def test_heldout_split_is_a_stable_hash_of_the_name():
    assert [is_heldout(n) for n in ("os", "json", "bz2", "dbm.ndbm", "topic:assert")] == [
        False,
        False,
        True,
        True,
        False,
    ]
    assert not any(is_heldout(n, heldout_percent=0) for n in ("bz2", "dbm.ndbm"))


def test_build_default_corpus_format_and_split(tmp_path):
    paths = build_default_corpus(tmp_path / "corpus", stdlib_dir=tmp_path / "none")
    assert paths.train == tmp_path / "corpus" / "corpus.txt"
    assert paths.heldout == tmp_path / "corpus" / "heldout.txt"
    # Only the pydoc topics remain when the standard library directory is empty.
    train = paths.train.read_text(encoding="utf-8")
    heldout = paths.heldout.read_text(encoding="utf-8")
    assert paths.train_documents > 50 and paths.heldout_documents >= 1
    assert train.count("\n\n") == paths.train_documents - 1
    assert paths.train_bytes == len(train.encode("utf-8"))
    assert not any(line.lstrip().startswith(">>>") for line in train.splitlines())
    assert not set(train.split("\n\n")) & set(heldout.split("\n\n"))
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == ["corpus.txt", "heldout.txt"]


def test_build_default_corpus_from_the_real_stdlib(tmp_path):
    first = build_default_corpus(tmp_path / "a")
    assert first.train_bytes > 1_000_000 and first.heldout_bytes > 30_000
    assert first.train_documents > 300
    text = first.train.read_text(encoding="utf-8")
    assert "Return the number of Thread objects currently alive." in text.splitlines()
