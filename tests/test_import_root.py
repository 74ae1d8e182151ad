"""One import root: albert-tf installs `albert_tf` alone, so a user's own `preprocess.py`,
`export.py` or `tokenizer.py` beside their script never replaces a module of the library."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

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


def _setuptools() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]


def test_every_package_folder_is_listed_under_one_root():
    setuptools = _setuptools()
    listed = set(setuptools["packages"])
    assert all(p == "albert_tf" or p.startswith("albert_tf.") for p in listed)
    found = set()
    for prefix, top in [("albert_tf", "albert_tf"), *setuptools["package-dir"].items()]:
        for init in (REPO / top).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / top).parts
            found.add(".".join((prefix, *parts)))
    assert listed == found


@pytest.mark.slow
def test_the_wheel_installs_nothing_beside_albert_tf(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("albert_tf", "preprocess", "export"):
        shutil.copytree(
            REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*command, "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("albert_tf-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"albert_tf", "albert_tf-0.1.0.dist-info"}
    for module in (
        "preprocess/tokenizer.py",
        "export/bundle.py",
        "pretrained/albert_en_mini/spm.model",
    ):
        assert f"albert_tf/{module}" in names


def test_the_names_the_notebooks_taught_still_import_with_one_warning(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("always")
        import albert_tf
        import albert_tf.export.bundle as new_bundle
        from albert_tf.preprocess import corpus as new_corpus
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from export.bundle import export_bundle
            from preprocess.corpus import build_default_corpus
        import export.bundle, preprocess.corpus
        assert export.bundle is new_bundle and preprocess.corpus is new_corpus
        assert export_bundle is new_bundle.export_bundle
        assert build_default_corpus is new_corpus.build_default_corpus
        print(sorted(str(w.message).split("`")[1] for w in caught))
        print({w.category.__name__ for w in caught})
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines == [
        "['export', 'export.bundle', 'preprocess', 'preprocess.corpus']",
        "{'FutureWarning'}",
    ]


def test_the_old_names_are_left_to_a_users_own_files(tmp_path):
    (tmp_path / "preprocess.py").write_text("MINE = True\n")
    code = "import albert_tf, preprocess; print(preprocess.MINE)\n"
    code += "import albert_tf.preprocess.corpus; print(hasattr(preprocess, 'corpus'))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "False"]
    assert "deprecated" not in done.stderr
