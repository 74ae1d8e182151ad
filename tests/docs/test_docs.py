"""The documentation is checked like code: the site builds in strict mode, generated pages are
current, and every code block in docs/ and README.md runs here or says why it cannot.

A fenced block is preceded by one marker (docs/development.md describes them):
`<!-- run -->` / `<!-- run: hub -->` (run below), `<!-- tested-by: tests/x.py::test_y -->` (that
test exists) or `<!-- no-test: REASON -->`. Whatever the marker, `albert-tf` command lines parse
with the real parser, and Python blocks compile, import and bind their calls.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.install.test_public_api import PACKAGES

DOCS = REPO / "docs"
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(
    r"^<!-- (run(?:: (?P<setup>\w+))?|tested-by: (?P<tests>.+?)|no-test: (?P<reason>.+?)) -->$"
)
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"$', re.MULTILINE)
SETUPS = {None, "hub"}


def _script(name: str):
    """A module from docs/scripts/ (not a package: they are run as scripts)."""
    spec = importlib.util.spec_from_file_location(name, DOCS / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    marker: re.Match | None

    def __str__(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def _pages() -> list[Path]:
    """README.md, every page under docs/, and the files the pages include as snippets."""
    pages = [README, *sorted(DOCS.rglob("*.md"))]
    included = [REPO / m["path"] for page in pages for m in SNIPPET.finditer(page.read_text())]
    return pages + included


def _blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    blocks, n = [], 0
    while n < len(lines):
        opening = FENCE.match(lines[n])
        if not opening:
            n += 1
            continue
        end = next(i for i in range(n + 1, len(lines)) if lines[i].rstrip() == "```")
        before = next((lines[i].strip() for i in range(n - 1, -1, -1) if lines[i].strip()), "")
        code = "\n".join(lines[n + 1 : end]) + "\n"
        blocks.append(Block(path, n + 1, opening[1], code, MARKER.match(before)))
        n = end + 1
    return blocks


BLOCKS = [block for page in _pages() for block in _blocks(page)]
PYTHON = [b for b in BLOCKS if b.language == "python"]
RUN = [b for b in PYTHON if b.marker and b.marker[0].startswith("<!-- run")]


def test_every_block_carries_a_marker():
    assert len(BLOCKS) > 40
    unmarked = [str(b) for b in BLOCKS if b.marker is None]
    assert not unmarked, f"code blocks without a run/tested-by/no-test marker: {unmarked}"
    assert all(b.marker["setup"] in SETUPS for b in BLOCKS)
    assert all(b.language == "python" for b in RUN), "only Python blocks are run"


def test_tested_by_names_tests_that_exist():
    for block in BLOCKS:
        if not block.marker["tests"]:
            continue
        for target in block.marker["tests"].split(", "):
            file, _, test = target.partition("::")
            assert (REPO / file).is_file(), f"{block}: {file} does not exist"
            if test:
                source = (REPO / file).read_text()
                assert re.search(rf"^def {re.escape(test)}\(", source, re.M), f"{block}: {target}"


def _command_lines(code: str) -> list[list[str]]:
    """Each `albert-tf ...` command of a shell block, as argv after `albert-tf`."""
    joined = re.sub(r"\\\n\s*", " ", code)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        while words and "=" in words[0] and words[0] != "albert-tf":  # VAR=value albert-tf ...
            words.pop(0)
        if words and words[0] == "albert-tf":
            commands.append(words[1:])
    return commands


def _check_command(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert argv and argv[0] in subparsers.choices, f"unknown command {argv[:1]}"
    options = {o: a for a in subparsers.choices[argv[0]]._actions for o in a.option_strings}
    words = argv[1:]
    for i, word in enumerate(words):
        if word == "--":  # Beam's own options follow
            break
        if word.startswith("--"):
            flag, has_value, value = word.partition("=")
            assert flag in options, f"albert-tf {argv[0]}: no option {flag}"
            choices = options[flag].choices
            if choices and options[flag].nargs != 0:
                value = value if has_value else words[i + 1]
                assert value in choices, f"albert-tf {argv[0]} {flag}: {value} not in {choices}"


def test_every_command_line_parses():
    from albert_tf.cli import build_parser

    parser = build_parser()
    checked = 0
    for block in BLOCKS:
        if block.language == "python":
            continue
        for argv in _command_lines(block.code):
            try:
                _check_command(parser, argv)
            except AssertionError as error:
                raise AssertionError(f"{block}: {error}") from None
            checked += 1
    assert checked > 30


def test_the_checker_catches_rotten_command_lines():
    from albert_tf.cli import build_parser

    parser = build_parser()
    assert _command_lines("X='{\"a\": 1}' \\\n  albert-tf params --config base  # note\n") == [
        ["params", "--config", "base"]
    ]
    for argv in (["nope"], ["params", "--cfg", "base"], ["pretrain", "--strategy", "gpu"]):
        with pytest.raises(AssertionError):
            _check_command(parser, argv)


def _call_target(node: ast.expr, namespace: dict):
    """The object a call's function expression names, when it is an imported name or an
    attribute chain on one; None otherwise."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _call_target(node.value, namespace)
        return getattr(base, node.attr, None) if inspect.ismodule(base) else None
    return None


def _check_python(code: str) -> None:
    tree = ast.parse(code)
    namespace: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            exec(compile(ast.Module([node], []), "<block>", "exec"), namespace)  # noqa: S102
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = _call_target(node.func, namespace)
        if target is None or not callable(target):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            continue
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):  # builtins and extension types without one
            continue
        arguments = [None] * len(node.args)
        signature.bind_partial(*arguments, **{k.arg: None for k in node.keywords})


@pytest.mark.parametrize("block", PYTHON, ids=str)
def test_python_block_imports_and_binds(block):
    _check_python(block.code)


def test_the_binder_catches_a_wrong_keyword():
    with pytest.raises(TypeError):
        _check_python("from albert_tf import PretrainSettings\nPretrainSettings(output_dir='x')\n")


@pytest.fixture(scope="module")
def hub_folder(sp_export, tmp_path_factory):
    """A folder where `albert_quickstart/hub` and `hub` are a small exported bundle."""
    folder = tmp_path_factory.mktemp("docs_hub")
    (folder / "albert_quickstart").mkdir()
    (folder / "albert_quickstart" / "hub").symlink_to(sp_export["bundle"].output_dir)
    (folder / "hub").symlink_to(sp_export["bundle"].output_dir)
    return folder


# Runs each block in a fresh namespace, in its folder, in one process (TensorFlow imported once);
# prints one JSON line: per block, its stdout or its traceback.
RUNNER = """
import contextlib, io, json, os, sys, traceback
results = []
for block in json.load(sys.stdin):
    os.chdir(block["cwd"])
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block["code"], block["name"], "exec"), {"__name__": "__main__"})
        results.append({"ok": True, "stdout": out.getvalue()})
    except BaseException:
        results.append({"ok": False, "stdout": out.getvalue(), "error": traceback.format_exc()})
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def run_results(request) -> dict[str, dict]:
    """Every `run` block's result, by block; the `hub` ones run in `hub_folder`."""
    blocks = [
        {
            "name": str(block),
            "code": block.code,
            "cwd": str(request.getfixturevalue("hub_folder") if block.marker["setup"] else REPO),
        }
        for block in RUN
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(
        zip((b["name"] for b in blocks), json.loads(done.stdout.splitlines()[-1]), strict=True)
    )


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=str)
def test_run_block(block, run_results):
    result = run_results[str(block)]
    assert result["ok"], f"{block}:\n{result['error']}"
    if "print(" in block.code:
        assert result["stdout"].strip()


def test_cli_reference_is_generated_from_the_parsers():
    committed = (DOCS / "reference" / "cli.md").read_text()
    assert committed == _script("cli_reference").render(), (
        "docs/reference/cli.md is stale: run python docs/scripts/cli_reference.py"
    )


def test_fine_tuning_tables_are_generated_from_the_code():
    committed = (DOCS / "guides" / "fine-tuning.md").read_text()
    assert committed == _script("finetune_tables").render(committed), (
        "docs/guides/fine-tuning.md is stale: run python docs/scripts/finetune_tables.py"
    )


def test_parameter_table_is_generated_from_the_code():
    committed = (DOCS / "guides" / "albert.md").read_text()
    assert committed == _script("params_table").render(committed), (
        "docs/guides/albert.md is stale: run python docs/scripts/params_table.py"
    )


def test_paper_claims_tables_are_generated_from_the_ablations_record():
    committed = (DOCS / "results" / "paper-claims.md").read_text()
    assert committed == _script("paper_claims").render(committed), (
        "docs/results/paper-claims.md is stale: run python docs/scripts/paper_claims.py"
    )


def test_charts_are_drawn_from_the_results(tmp_path):
    assert _script("make_charts").main(["--output", str(tmp_path)]) == 0
    drawn = sorted(p.name for p in tmp_path.glob("*.png"))
    committed = sorted(p.name for p in (DOCS / "assets" / "charts").glob("*.png"))
    assert drawn == committed and len(drawn) == 6
    shown = set(re.findall(r"assets/charts/(\w+\.png)", "".join(p.read_text() for p in _pages())))
    assert shown == set(drawn), "every chart is shown on a page, and only drawn ones"


def _documented() -> set[str]:
    text = "".join(p.read_text() for p in (DOCS / "reference" / "api").glob("*.md"))
    return set(re.findall(r"^::: ([\w.]+)$", text, re.M))


@pytest.mark.parametrize("package", PACKAGES)
def test_the_api_reference_documents_every_exported_name(package):
    """A class or function has a `::: module.name` directive at its defining module; a constant
    one under its name."""
    module = importlib.import_module(package)
    documented = _documented()
    missing = []
    for name in module.__all__:
        value = getattr(module, name)
        if callable(value):
            found = f"{value.__module__}.{name}" in documented
        else:
            found = any(d.rsplit(".", 1)[-1] == name for d in documented)
        if not found:
            missing.append(name)
    assert not missing, f"{package}: not in docs/reference/api: {missing}"


def test_site_builds_in_strict_mode(tmp_path):
    """`mkdocs build --strict`: any warning (a broken link, a missing API object) fails."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "model" / "index.html").is_file()
    page = (tmp_path / "site" / "reference" / "api" / "model" / "index.html").read_text()
    assert "AlbertEncoder" in page and "fonts.googleapis" not in page
    # SentencePiece's special pieces look like HTML tags: outside backticks the browser hides
    # them, so a docstring's "<unk>" would read as nothing.
    data = (tmp_path / "site" / "reference" / "api" / "data" / "index.html").read_text()
    assert "&lt;unk&gt;" in data
    hidden = [
        str(path.relative_to(tmp_path / "site"))
        for path in (tmp_path / "site").rglob("*.html")
        if re.search(r"<(unk|pad)>", path.read_text())
    ]
    assert not hidden, f"<unk> or <pad> outside backticks, hidden as an HTML tag: {hidden}"


def test_readme_is_short_and_ci_finds_its_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) < 200
    first = next(b for b in _blocks(README) if b.language == "bash")
    assert first.code.splitlines() == [
        'pip install -e ".[test]" && albert-tf quickstart',
        "python -m pytest -n 2 --dist loadfile",
    ]


def test_fine_tuning_is_one_click_from_the_home_page():
    assert "(guides/fine-tuning.md)" in (DOCS / "index.md").read_text()
    assert "guides/fine-tuning.md" in README.read_text()
