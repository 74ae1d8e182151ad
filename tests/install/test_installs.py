"""What each documented install resolves and gives.

An extra may add packages, never narrow the core's. CI installs every extra at once (the `test`
extra), so a pin written in one extra alone holds in CI and not for a user who installs another
extra alone: sentencepiece once resolved to 0.2.2 in CI and to 0.2.3 for `.[keras-hub]` alone,
and the keras-hub export crashed only there.

Every kind of install (editable, from the folder, from a built wheel) gives the same one import
root from a clone's files: `albert_tf.export` and `albert_tf.preprocess` import from the install,
`albert-tf` runs, and no bare `export` or `preprocess` is put on the path.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import venv

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO
from tests.install.test_import_root import _checkout, _env

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_no_extra_narrows_a_core_requirement():
    project = _project()
    core = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    narrowed = [
        f"[{extra}] {requirement}"
        for extra, requirements in project["optional-dependencies"].items()
        for requirement in map(Requirement, requirements)
        if requirement.name in core and requirement.specifier != core[requirement.name].specifier
    ]
    assert narrowed == [], "pin these in `dependencies` instead, for every install"


def _extra(project: dict, name: str) -> set[str]:
    """The distributions (canonical names) that extra `name` brings, its `albert-tf[...]`
    requirements followed."""
    brought = set()
    for requirement in map(Requirement, project["optional-dependencies"][name]):
        if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
            for extra in requirement.extras:
                brought |= _extra(project, extra)
        else:
            brought.add(canonicalize_name(requirement.name))
    return brought


def _imported(paths: list) -> set[str]:
    """The top-level names that the Python files under `paths` import, beside the standard
    library's and albert_tf's."""
    names = set()
    for path in paths:
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"albert_tf"}


def test_the_serve_extra_brings_what_export_triton_and_serve_import():
    """`pip install -e ".[serve]"` alone, then the serving page's commands in order: the export
    once stopped there with "ONNX export needs the onnx extra" (issue 63, item 6). Each package
    the ONNX and Triton writers and the server import comes with the core or the extra."""
    from importlib.metadata import packages_distributions

    project = _project()
    installed = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    installed |= _extra(project, "serve")
    assert _extra(project, "onnx") <= installed
    runtimes = REPO / "albert_tf" / "runtimes"
    code = [REPO / "export" / "onnx", REPO / "export" / "triton", runtimes / "triton"]
    code += [
        runtimes / "ort.py",
        runtimes / "cores.py",
        REPO / "albert_tf" / "commands" / "serve.py",
    ]
    # Triton's Python backend gives its model file this module, in Triton's own environment.
    imported = _imported(code) - {"triton_python_backend_utils"}
    distributions = packages_distributions()
    missing = [
        name
        for name in sorted(imported)
        if not {canonicalize_name(d) for d in distributions.get(name, [name])} & installed
    ]
    assert missing == []


# Run in the install's own environment, from an empty folder: where each name comes from.
WHERE = """
import importlib.util, json
import albert_tf.export.bundle, albert_tf.preprocess.tokenizer
print(json.dumps({
    "export": albert_tf.export.bundle.__file__,
    "preprocess": albert_tf.preprocess.tokenizer.__file__,
    "bare": [name for name in ("export", "preprocess") if importlib.util.find_spec(name)],
}))
"""


def _install(tmp_path, kind: str):
    """A virtual environment (seeing the machine's packages) with the clone installed by `kind`;
    returns (its bin folder, the folder whose files the install's modules must be)."""
    source = _checkout(tmp_path)
    environment = tmp_path / "env"
    venv.create(environment, system_site_packages=True, with_pip=False)
    python = str(environment / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet"]
    if kind == "wheel":
        build = [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        subprocess.run([*build, "-w", str(tmp_path / "dist"), str(source)], check=True)
        (target,) = (tmp_path / "dist").glob("albert_tf-*.whl")
    else:
        target = source
    subprocess.run([*pip, *(["-e"] if kind == "editable" else []), str(target)], check=True)
    site = next((environment / "lib").glob("python3*/site-packages"))
    return environment / "bin", source if kind == "editable" else site


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["editable", "folder", "wheel"])
def test_every_install_gives_one_import_root(tmp_path, kind):
    bin_folder, home = _install(tmp_path, kind)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**_env(), "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(bin_folder / "python"), "-c", WHERE],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    where = json.loads(done.stdout.splitlines()[-1])
    assert where["bare"] == []
    assert where["export"].startswith(str(home)) and where["preprocess"].startswith(str(home))
    helped = subprocess.run(
        [str(bin_folder / "albert-tf"), "export", "--help"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert helped.returncode == 0, helped.stderr[-3000:]
    assert "--checkpoint" in helped.stdout
