"""Every notebook in colab/ runs top to bottom in small mode (ALBERT_TF_SMALL=1), offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

COLAB = REPO / "colab"
# CI's set-up command runs `albert-tf quickstart` in the repository: notebook 1 then fine-tunes
# its pretrained modules instead of building a random tiny model first.
QUICKSTART_MODULES = REPO / "albert_quickstart" / "hub"
NOTEBOOKS = sorted(COLAB.glob("*.ipynb"))
TIMEOUT = 180  # seconds per cell


def test_there_are_four_notebooks_committed_without_outputs():
    assert [p.name for p in NOTEBOOKS] == [
        "01_sentiment_hub_keraslayer.ipynb",
        "02_pretraining_from_scratch.ipynb",
        "03_convert_and_export.ipynb",
        "04_parameter_efficiency.ipynb",
    ]
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


def execute(path: Path, tmp_path: Path, fixtures_dir: Path):
    notebook = nbformat.read(path, as_version=4)
    env = {
        "ALBERT_TF_SMALL": "1",
        "ALBERT_TF_FIXTURES": str(fixtures_dir),
        "ALBERT_TF_WORKDIR": str(tmp_path),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    if (QUICKSTART_MODULES / "encoder").is_dir() and (QUICKSTART_MODULES / "preprocess").is_dir():
        env["ALBERT_TF_MODULES"] = str(QUICKSTART_MODULES)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(
            notebook,
            timeout=TIMEOUT,
            kernel_name="python3",
            resources={"metadata": {"path": str(tmp_path)}},
        )
        client.execute()
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return notebook


def outputs_of(notebook, output_type: str | None = None) -> list:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output_type is None or output.output_type == output_type
    ]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_small_mode(path, tmp_path, fixtures_dir):
    notebook = execute(path, tmp_path, fixtures_dir)
    assert outputs_of(notebook, "error") == []
    images = [o for o in outputs_of(notebook, "display_data") if "image/png" in o.data]
    if path.name.startswith("04_"):
        assert len(images) == 2  # the parameter plot and the speed plot
