"""One import root: albert-tf installs `albert_tf` alone, so a user's own `preprocess.py`,
`export.py` or `tokenizer.py` beside their script never replaces a module of the library."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

USER_FILES = ("preprocess", "export", "tokenizer")


def _env() -> dict[str, str]:
    """The environment less PYTHONPATH: albert_tf comes from the install, as for a user."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


SCRIPT = """
import json
import sys
from pathlib import Path

import albert_tf
from albert_tf.cli import main

model = albert_tf.load_pretrained("albert_en_mini")
assert model.encoder is not None
assert main(["export", "--checkpoint", "albert_en_mini", "--output", "hub"]) == 0
assert Path("hub/encoder/saved_model.pb").is_file() and Path("hub/preprocess").is_dir()
rows = ["sentence\\tlabel"]
for i in range(16):
    rows.append(f"a {'good great' if i % 2 else 'bad dull'} film {i}\\t{i % 2}")
Path("train.tsv").write_text("\\n".join(rows) + "\\n")
args = ["finetune", "--task", "classify", "--train", "train.tsv", "--init", "albert_en_mini"]
args += ["--max-seq-length", "16", "--epochs", "1", "--batch-size", "8", "--no-serving"]
assert main([*args, "--output", "run"]) == 0
assert main(["predict", "--checkpoint", "run", "--input", "train.tsv", "--output", "p.jsonl"]) == 0
lines = Path("p.jsonl").read_text().splitlines()
assert len(lines) == 16 and all(json.loads(line)["label"] in ("0", "1") for line in lines)
users = [name for name in ("preprocess", "export", "tokenizer") if name in sys.modules]
print("USER MODULES IMPORTED:", users)
"""


@pytest.mark.slow
def test_a_script_beside_its_own_preprocess_export_and_tokenizer_files(tmp_path):
    for name in USER_FILES:
        (tmp_path / f"{name}.py").write_text(f"raise RuntimeError('the user\\'s {name}.py')\n")
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT))
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "USER MODULES IMPORTED: []" in done.stdout


# The folders that install, each with the name it installs under (pyproject.toml's package-dir).
FOLDERS = {
    "albert_tf": "albert_tf",
    "preprocess": "albert_tf/preprocess",
    "export": "albert_tf/export",
}


def _checkout(tmp_path) -> Path:
    """The tracked files that an install reads, copied as a clone has them."""
    source = tmp_path / "source"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "pyproject.toml", "setup.py", "README.md", *FOLDERS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    return source


def _installed_modules() -> set[str]:
    """Every module file of the three folders, at the path an install gives it."""
    return {
        f"{installed}/{path.relative_to(REPO / folder).as_posix()}"
        for folder, installed in FOLDERS.items()
        for path in (REPO / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def test_no_symlink_is_tracked_in_a_folder_that_installs():
    """The import root is pyproject.toml's package-dir alone: no link in the tree stands in."""
    staged = subprocess.run(
        ["git", "ls-files", "-s", "--", *FOLDERS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert [line for line in staged if line.startswith("120000")] == []


def test_package_dir_names_every_folder_that_installs():
    table = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    package_dir = table["setuptools"]["package-dir"]
    assert {folder: name.replace(".", "/") for name, folder in package_dir.items()} == FOLDERS


@pytest.mark.slow
def test_the_wheel_installs_every_module_and_nothing_beside_albert_tf(tmp_path):
    source = _checkout(tmp_path)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*command, "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("albert_tf-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {name.split("/")[0] for name in names} == {"albert_tf", "albert_tf-0.1.0.dist-info"}
    assert _installed_modules() - names == set()
    assert "albert_tf/pretrained/albert_en_mini/spm.model" in names


def test_the_old_top_level_names_are_left_to_a_users_own_files(tmp_path):
    (tmp_path / "preprocess.py").write_text("MINE = True\n")
    code = "import albert_tf, preprocess; print(preprocess.MINE)\n"
    code += "import albert_tf.preprocess.corpus; print(hasattr(preprocess, 'corpus'))\n"
    code += "import importlib.util; print(importlib.util.find_spec('export'))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "False", "None"]
