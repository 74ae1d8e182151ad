"""An import inside a function has a reason (docs/development.md, "Imports inside functions"):
a module that imports TensorFlow at its top imports TensorFlow, tf_keras, tensorflow_text, the
standard library and our own modules at its top too.

Read from the source, without importing it (about a second): a module's top-level imports (not
those under `if TYPE_CHECKING:`), followed through our modules and their parent packages, tell
whether importing it loads TensorFlow and which packages it needs. Inside a function of a module
that loads TensorFlow, importing one of our modules is an error unless that module needs a
package the importing one does not and that is not a core requirement (an extra: the ONNX writer
inside `albert_tf.export.int8_encoder`, which runs without it).
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

# Importing any of these loads TensorFlow.
TENSORFLOW = {"tensorflow", "tf_keras", "tensorflow_text", "tensorflow_hub", "official"}
# What a module that loads TensorFlow gains nothing from importing inside a function.
# (tensorflow_hub imports pkg_resources, which setuptools 82 removed: it stays with its users.)
LOADED_WITH_TENSORFLOW = {"tensorflow", "tf_keras", "tensorflow_text"}
OURS = "albert_tf"


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
        self.inside: dict[str, list[tuple[int, str]]] = {}  # module -> (line, imported name)
        for module, path in self.paths.items():
            self.top[module], self.inside[module] = [], []
            for node, inside in _walk(ast.parse(path.read_text(encoding="utf-8")).body, False):
                for name in self._names(module, node):
                    if inside:
                        self.inside[module].append((node.lineno, name))
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

    def needs(self, module: str) -> set[str]:
        """The top-level packages outside ours that importing `module` imports."""
        seen, todo, found = set(), [module], set()
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
        return found


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


def violations(root: Path) -> list[str]:
    """`path:line: name` for each import inside a function that the module docstring's rule
    forbids, in the modules under `root`."""
    tree, found = Tree(root), []
    for module, imports in tree.inside.items():
        needs = tree.needs(module)
        if not needs & TENSORFLOW:
            continue
        for line, name in imports:
            package = name.partition(".")[0]
            if package == OURS:
                extra = tree.needs(tree.module_of(name)) - needs - tree.core
                wrong = not extra - set(sys.stdlib_module_names)
            else:
                wrong = package in LOADED_WITH_TENSORFLOW or package in sys.stdlib_module_names
            if wrong:
                found.append(f"{tree.paths[module].relative_to(root)}:{line}: {name}")
    return found


def test_a_module_that_loads_tensorflow_imports_ours_at_its_top():
    assert violations(REPO) == []


def test_an_import_without_a_reason_is_named(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = ["tensorflow~=2.20.0", "numpy"]\n'
        '[tool.setuptools.package-dir]\n"albert_tf" = "src"\n'
    )
    files = {
        "__init__.py": "",
        "light.py": "import json\n",
        "writer.py": "import onnx\n",  # an extra
        "model.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tensorflow\n",
        "layers/__init__.py": "import tf_keras\n",
        "layers/dense.py": "",
        "data.py": (
            "def batches():\n"
            "    import tensorflow as tf\n"  # fine: this module loads no TensorFlow
            "    from albert_tf import light\n"
        ),
        "trainer.py": (
            "from . import model\nfrom .layers import dense\n\n"
            "def train():\n"
            "    import json\n"
            "    import tensorflow as tf\n"
            "    from tensorflow.python.util import nest\n"
            "    import tensorflow_hub\n"  # fine: it needs pkg_resources
            "    from albert_tf import light, writer\n"  # light is wrong, writer needs onnx
            "    from .model import Model\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_text(text)
    assert violations(tmp_path) == [
        "src/trainer.py:5: json",
        "src/trainer.py:6: tensorflow",
        "src/trainer.py:7: tensorflow.python.util",
        "src/trainer.py:9: albert_tf.light",
        "src/trainer.py:10: albert_tf.model",
    ]
