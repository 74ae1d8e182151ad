"""train_sentencepiece and `albert-tf train-tokenizer`: ALBERT's recipe, atomic outputs, errors."""

from __future__ import annotations

import gzip
import json

import pytest

from albert_tf.cli import main
from albert_tf.errors import DataError, OutputError, TokenizerError
from albert_tf.preprocess.spm_train import USER_DEFINED_SYMBOLS, train_sentencepiece
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, fixtures_dir):
    """Two files (one gzipped) of the fixture sentences, with accents and upper case."""
    cases = json.loads((fixtures_dir / "tokenizer" / "reference_tokenization.json").read_text())
    lines = [c["text"].replace("\n", " ") for c in cases["cases"]] * 3
    root = tmp_path_factory.mktemp("corpus")
    (root / "a.txt").write_text("\n".join(lines[:250]) + "\n\n   \n", encoding="utf-8")
    with gzip.open(root / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[250:]) + "\nÉCOLE Café\n")
    return root


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    prefix = tmp_path_factory.mktemp("spm") / "spm"
    model = train_sentencepiece([str(corpus / "*.txt"), str(corpus / "*.gz")], 200, prefix)
    return model


def test_recipe_ids_and_files(trained):
    assert trained.name == "spm.model"
    assert trained.with_suffix(".vocab").is_file()
    tok = AlbertTokenizer(trained)
    assert tok.vocab_size == 200
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.convert_ids_to_tokens(list(range(5, 13))) == list(USER_DEFINED_SYMBOLS)
    assert tok.sp_model.bos_id() == -1 and tok.sp_model.eos_id() == -1
    vocab = [line.split("\t")[0] for line in trained.with_suffix(".vocab").read_text().splitlines()]
    assert len(vocab) == 200
    assert not any(c.isupper() or c in "éÉ" for piece in vocab[5:] for c in piece)  # normalized
    assert sorted(p.name for p in trained.parent.iterdir()) == ["spm.model", "spm.vocab"]


def test_deterministic_and_no_temporary_paths(corpus, trained, tmp_path):
    again = train_sentencepiece([str(corpus / "*.txt"), str(corpus / "*.gz")], 200, tmp_path / "s")
    vocab = again.with_suffix(".vocab").read_text()
    assert vocab == trained.with_suffix(".vocab").read_text()
    assert b"albert-spm-" not in again.read_bytes()
    assert str(corpus / "b.txt.gz").encode() in again.read_bytes()


def test_errors(corpus, trained, tmp_path):
    with pytest.raises(DataError, match="matches no files"):
        train_sentencepiece([str(tmp_path / "none*.txt")], 200, tmp_path / "x")
    (tmp_path / "blank.txt").write_text(" \n\t\n")
    with pytest.raises(DataError, match="holds no text"):
        train_sentencepiece([str(tmp_path / "blank.txt")], 200, tmp_path / "x")
    with pytest.raises(DataError, match=r"Vocabulary size too high \(50000\)"):
        train_sentencepiece([str(corpus / "a.txt")], 50000, tmp_path / "x")
    with pytest.raises(TokenizerError, match="too small"):
        train_sentencepiece([str(corpus / "a.txt")], 10, tmp_path / "x")
    with pytest.raises(OutputError, match="already exists"):
        train_sentencepiece([str(corpus / "a.txt")], 200, trained.with_suffix(""))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.txt"]  # nothing half-written


def test_cli(corpus, tmp_path, capsys):
    args = ["train-tokenizer", "--input", str(corpus / "a.txt"), "--vocab-size", "150"]
    assert main([*args, "--output", str(tmp_path / "cli")]) == 0
    assert AlbertTokenizer(tmp_path / "cli.model").vocab_size == 150
    assert main([*args, "--output", str(tmp_path / "cli")]) == 2
    assert main([*args, "--output", str(tmp_path / "cli"), "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["train-tokenizer", "--input", "/nonexistent/*.txt", "--vocab-size", "150",
                 "--output", str(tmp_path / "y")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["albert-tf train-tokenizer: error: input '/nonexistent/*.txt' matches no files"]
