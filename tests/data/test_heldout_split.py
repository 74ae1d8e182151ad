"""One held-out split for every corpus of the experiments' sources (experiments/heldout.py).

The pretraining corpus (experiments/corpora.py) and the distillation corpus
(experiments/distill_corpus.py) are built here from the same small synthetic sources; each
document's split is read back from the files they wrote and must be the same in both.
"""

from __future__ import annotations

from pathlib import Path

from experiments.corpora import write_split
from experiments.distill_corpus import write_corpus
from experiments.heldout import EVALUATION_SOURCES, is_heldout, sentence_split

SOURCES = {"brown": 40, "sotu": 30, "wikipedia": 30}  # documents per source


def _documents(source: str) -> list[tuple[str, list[str]]]:
    """Documents whose sentences (of 4 to 64 words) occur in no other document."""
    return [
        (
            f"{source}/doc{i:03d}",
            [f"Sentence {j} of document {i} of the {source} source." for j in range(3)],
        )
        for i in range(SOURCES[source])
    ]


def _readers() -> dict:
    return {source: iter(_documents(source)) for source in SOURCES}


def _splits(train: Path, heldout: Path) -> dict[str, bool]:
    """The split of each synthetic document, read from where its sentences landed; fails when
    a document's sentences landed on both sides."""
    side = {line: False for line in train.read_text().splitlines() if line}
    side |= {line: True for line in heldout.read_text().splitlines() if line}
    splits: dict[str, bool] = {}
    for source in SOURCES:
        for name, sentences in _documents(source):
            sides = {side[sentence] for sentence in sentences}
            assert len(sides) == 1, f"{name} is on both sides"
            splits[name] = sides.pop()
    return splits


def test_pretraining_and_distillation_corpora_hold_out_the_same_documents(tmp_path):
    pretraining = write_split(_readers(), tmp_path / "pt" / "train.txt", tmp_path / "pt" / "h.txt")
    write_corpus(_readers(), set(), tmp_path / "distill")
    distillation = (tmp_path / "distill" / "train.txt", tmp_path / "distill" / "heldout.txt")

    in_pretraining, in_distillation = _splits(*pretraining), _splits(*distillation)

    assert in_pretraining == in_distillation
    assert in_pretraining == {name: is_heldout(name) for name in in_pretraining}
    assert 0 < sum(in_pretraining.values()) < len(in_pretraining)  # both sides are used


def test_a_sentence_in_a_training_document_is_training_text(tmp_path):
    held = next(f"sotu/doc{i}" for i in range(100) if is_heldout(f"sotu/doc{i}"))
    kept = next(f"sotu/doc{i}" for i in range(100) if not is_heldout(f"sotu/doc{i}"))
    repeated = "The same sentence in two documents."
    readers = {"sotu": iter([(held, [repeated, "Only in the held-out document."]),
                             (kept, ["Only in the training document.", repeated])])}  # fmt: skip

    record = write_corpus(readers, set(), tmp_path)

    assert (tmp_path / "heldout.txt").read_text().splitlines() == ["Only in the held-out document."]
    assert repeated in (tmp_path / "train.txt").read_text().splitlines()
    assert record["sources"]["sotu"] == {
        "sentences": 3, "repeats": 1, "rotten_tomatoes": 0, "heldout": 1,
    }  # fmt: skip
    assert sentence_split([("s", held), ("s", kept)]) == {"s": False}


def test_the_split_is_by_document_name_and_evaluation_sources_are_held_out():
    # Pretraining's split before the shared module: the same names, 10% by the name's hash.
    from albert_tf.preprocess.corpus import is_heldout as name_hash_heldout

    names = [f"brown/c{i:03d}" for i in range(500)]
    assert [is_heldout(n) for n in names] == [name_hash_heldout(n, 10) for n in names]
    assert 30 < sum(map(is_heldout, names)) < 70
    assert all(is_heldout(f"{source}/anything") for source in EVALUATION_SOURCES)
