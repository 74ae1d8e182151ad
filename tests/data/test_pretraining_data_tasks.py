"""create-pretraining-data --sentence-task: SOP unchanged, BERT's NSP, single-segment (none)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from albert_tf.preprocess.pretraining_data import create_pretraining_data, pipeline
from albert_tf.preprocess.pretraining_data.instances import create_nsp_pairs, create_single_segments
from tests import helpers

CLS, SEP = 2, 3  # the fixture tokenizer's [CLS] and [SEP] ids

# sha256 over (name, bytes) of the shards that `helpers.word_corpus()` gives with SOP_SETTINGS, masked and
# unmasked, recorded from the code before --sentence-task existed (commit 76af235).
SOP_SETTINGS = dict(
    max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2, num_shards=2, seed=3
)
SOP_DIGESTS = {
    True: "cbefb7cd027f1ad9852b5f941306fadf62a1fac5d48f7f5d516f45d3779ea17b",
    False: "aa0b45935633df3e7eab0acd8abe663920e95ac11f69904e9aa9c9839697ec91",
}


def shards_digest(output: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(output.glob("*.tfrecord")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def spm_model(fixtures_dir) -> str:
    return str(fixtures_dir / "tokenizer" / "spm.model")


@pytest.mark.parametrize("mask", [True, False])
def test_sop_output_is_byte_identical_to_before(tmp_path, spm_model, mask):
    corpus = tmp_path / "c.txt"
    corpus.write_text(helpers.word_corpus())
    out = tmp_path / "out"
    task = {"sentence_task": "sop"} if mask else {}  # explicit and default
    stats = create_pretraining_data(
        str(corpus), spm_model, out, mask=mask, shuffle_buffer=7, progress=False,
        **SOP_SETTINGS, **task,
    )  # fmt: skip
    assert shards_digest(out) == SOP_DIGESTS[mask]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["sentence_task"] == stats["sentence_task"] == "sop"
    labels = helpers.read_pretraining_records(out)["next_sentence_labels"]
    assert stats["sop_swapped"] == labels.sum() == 20 and stats["num_instances"] == 37
    assert stats["sop_swapped_fraction"] == pytest.approx(20 / 37)


# === NSP pairs, unit level: integer "text" whose ids tell the document and position ===


def int_documents(num_docs: int, lengths) -> list[list[np.ndarray]]:
    """Document d's tokens are d * 10000 + 0, 1, 2, ... in order, cut into sentences."""
    documents = []
    for d in range(num_docs):
        cuts = np.cumsum([0, *lengths(d)])
        documents.append(
            [
                np.arange(d * 10000 + a, d * 10000 + b, dtype=np.int32)
                for a, b in zip(cuts[:-1], cuts[1:], strict=True)
            ]
        )
    return documents


def assert_contiguous(tokens: np.ndarray) -> None:
    assert len(tokens) >= 1
    np.testing.assert_array_equal(np.diff(tokens), 1)


def test_nsp_pairs_put_back_unused_sentences_and_take_b_from_another_document():
    # Sentences of 4 tokens and 12-token chunks: nothing is ever truncated, so the document's
    # own segments, in order, must be the whole document exactly once (the put-back).
    documents = int_documents(5, lambda d: [4] * (9 + d))
    labels = []
    for seed in range(80):
        pairs, no_other = create_nsp_pairs(documents, 2, 15, 0.0, np.random.default_rng(seed))
        assert no_other == 0
        own_text = []
        for pair in pairs:
            assert_contiguous(pair.tokens_a)
            assert_contiguous(pair.tokens_b)
            assert set(pair.tokens_a // 10000) == {2}
            own_text.append(pair.tokens_a)
            if pair.label:  # B: text of one other document, from a sentence start
                (other,) = set(pair.tokens_b // 10000)
                assert other != 2 and pair.tokens_b[0] % 4 == 0
            else:  # B: the true continuation
                assert pair.tokens_b[0] == pair.tokens_a[-1] + 1
                own_text.append(pair.tokens_b)
            assert len(pair.tokens_a) + len(pair.tokens_b) <= 12
            labels.append(pair.label)
        np.testing.assert_array_equal(np.concatenate(own_text), np.concatenate(documents[2]))
    # Each label is a fair coin: within 3 standard deviations of n / 2.
    n = len(labels)
    assert n > 300 and abs(sum(labels) - n / 2) <= 3 * math.sqrt(n) / 2


def test_nsp_without_another_document_gives_true_continuations_and_counts_them():
    documents = int_documents(1, lambda d: [3, 5, 2, 7, 4, 6, 1, 5])
    forced = total = 0
    for seed in range(20):
        pairs, no_other = create_nsp_pairs(documents, 0, 16, 0.1, np.random.default_rng(seed))
        assert all(p.label == 0 for p in pairs)
        for pair in pairs:
            assert set(pair.tokens_b // 10000) == {0} and pair.tokens_a[-1] < pair.tokens_b[0]
        forced += no_other
        total += len(pairs)
    assert 0.3 * total < forced < 0.7 * total  # the coins that said "random next"


def test_single_segments_are_chunks_truncated_to_fit():
    documents = int_documents(1, lambda d: [3, 5, 2, 7, 4, 6, 1, 5, 9, 2])
    # 12-token chunks: sentences until 12 tokens or the end (17, 16 and 11 tokens).
    chunks = [(0, 17), (17, 33), (33, 44)]
    for seed in range(10):
        segments = create_single_segments(documents[0], 14, 0.0, np.random.default_rng(seed))
        assert len(segments) == len(chunks)
        for segment, (start, end) in zip(segments, chunks, strict=True):
            assert segment.tokens_b is None and segment.label == 0
            assert_contiguous(segment.tokens_a)
            assert len(segment.tokens_a) == min(end - start, 12)
            assert start <= segment.tokens_a[0] and segment.tokens_a[-1] < end


def test_batches_hold_two_documents_and_a_last_single_one_joins_the_batch_before(monkeypatch):
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 10)
    documents = [(["x" * 30], 31), (["y"], 2), ([], 1), (["z" * 30], 31), (["w"], 2), (["v"], 2)]
    batches = list(pipeline._batches(documents))
    assert [[i for i, _ in batch] for batch, _ in batches] == [[0, 1], [2, 3, 4]]
    assert sum(b for _, b in batches) == sum(b for _, b in documents)
    single = list(pipeline._batches([(["only"], 5)]))
    assert [[i for i, _ in batch] for batch, _ in single] == [[0]]


# === The pipeline end to end, on documents with disjoint vocabularies ===


@pytest.fixture(scope="module")
def disjoint_corpus(tmp_path_factory, spm_model):
    """30 documents whose words are single pieces of the fixture vocabulary, each document with
    its own words; returns the corpus path and a map piece id -> document."""
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(spm_model, True)
    pieces = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
    words = [p[1:] for p in pieces if p.startswith("\u2581") and p[1:].isalpha() and len(p) >= 4]
    words = [w for w in words if len(tokenizer.encode(w)) == 1]
    num_docs, per_doc = 30, 12
    assert len(words) >= num_docs * per_doc
    owner = {}
    docs = []
    for d in range(num_docs):
        own = words[d * per_doc : (d + 1) * per_doc]
        owner.update({tokenizer.encode(w)[0]: d for w in own})
        lines = [
            " ".join(own[(s * 5 + w * 7) % per_doc] for w in range(3 + (d + s) % 5))
            for s in range(7 + d % 4)
        ]  # one sentence per line (no punctuation)
        docs.append("\n".join(lines))
    corpus = tmp_path_factory.mktemp("disjoint") / "corpus.txt"
    corpus.write_text("\n\n".join(docs) + "\n")
    return corpus, owner


def _create(corpus, spm_model, out, task, workers=1, mask=False, batch_bytes=300):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "BATCH_BYTES", batch_bytes)  # several batches
        return create_pretraining_data(
            str(corpus), spm_model, out, max_seq_length=32, max_predictions_per_seq=5,
            dupe_factor=5, num_shards=2, num_workers=workers, seed=11, mask=mask,
            sentence_task=task, shuffle_buffer=64, progress=False,
        )  # fmt: skip


def segments(records: dict[str, np.ndarray], row: int) -> tuple[np.ndarray, np.ndarray]:
    """Segment A and segment B (empty without one) of record `row`, without [CLS] and [SEP]."""
    length = int(records["input_mask"][row].sum())
    ids, types = records["input_ids"][row][:length], records["segment_ids"][row][:length]
    assert ids[0] == CLS and ids[-1] == SEP
    a = ids[1:length][types[1:length] == 0]
    b = ids[1:length][types[1:length] == 1]
    assert a[-1] == SEP and (len(b) == 0 or b[-1] == SEP)
    return a[:-1], b[:-1]


def test_nsp_negatives_come_from_other_documents(tmp_path, spm_model, disjoint_corpus):
    corpus, owner = disjoint_corpus
    out = tmp_path / "nsp"
    stats = _create(corpus, spm_model, out, "nsp")
    records = helpers.read_pretraining_records(out)  # unmasked: the text as written
    labels = records["next_sentence_labels"][:, 0]
    n = len(labels)
    for row in range(n):
        a, b = segments(records, row)
        (doc_a,) = {owner[t] for t in a}
        (doc_b,) = {owner[t] for t in b}
        assert (doc_a == doc_b) == (labels[row] == 0), row
    assert n > 300 and abs(labels.sum() - n / 2) <= 3 * math.sqrt(n) / 2  # 3 sigma of n / 2
    assert stats["sentence_task"] == "nsp" and stats["num_instances"] == n
    assert stats["nsp_random_next"] == labels.sum() and stats["nsp_no_other_document"] == 0
    assert stats["nsp_random_next_fraction"] == pytest.approx(labels.mean())
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["sentence_task"] == meta["settings"]["sentence_task"] == "nsp"
    # Masked output draws the same pairs (masks come after the pairs from each generator).
    masked = _create(corpus, spm_model, tmp_path / "nsp_masked", "nsp", mask=True)
    assert (masked["num_instances"], masked["nsp_random_next"]) == (n, labels.sum())


@pytest.mark.parametrize("mask", [True, False])
def test_none_instances_have_one_segment(tmp_path, spm_model, disjoint_corpus, mask):
    corpus, owner = disjoint_corpus
    out = tmp_path / "none"
    stats = _create(corpus, spm_model, out, "none", mask=mask)
    records = helpers.read_pretraining_records(out)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["sentence_task"] == "none" and meta["masked"] == mask
    assert "next_sentence_labels" in meta["features"]
    assert not (records["next_sentence_labels"]).any()
    assert not (records["segment_ids"]).any()
    assert not any(k.startswith(("sop_", "nsp_")) for k in stats)
    lengths = records["input_mask"].sum(axis=1)
    assert stats["num_instances"] == len(lengths) > 100 and lengths.max() == 32
    for row, length in enumerate(lengths):
        ids = records["input_ids"][row].copy()
        np.testing.assert_array_equal(records["input_mask"][row], np.arange(32) < length)
        if mask:  # the text before masking (a random replacement may be any id)
            predicted = records["masked_lm_weights"][row] > 0
            positions = records["masked_lm_positions"][row][predicted]
            assert len(positions) >= 1 and positions.min() >= 1 and positions.max() <= length - 2
            ids[positions] = records["masked_lm_ids"][row][predicted]
        else:
            assert records["token_boundary"][row][1] == 1
        assert ids[0] == CLS and ids[length - 1] == SEP
        assert len({owner[t] for t in ids[1 : length - 1]}) == 1  # one document's text


@pytest.mark.parametrize("task", ["nsp", "none"])
def test_same_bytes_for_one_and_two_workers(tmp_path, spm_model, disjoint_corpus, task):
    corpus, _ = disjoint_corpus
    digests = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        _create(corpus, spm_model, out, task, workers=workers, mask=True)
        digests.append(shards_digest(out))
    assert digests[0] == digests[1]


def test_cli_sentence_task(tmp_path, spm_model, disjoint_corpus, capsys):
    from albert_tf.cli import main

    corpus, _ = disjoint_corpus
    out = tmp_path / "data"
    args = ["--input", str(corpus), "--sp-model", spm_model, "--output", str(out)]
    args += ["--max-seq-length", "32", "--dupe-factor", "1", "--workers", "1", "--quiet"]
    assert main(["create-pretraining-data", *args, "--sentence-task", "nsp"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["sentence_task"] == "nsp" and 0.3 < summary["nsp_random_next_fraction"] < 0.7
    with pytest.raises(SystemExit) as exit_info:
        main(["create-pretraining-data", *args, "--sentence-task", "mlm"])
    assert exit_info.value.code == 2 and "invalid choice: 'mlm'" in capsys.readouterr().err


def test_unknown_sentence_task_is_a_data_error_before_writing(tmp_path, spm_model):
    from albert_tf.errors import DataError

    corpus = tmp_path / "c.txt"
    corpus.write_text(helpers.word_corpus())
    with pytest.raises(DataError, match="--sentence-task must be one of sop, nsp, none"):
        create_pretraining_data(str(corpus), spm_model, tmp_path / "out", sentence_task="mlm")
    assert not (tmp_path / "out").exists()
