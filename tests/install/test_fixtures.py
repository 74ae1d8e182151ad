"""A clone stands on its own: the suite's fixtures, and every path the project names, lie inside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import FIXTURES, REPO

# Text the project ships (code, tests, notebooks, CI, docs); result JSON records past runs' paths.
SCANNED_SUFFIXES = {".py", ".ipynb", ".md", ".toml", ".cfg", ".sh", ".yml", ".yaml", ""}
OUTSIDE_PATH = re.compile(r"\.\./shared|/work/|parents\[2\]")
READ_BY_TESTS = [
    *(
        f"{checkpoint}/{name}"
        for checkpoint in ("albert_tf1_tiny", "albert_tf1_groups")
        for name in (
            "albert_config.json",
            "checkpoint",
            "model.ckpt.index",
            "reference_outputs.npz",
        )
    ),
    *(
        f"albert_tf1_squad_v2/{name}"
        for name in (
            "albert_config.json",
            "model.ckpt.index",
            "model.ckpt.data-00000-of-00001",
            "reference_outputs.npz",
            "squad_v2.json",
            "settings.json",
            "features.json",
            "predictions.json",
            "nbest_predictions.json",
            "null_odds.json",
            "eval_results.json",
        )
    ),
    "tokenizer/spm.model",
    "tokenizer/spm.vocab",
    "tokenizer/reference_tokenization.json",
    "finetune_record/finetune.json",
]


def outside_repository(directory: Path) -> list[Path]:
    """`directory` itself and every file under it whose real path (symlinks followed) lies
    outside REPO; empty when all of it is inside."""
    paths = [directory, *sorted(directory.rglob("*"))]
    return [p for p in paths if not p.resolve().is_relative_to(REPO)]


def project_files() -> list[Path]:
    """The files git tracks (a clone); without git, every file outside git-ignored output."""
    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.split()
        return [REPO / name for name in listed]
    except (OSError, subprocess.CalledProcessError):
        ignored = {".git", "data", "runs", "albert_quickstart", "build", "dist"}
        return [
            p
            for p in REPO.rglob("*")
            if p.is_file() and not ignored & set(p.relative_to(REPO).parts)
        ]


def test_the_suites_fixtures_lie_inside_the_repository():
    assert FIXTURES.is_dir(), f"{FIXTURES} is not a directory"
    outside = outside_repository(FIXTURES)
    assert not outside, (
        f"the suite reads fixtures from outside the repository {REPO}: {outside[:3]} "
        "(unset ALBERT_TF_FIXTURES; the fixtures ship in tests/fixtures)"
    )


def test_the_guard_flags_a_directory_outside_the_repository(tmp_path):
    (tmp_path / "spm.model").write_bytes(b"x")
    assert outside_repository(REPO / "tests" / "fixtures" / "tokenizer") == []
    assert outside_repository(tmp_path) == [tmp_path, tmp_path / "spm.model"]


def test_every_fixture_the_tests_read_is_present():
    missing = [name for name in READ_BY_TESTS if not (FIXTURES / name).is_file()]
    assert not missing


def test_no_project_file_names_a_path_outside_the_repository():
    this_file = Path(__file__).resolve()
    offenders = [
        f"{p.relative_to(REPO)}:{number}: {line.strip()[:100]}"
        for p in project_files()
        if p.suffix in SCANNED_SUFFIXES
        and p.is_file()
        and p.resolve() != this_file
        and "fixtures" not in p.relative_to(REPO).parts[:2]
        for number, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE_PATH.search(line)
    ]
    assert not offenders, "\n".join(offenders)
