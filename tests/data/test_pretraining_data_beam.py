"""create-pretraining-data --runner beam: the local path's records, as a multiset, from Beam."""

from __future__ import annotations

import hashlib
import json
from array import array
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from albert_tf.preprocess.pretraining_data import create_pretraining_data, pipeline, plan
from albert_tf.preprocess.pretraining_data.documents import split_documents
from albert_tf.preprocess.pretraining_data.generate import DocumentProcessor, Settings

LABEL_KEYS = {
    "sop": ("sop_swapped", "sop_swapped_fraction"),
    "nsp": ("nsp_random_next", "nsp_random_next_fraction", "nsp_no_other_document"),
    "none": (),
}


@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 120))
def test_planned_batches_are_the_streamed_batches(sizes, batch_bytes):
    """`batch_starts` (Beam's plan from sizes) and `_batches` (the local stream) agree."""
    documents = [([("x" * n) or "y"], 1) for n in sizes]
    old = pipeline.BATCH_BYTES
    pipeline.BATCH_BYTES = batch_bytes
    try:
        streamed = [[index for index, _ in batch] for batch, _ in pipeline._batches(documents)]
    finally:
        pipeline.BATCH_BYTES = old
    planned = plan.batch_starts([max(n, 1) for n in sizes], batch_bytes)
    assert [batch[0] for batch in streamed if batch] == planned
    assert sum(map(len, streamed)) == len(sizes)


def read_records_of(path: Path) -> list[bytes]:
    """The serialized records of a TFRecord file (frames read by hand)."""
    data = path.read_bytes()
    records = []
    offset = 0
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 8], "little")
        records.append(data[offset + 12 : offset + 12 + length])
        offset += 16 + length
    return records


def digests(directory: Path) -> list[str]:
    """Sorted sha256 digests of the serialized records of every shard in `directory`."""
    records = [r for p in sorted(directory.glob("*.tfrecord")) for r in read_records_of(p)]
    return sorted(hashlib.sha256(r).hexdigest() for r in records)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[str]:
    """Two small files of pydoc topics (NSP's batches cross the file boundary)."""
    import pydoc_data.topics

    texts = [t for t in pydoc_data.topics.topics.values() if 200 < len(t) < 3000][:24]
    directory = tmp_path_factory.mktemp("beam_corpus")
    files = []
    for i, part in enumerate((texts[:10], texts[10:])):
        files.append(directory / f"part{i}.txt")
        files[-1].write_text("\n\n".join(part) + "\n")
    return [str(directory / "part*.txt")]


@pytest.fixture(scope="module")
def spm_model(fixtures_dir) -> str:
    return str(fixtures_dir / "tokenizer" / "spm.model")


COMMON = dict(max_seq_length=48, max_predictions_per_seq=6, dupe_factor=2, num_shards=2)


@pytest.mark.parametrize("sentence_task", ["nsp", "sop"])
def test_planned_batches_give_the_local_records(
    tmp_path, corpus, spm_model, sentence_task, monkeypatch
):
    """The Beam pipeline's steps without Beam: sizes per file, plan, documents keyed by batch,
    each batch processed alone (files and batches in any order) -> the local records."""
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 6000)
    local = tmp_path / "local"
    create_pretraining_data(
        corpus, spm_model, local, sentence_task=sentence_task, progress=False, **COMMON
    )
    files = sorted(Path(corpus[0]).parent.glob("part*.txt"))
    sizes = [
        [plan.document_size(d) for d in split_documents(f.read_text().splitlines())] for f in files
    ]
    batch_plan = plan.plan_batches([array("I", s) for s in sizes], 6000)
    assert len(batch_plan.starts) > 3
    batches: dict[int, list] = {}
    for file_index in reversed(range(len(files))):  # the order files are read in is irrelevant
        documents = split_documents(files[file_index].read_text().splitlines())
        for batch, document in plan.keyed_documents(documents, file_index, batch_plan):
            batches.setdefault(batch, []).append(document)
    assert sorted(batches) == list(range(len(batch_plan.starts)))
    meta = json.loads((local / "metadata.json").read_text())
    settings = Settings(
        sp_model_path=spm_model,
        do_lower_case=True,
        masked_lm_prob=0.15,
        short_seq_prob=0.1,
        ngram=3,
        seed=12345,
        mask=True,
        sentence_task=sentence_task,
        **COMMON,
    )
    processor = DocumentProcessor(settings)
    records = []
    for batch in reversed(sorted(batches)):
        records += [r for _, r in processor.process(sorted(batches[batch]), frame=False)[0]]
    assert sorted(hashlib.sha256(r).hexdigest() for r in records) == digests(local)
    assert len(records) == meta["num_instances"]


@pytest.mark.slow
@pytest.mark.parametrize("sentence_task", ["sop", "nsp", "none"])
def test_beam_records_equal_the_local_records(
    tmp_path, corpus, spm_model, sentence_task, monkeypatch
):
    pytest.importorskip("apache_beam", reason='Apache Beam is not installed (".[beam]" extra)')
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 6000)  # several batches, one across the files
    local = tmp_path / "local"
    create_pretraining_data(
        corpus, spm_model, local, sentence_task=sentence_task, progress=False, **COMMON
    )
    expected = digests(local)
    local_meta = json.loads((local / "metadata.json").read_text())
    assert local_meta["statistics"]["num_instances"] == len(expected) > 100
    for workers in (1, 2):
        out = tmp_path / f"beam{workers}"
        if workers == 1:
            create_pretraining_data(
                corpus,
                spm_model,
                out,
                sentence_task=sentence_task,
                runner="beam",
                num_workers=workers,
                progress=False,
                **COMMON,
            )
        else:  # the command line, Beam's own option after --
            from albert_tf.cli import main

            flags = [f"--{k.replace('_', '-')}={v}" for k, v in COMMON.items()]
            assert (
                main(
                    ["create-pretraining-data", f"--input={corpus[0]}", f"--sp-model={spm_model}"]
                    + [f"--output={out}", f"--sentence-task={sentence_task}", *flags]
                    + ["--runner=beam", "--workers=1", "--quiet", "--", "--direct_num_workers=2"]
                )
                == 0
            )
        assert digests(out) == expected, workers
        meta = json.loads((out / "metadata.json").read_text())
        stats = meta["statistics"]
        assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in local.iterdir())
        assert meta["settings"]["runner"] == "beam"
        assert [f["num_instances"] for f in meta["files"]] == [
            len(read_records_of(out / f["name"])) for f in meta["files"]
        ]
        keys = ("input_bytes", "num_documents", "num_instances", "masked_tokens", "ngram_counts")
        for key in keys:
            assert stats[key] == local_meta["statistics"][key], key
        for key in LABEL_KEYS[sentence_task]:
            assert stats[key] == local_meta["statistics"][key], key
        assert meta["features"] == local_meta["features"]
    if sentence_task == "nsp":
        assert local_meta["statistics"]["nsp_random_next"] > 0


def test_beam_runner_without_beam_is_one_line(tmp_path, spm_model, corpus, monkeypatch, capsys):
    """Without Apache Beam: one line naming the extra, exit code 2, nothing written."""
    import sys

    monkeypatch.setitem(sys.modules, "apache_beam", None)  # `import apache_beam` fails
    monkeypatch.delitem(sys.modules, "albert_tf.preprocess.pretraining_data.beam", raising=False)
    from albert_tf.cli import main

    out = tmp_path / "out"
    code = main(
        ["create-pretraining-data", "--input", corpus[0], "--sp-model", spm_model]
        + ["--output", str(out), "--runner", "beam", "--quiet"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and 'pip install -e ".[beam]"' in err[0]
    assert not out.exists()


def test_beam_options_need_the_beam_runner(tmp_path, spm_model, corpus, capsys):
    from albert_tf.cli import main

    code = main(
        ["create-pretraining-data", "--input", corpus[0], "--sp-model", spm_model]
        + ["--output", str(tmp_path / "o"), "--quiet", "--", "--runner=DataflowRunner"]
    )
    assert code == 2
    assert "need --runner beam" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
