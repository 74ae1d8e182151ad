"""No file over 1 MB in the tree outside the shipped model's folder, tests/fixtures and docs/assets
(DESIGN.md's layout): a checkout stays small, and so does every copy of the tree sent to a GPU
machine. 1 MB is 1,000,000 bytes here. The files checked are git's: the tracked ones and the
untracked ones git does not ignore (the next `git add -A` would track them). Intermediate
checkpoints go to git-ignored folders, and those once committed are taken from git history
(experiments/history.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

LIMIT = 1_000_000  # bytes
ALLOWED = ("albert_tf/pretrained/albert_en_mini/", "tests/fixtures/", "docs/assets/")


def oversized(root: Path, paths: list[str]) -> dict[str, int]:
    """The sizes of the files among `paths` (relative to `root`, with /) over LIMIT bytes and
    outside ALLOWED; paths git lists that are gone from the tree are skipped."""
    sizes = {}
    for path in paths:
        if path.startswith(ALLOWED):
            continue
        try:
            size = os.lstat(root / path).st_size
        except FileNotFoundError:  # deleted, not yet committed
            continue
        if size > LIMIT:
            sizes[path] = size
    return sizes


def _git_files() -> list[str]:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no list of the files a clone holds")
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    return sorted({name.decode() for name in listed.stdout.split(b"\0") if name})


def test_no_file_over_1_mb_outside_the_shipped_model_fixtures_and_doc_assets():
    found = oversized(REPO, _git_files())
    listing = "\n".join(f"  {path}: {size:,} bytes" for path, size in sorted(found.items()))
    assert not found, (
        f"files over {LIMIT:,} bytes outside {', '.join(ALLOWED)}:\n{listing}\n"
        "keep intermediates out of git (a git-ignored folder such as data/ or experiments/.cache/); "
        "experiments/history.py records a folder once committed and restores it from git history"
    )


def test_the_rule_counts_bytes_and_spares_the_three_folders(tmp_path):
    for path, size in {
        "experiments/resume/run/ckpt-1.data": LIMIT + 1,
        "experiments/results/table.json": LIMIT,
        "albert_tf/pretrained/albert_en_mini/weights.safetensors": 6 * LIMIT,
        "tests/fixtures/model.bin": 2 * LIMIT,
        "docs/assets/charts/big.png": 2 * LIMIT,
        "docs/big.png": 2 * LIMIT,
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).touch()
        os.truncate(tmp_path / path, size)  # sparse: the size without the bytes
    listed = [str(p.relative_to(tmp_path).as_posix()) for p in tmp_path.rglob("*") if p.is_file()]
    assert oversized(tmp_path, [*listed, "gone.bin"]) == {
        "experiments/resume/run/ckpt-1.data": LIMIT + 1,
        "docs/big.png": 2 * LIMIT,
    }
