"""experiments/history.py: the checkpoints that left the tree come back from git history, every
file's digest checked, into a cache outside the tree."""

from __future__ import annotations

import json
import subprocess

import pytest

from experiments import history
from experiments.albert_en_mini_distill import CHECKPOINTS, resume_dir
from tests.conftest import REPO

STAGE3 = "experiments/resume/albert_en_mini_distill_stage3"


def _has_commit(commit: str) -> bool:
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    )
    return found.returncode == 0


def test_the_record_names_each_folder_that_left_the_tree():
    folders = json.loads(CHECKPOINTS.read_text())["folders"]
    assert sorted(folders) == [str(resume_dir(s).relative_to(REPO)) for s in (1, 2, 3)]
    for folder, item in folders.items():
        assert not (REPO / folder).exists(), f"{folder} is in the tree again"
        assert {"commit", "rebuild", "restore", "from_git", "files"} <= item.keys()
        assert item["from_git"] == f"git restore --source {item['commit']} -- {folder}"
        assert all(len(f["sha256"]) == 64 and f["bytes"] > 0 for f in item["files"].values())


def test_the_record_is_what_its_commits_hold():
    folders = json.loads(CHECKPOINTS.read_text())["folders"]
    for folder, item in folders.items():
        if not _has_commit(item["commit"]):
            pytest.skip(f"no git history with {item['commit']} here")
        expected = {key: value for key, value in item.items() if key != "rebuild"}
        assert history.entry(item["commit"], folder, CHECKPOINTS) == expected


def test_restore_writes_the_committed_files_and_checks_them(tmp_path, monkeypatch):
    item = json.loads(CHECKPOINTS.read_text())["folders"][STAGE3]
    if not _has_commit(item["commit"]):
        pytest.skip(
            f"no git history with {item['commit']} here (a copy of the tree, a shallow clone)"
        )
    monkeypatch.setattr(history, "CACHE", tmp_path / "cache")
    folder = history.restore(REPO / STAGE3, CHECKPOINTS)
    assert folder == tmp_path / "cache" / "albert_en_mini_distill_stage3"
    written = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert written == set(item["files"])
    for name, file in item["files"].items():
        assert history.sha256((folder / name).read_bytes()) == file["sha256"], name
    # A damaged cached file is written again; an intact cache is reused as it is.
    (folder / "checkpoint").write_text("damaged")
    assert history.restore(REPO / STAGE3, CHECKPOINTS) == folder
    assert (
        history.sha256((folder / "checkpoint").read_bytes())
        == item["files"]["checkpoint"]["sha256"]
    )
    stamp = (folder / "ckpt-1.index").stat().st_mtime_ns
    assert history.restore(REPO / STAGE3, CHECKPOINTS) == folder
    assert (folder / "ckpt-1.index").stat().st_mtime_ns == stamp


def test_a_folder_in_the_tree_or_not_recorded_is_given_back_as_it_is(tmp_path):
    assert history.restore(tmp_path, CHECKPOINTS) == tmp_path  # in the tree: --save-resume's
    missing = tmp_path / "elsewhere"
    assert history.restore(missing, CHECKPOINTS) == missing  # the caller reports it missing


def test_without_git_history_it_says_how_to_get_the_folder(tmp_path, monkeypatch):
    record = tmp_path / "experiments" / "results" / "checkpoints.json"
    record.parent.mkdir(parents=True)
    record.write_text(CHECKPOINTS.read_text())
    monkeypatch.setattr(history, "ROOT", tmp_path)  # a copy of the tree without .git
    monkeypatch.setattr(history, "CACHE", tmp_path / "experiments" / ".cache")
    with pytest.raises(SystemExit, match="not in the tree and git history could not give it"):
        history.restore(tmp_path / STAGE3, record)
    assert not (tmp_path / "experiments" / ".cache" / "albert_en_mini_distill_stage3").exists()
