"""Each import inside a function is of a kind that docs/development.md ("Imports inside
functions") names: a start-up cost, an optional package, or a library that reads the environment.

Read from the source, without importing it (about a second): a module's top-level imports (not
those under `if TYPE_CHECKING:`), followed through our modules and their parent packages, tell
which packages importing it loads. An import inside a function of module M brings what M's top
does not load (one of our modules brings the packages it needs). It passes when that is

- TensorFlow (or tf_keras, tensorflow_text, tensorflow_hub, tf-models-official) and M must load
  none: M is imported at the top of something that must load none (`LIGHT`), or is such a thing;
- a package that no core requirement installs (an extra: onnx, torch, aiohttp ...);

or when a comment names its kind, `# start-up: `, `# optional: ` or `# environment: ` and why:
at the end of its first line, or on the line above it or above the run of import lines it is
in. Anything else is imported at the top.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import tomllib

from tests.conftest import REPO
from tests.install.test_public_api import LIGHT as PUBLIC_LIGHT

# Importing any of these loads TensorFlow.
TENSORFLOW = {"tensorflow", "tf_keras", "tensorflow_text", "tensorflow_hub", "official"}
OURS = "albert_tf"
# What must import no TensorFlow (docs/development.md): the packages of the public API, the
# command line and each command's module (its parser and argument checks), the tokenizer of a
# data-generation worker, the benchmark worker and its torch systems (a worker loads only the
# framework it times).
LIGHT = (
    *PUBLIC_LIGHT,
    "albert_tf.cli",
    "albert_tf.commands.*",
    "albert_tf.preprocess.tokenizer",
    "albert_tf.benchmarking.worker",
    "albert_tf.benchmarking.torch_systems",
)
KINDS = ("start-up", "optional", "environment")
REASON = re.compile(r"#\s*(" + "|".join(KINDS) + r"):\s*\S")


def _walk(
    nodes: Iterable[ast.AST], inside: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """(import statement, whether it is inside a function) for each under `nodes`, less those
    under `if TYPE_CHECKING:`, which never run."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, inside
        elif isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            yield from _walk(node.orelse, inside)
        else:
            function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from _walk(ast.iter_child_nodes(node), inside or function)


class Tree:
    """The modules of the folders that install (pyproject.toml's package-dir) under `root`."""

    def __init__(self, root: Path) -> None:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        self.paths: dict[str, Path] = {}
        for name, folder in project["tool"]["setuptools"]["package-dir"].items():
            for path in sorted((root / folder).rglob("*.py")):
                parts = [*name.split("."), *path.relative_to(root / folder).with_suffix("").parts]
                self.paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        self.top: dict[str, list[str]] = {}
        # module -> (line, imported name, whether a comment names the import's kind)
        self.inside: dict[str, list[tuple[int, str, bool]]] = {}
        for module, path in self.paths.items():
            self.top[module], self.inside[module] = [], []
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            for node, inside in _walk(ast.parse(source).body, False):
                for name in self._names(module, node):
                    if inside:
                        named = _named(lines, node.lineno)
                        self.inside[module].append((node.lineno, name, named))
                    else:
                        self.top[module].append(name)
        self.core = _core_packages(project["project"]["dependencies"])

    def _names(self, module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
        """The modules `node` imports, as absolute names (`from package import module` names
        the module)."""
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            package = module.split(".")
            if self.paths[module].name != "__init__.py":
                package.pop()
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        names = (f"{base}.{alias.name}" for alias in node.names)
        return [name if name in self.paths else base for name in names]

    def module_of(self, name: str) -> str:
        """Our module that defines `name` (a module, or a name inside one)."""
        while name not in self.paths and "." in name:
            name = name.rpartition(".")[0]
        return name

    def _closure(self, modules: Iterable[str]) -> tuple[set[str], set[str]]:
        """(our modules, the top-level packages outside ours) that importing `modules` imports."""
        seen, todo, found = set(), list(modules), set()
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            parts = current.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # and its packages
            for name in self.top[current]:
                if name.partition(".")[0] == OURS:
                    todo.append(self.module_of(name))
                else:
                    found.add(name.partition(".")[0])
        return seen, found

    def needs(self, module: str) -> set[str]:
        """The top-level packages outside ours that importing `module` imports."""
        return self._closure([module])[1]

    def light(self, roots: Iterable[str]) -> set[str]:
        """Our modules that importing `roots` imports (`package.*`: each module under it)."""
        modules = []
        for root in roots:
            if root.endswith(".*"):
                modules += [m for m in self.paths if m.startswith(root[:-1])]
            else:
                modules.append(root)
        return self._closure(modules)[0]


def _named(lines: list[str], line: int) -> bool:
    """Whether a comment names the kind of the import on `line` (1-based): at its end, or on
    the line above it or above the import lines just before it."""
    if REASON.search(lines[line - 1]):
        return True
    above = line - 2
    while above >= 0 and lines[above].lstrip().startswith(("import ", "from ")):
        above -= 1
    return above >= 0 and bool(REASON.match(lines[above].strip()))


def _core_packages(requirements: list[str]) -> set[str]:
    """The import names of the installed distributions that `requirements` name."""

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    wanted = {canonical(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in requirements}
    return {
        package
        for package, distributions in importlib.metadata.packages_distributions().items()
        if any(canonical(d) in wanted for d in distributions)
    }


def violations(root: Path, light: Iterable[str]) -> list[str]:
    """`path:line: name` for each import inside a function, in the modules under `root`, that
    is of no kind the module docstring names; `light` as `LIGHT`."""
    tree, found = Tree(root), []
    light = tree.light(light)
    for module, imports in tree.inside.items():
        needs = tree.needs(module)
        for line, name, named in imports:
            package = name.partition(".")[0]
            if package == OURS:
                brings = tree.needs(tree.module_of(name)) - needs
            else:
                brings = {package} - needs
            brings -= set(sys.stdlib_module_names)
            start_up = module in light and brings & TENSORFLOW
            optional = brings - tree.core
            if not (named or start_up or optional):
                found.append(f"{tree.paths[module].relative_to(root)}:{line}: {name}")
    return found


def test_every_import_inside_a_function_has_a_named_kind():
    assert violations(REPO, LIGHT) == []


def test_an_import_without_a_kind_is_named(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = ["tensorflow~=2.20.0", "numpy", "tqdm"]\n'
        '[tool.setuptools.package-dir]\n"albert_tf" = "src"\n'
    )
    files = {
        "__init__.py": "",
        "light.py": "import json\n",
        "writer.py": "import onnx\n",  # an extra
        "model.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tensorflow\n",
        "layers/__init__.py": "import tf_keras\n",
        "layers/dense.py": "",
        "cli.py": "from albert_tf import data\n",
        "data.py": (
            "def batches():\n"
            "    import tensorflow as tf\n"  # fine: the command line imports this module
            "    import numpy\n"
            "    import tqdm  # environment: it reads TQDM_DISABLE\n"
            "    # start-up: numpy is not heavy, but the comment names a kind\n"
            "    import numpy.linalg\n"
            "    import numpy.fft\n"  # the comment above names the run's kind
            "\n"
            "    from albert_tf import light\n"
        ),
        "trainer.py": (
            "from . import model\nfrom .layers import dense\n\n"
            "def train():\n"
            "    import json\n"
            "    import tensorflow as tf\n"  # nothing light imports trainer
            "    from tensorflow.python.util import nest\n"
            "    import tensorflow_hub  # optional: it imports pkg_resources\n"
            "    from albert_tf import light, writer\n"  # light is wrong, writer needs onnx
            "    from .model import Model\n"
            "    import onnx  # an extra: no comment needed\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_text(text)
    assert violations(tmp_path, ["albert_tf.cli"]) == [
        "src/data.py:3: numpy",
        "src/data.py:9: albert_tf.light",
        "src/trainer.py:5: json",
        "src/trainer.py:6: tensorflow",
        "src/trainer.py:7: tensorflow.python.util",
        "src/trainer.py:9: albert_tf.light",
        "src/trainer.py:10: albert_tf.model",
    ]
