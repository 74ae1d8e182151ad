"""train-tokenizer's seeded line sample: the local scheme, and the same sample from Beam."""

from __future__ import annotations

import gzip

import pytest

from albert_tf.cli import main
from albert_tf.preprocess.normalize import preprocess_text
from albert_tf.preprocess.spm_train import sample_corpus, sample_key


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two files (one gzipped) of 600 distinct prose lines, a few blank or duplicated."""
    import pydoc_data.topics

    lines = [
        line.strip()
        for text in pydoc_data.topics.topics.values()
        for line in text.splitlines()
        if len(line.strip()) > 30
    ]
    lines = list(dict.fromkeys(lines))[:600]
    root = tmp_path_factory.mktemp("spm_sample")
    (root / "a.txt").write_text("\n".join(lines[:300] + ["", lines[0]]) + "\n", encoding="utf-8")
    with gzip.open(root / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[300:] + ["   "]) + "\n")
    return root


def test_local_sample_is_the_smallest_seeded_hashes(corpus):
    files = sorted(corpus.iterdir())
    raw = (corpus / "a.txt").read_text(encoding="utf-8").splitlines()
    with gzip.open(corpus / "b.txt.gz", "rt", encoding="utf-8") as f:
        raw += f.read().splitlines()
    texts = [preprocess_text(line, lower=True) for line in raw]
    texts = [t for t in texts if t]
    assert len(texts) == 601  # one duplicated line, blank lines dropped
    sample = sample_corpus(files, True, 100, seed=7)
    assert len(sample) == 100
    assert sample == [t for _, t in sorted(sample_key(t, 7) for t in texts)[:100]]
    assert set(sample) <= set(texts)
    # another seed, another sample; the file order does not matter
    assert len(set(sample) & set(sample_corpus(files, True, 100, seed=8))) < 50
    assert sample_corpus(files[::-1], True, 100, seed=7) == sample
    # size 0 is the whole corpus, in sample order
    assert sorted(sample_corpus(files, True, 0, seed=7)) == sorted(texts)


@pytest.mark.slow
def test_beam_sample_and_model_equal_the_local_ones(corpus, tmp_path):
    pytest.importorskip("apache_beam", reason='Apache Beam is not installed (".[beam]" extra)')
    from albert_tf.preprocess.spm_beam import sample_with_beam

    patterns = [str(corpus / "*.txt"), str(corpus / "*.gz")]
    files, sample = sample_with_beam(patterns, True, 250, 11, [], num_workers=2)
    assert files == sorted(str(p) for p in corpus.iterdir())
    assert sample == sample_corpus(sorted(corpus.iterdir()), True, 250, seed=11)

    args = ["train-tokenizer", *(f"--input={p}" for p in patterns), "--vocab-size", "120"]
    args += ["--input-sentence-size", "250", "--seed", "11", "--threads", "1"]
    assert main([*args, "--output", str(tmp_path / "local")]) == 0
    assert main([*args, "--output", str(tmp_path / "beam"), "--runner", "beam"]) == 0
    local = (tmp_path / "local.vocab").read_text()
    assert (tmp_path / "beam.vocab").read_text() == local
    assert len(local.splitlines()) == 120


def test_beam_runner_without_beam_is_one_line(corpus, tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "apache_beam", None)  # `import apache_beam` fails
    monkeypatch.delitem(sys.modules, "albert_tf.preprocess.spm_beam", raising=False)
    args = ["train-tokenizer", "--input", str(corpus / "*.txt"), "--vocab-size", "120"]
    assert main([*args, "--output", str(tmp_path / "m"), "--runner", "beam"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install -e ".[beam]"' in err[0]
    assert list(tmp_path.iterdir()) == []
