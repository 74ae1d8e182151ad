"""The environment Triton runs in: a virtual environment of its own, beside albert-tf's.

PyPI's nvidia-pytriton bundles a real `tritonserver` (2.51) for x86-64 Linux that runs on the
CPU, with the Python backend and a backend stub per Python version, and no other backend. It
pins numpy below 2, which albert-tf's own environment has moved past, so it gets a virtual
environment of its own: `albert-tf serve --create-env` (`create_env`) makes it with this Python
and installs nvidia-pytriton, and the onnxruntime and onnxruntime-extensions versions that
albert-tf's environment has, so the served model computes what `predict` measured.

The Python backend's stub embeds a shared `libpython3.X` of this Python's version and runs the
standard library of the `python3` first on its PATH, which `server_environ` makes the env's. The
two must be one build: a stub that took Debian's 3.11.2 library under pyenv's 3.11.7 standard
library fails to import `ssl` (an undefined symbol), so the library directory of this Python,
when it is built shared, goes first on LD_LIBRARY_PATH; a Python built without a shared library
leaves the stub the system's (Debian: `apt-get install libpython3.11`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from albert_tf.errors import InstallError

PYTRITON = "nvidia-pytriton==0.7.0"
ENV_VARIABLE = "ALBERT_TF_SERVE_ENV"
MARKER = "albert-tf-serve.json"  # written last: the environment is complete
BACKENDS = "albert-tf-backends"  # the backend directory given to tritonserver
PINNED = ("onnxruntime", "onnxruntime-extensions")


@dataclass(frozen=True)
class ServeEnv:
    """A complete serving environment.

    Attributes:
        root: the virtual environment.
        tritonserver: the server binary.
        backends: the backend directory (`python/` with this Python's stub).
        libdir: the directory of the shared libpython the stub must load ("": the system's).
    """

    root: Path
    tritonserver: Path
    backends: Path
    libdir: str = ""


def default_env_dir() -> Path:
    """`$ALBERT_TF_SERVE_ENV`, else `~/.cache/albert-tf/serve-env`."""
    given = os.environ.get(ENV_VARIABLE)
    return Path(given) if given else Path.home() / ".cache" / "albert-tf" / "serve-env"


def requirements() -> list[str]:
    """What `create_env` installs: nvidia-pytriton, and ONNX Runtime and its extensions at the
    versions this environment has (unpinned where it has none)."""
    wanted = [PYTRITON]
    for name in PINNED:
        try:
            wanted.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            wanted.append(name)
    return wanted


def _site_packages(root: Path) -> Path:
    return (
        root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    )


def _link_backends(root: Path) -> Path:
    """`root/albert-tf-backends/python/`: the wheel's Python backend with this Python's stub."""
    dist = _site_packages(root) / "pytriton" / "tritonserver"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = dist / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise InstallError(f"{PYTRITON} has no Python backend stub for Python {version}")
    python = root / BACKENDS / "python"
    python.mkdir(parents=True, exist_ok=True)
    for source in (
        dist / "backends" / "python" / "libtriton_python.so",
        dist / "backends" / "python" / "triton_python_backend_utils.py",
        stub,
    ):
        link = python / source.name
        link.unlink(missing_ok=True)
        link.symlink_to(source)
    return root / BACKENDS


def shared_libdir() -> str:
    """The directory of this Python's shared libpython, "" for a Python built without one."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return ""
    return str(sysconfig.get_config_var("LIBDIR") or "")


def _check_stub(stub: Path, libdir: str) -> None:
    """InstallError naming the shared library the stub cannot find (libpython3.X)."""
    # ldd reads $ORIGIN from the path it is given: the stub's own, not the link's.
    environ = {**os.environ, "LD_LIBRARY_PATH": libdir} if libdir else None
    result = subprocess.run(
        ["ldd", str(stub.resolve())], capture_output=True, text=True, check=False, env=environ
    )
    missing = [line.split()[0] for line in result.stdout.splitlines() if "not found" in line]
    if missing:
        raise InstallError(
            f"Triton's Python backend needs {', '.join(missing)}, which this machine lacks "
            f"(Debian/Ubuntu: apt-get install libpython{sys.version_info.major}."
            f"{sys.version_info.minor})"
        )


def load_env(root: Path | None = None) -> ServeEnv:
    """The complete serving environment at `root` (default `default_env_dir()`); InstallError
    saying how to create it when there is none."""
    root = Path(root) if root is not None else default_env_dir()
    if not (root / MARKER).is_file():
        raise InstallError(
            f"no serving environment at {root}: create it with `albert-tf serve --create-env"
            + (f" --env {root}`" if root != default_env_dir() else "`")
        )
    record = json.loads((root / MARKER).read_text(encoding="utf-8"))
    return ServeEnv(
        root, Path(record["tritonserver"]), Path(record["backends"]), record.get("libdir", "")
    )


def create_env(root: Path | None = None, log=print) -> ServeEnv:
    """Creates (or completes) the serving environment at `root` (default `default_env_dir()`)
    and returns it; one already complete with the same requirements is kept as it is.
    InstallError when pip fails or the stub cannot run here."""
    root = Path(root) if root is not None else default_env_dir()
    wanted = requirements()
    if (root / MARKER).is_file():
        record = json.loads((root / MARKER).read_text(encoding="utf-8"))
        if record.get("requirements") == wanted and record.get("libdir") == shared_libdir():
            log(f"serving environment at {root} is complete")
            return load_env(root)
    log(f"creating the serving environment at {root}: {' '.join(wanted)}")
    (root / MARKER).unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", *wanted]
    if subprocess.run(pip, check=False).returncode != 0:
        raise InstallError(f"pip could not install {' '.join(wanted)} into {root}")
    backends = _link_backends(root)
    libdir = shared_libdir()
    _check_stub(backends / "python" / "triton_python_backend_stub", libdir)
    tritonserver = _site_packages(root) / "pytriton" / "tritonserver" / "bin" / "tritonserver"
    record = dict(
        requirements=wanted, tritonserver=str(tritonserver), backends=str(backends), libdir=libdir
    )
    (root / MARKER).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    log(f"serving environment ready at {root}")
    return load_env(root)


def server_environ(env: ServeEnv) -> dict[str, str]:
    """The environment variables tritonserver runs with: the env's `bin` first on PATH (the
    stub's Python finds its packages there), the env's libpython first on LD_LIBRARY_PATH, and
    no thread count inherited from the caller."""
    environ = dict(os.environ)
    environ["PATH"] = f"{env.root / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
    if env.libdir:
        given = environ.get("LD_LIBRARY_PATH")
        environ["LD_LIBRARY_PATH"] = env.libdir + (os.pathsep + given if given else "")
    environ.pop("PYTHONPATH", None)
    environ.pop("OMP_NUM_THREADS", None)
    return environ
