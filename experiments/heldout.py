"""The one held-out split of every corpus the experiments build (DATA.md: held out means held out).

Every corpus built from the experiments' sources (the pretraining corpus of experiments/corpora.py,
the distillation corpus of experiments/distill_corpus.py, and whatever comes next) splits them by
document with `is_heldout`, so no model trained on one corpus has seen another's held-out text:

- A document is named `<source>/<name>`, as the source readers name it (`brown/ca01`,
  `sotu/1790_george_washington_n`, `wikipedia/<title>`). The name, not the text, decides: the
  split does not move when a cleaning rule changes a document's sentences.
- HELDOUT_PERCENT of the documents are held out: those whose name's SHA-256 falls in the first
  HELDOUT_PERCENT of 100 buckets (`albert_tf.preprocess.corpus.is_heldout`, the quickstart's
  rule). Pretraining's split has always been this one, so its held-out documents are unchanged.
- Every document of an EVALUATION_SOURCES source is held out: those sources are read only to
  measure models (experiments/heldout_figures.py), never to train them.
- A corpus of sentences (distillation) drops repeats: a sentence that also occurs in a training
  document is training text, whichever copy it keeps (`sentence_split`).

tests/data/test_heldout_split.py fails when two corpora built from the same sources disagree on a
document's split.
"""

from __future__ import annotations

from collections.abc import Iterable

from albert_tf.preprocess.corpus import is_heldout as _name_in_heldout_bucket

HELDOUT_PERCENT = 10
# Sources read only to measure models: Botchan (sentencepiece's sdist) and the Linux kernel's
# documentation (Debian linux-doc-6.1), neither in any corpus a model was trained on.
EVALUATION_SOURCES = frozenset({"botchan", "linux-doc"})


def is_heldout(document: str) -> bool:
    """Whether the document named `document` (`<source>/<name>`) is held out of training."""
    if document.partition("/")[0] in EVALUATION_SOURCES:
        return True
    return _name_in_heldout_bucket(document, HELDOUT_PERCENT)


def sentence_split(occurrences: Iterable[tuple[str, str]]) -> dict[str, bool]:
    """For each key of (key, document name) pairs (a sentence's normalized form and a document it
    occurs in), whether it is held out: only when every document it occurs in is held out."""
    held: dict[str, bool] = {}
    for key, document in occurrences:
        held[key] = held.get(key, True) and is_heldout(document)
    return held
