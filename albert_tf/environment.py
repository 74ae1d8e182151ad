"""The environment albert-tf runs in: installed packages it cannot fix itself but can name in one
line, and the oneDNN kernels it turns on for its own processes."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Mapping, MutableMapping

from albert_tf.errors import InstallError


def missing_pkg_resources() -> InstallError:
    """The error for a setuptools without `pkg_resources`, which tensorflow-hub 0.16.1 imports
    (setuptools 82 removed it, tensorflow/hub#934)."""
    try:
        setuptools = f"setuptools {importlib.metadata.version('setuptools')} has"
    except importlib.metadata.PackageNotFoundError:
        setuptools = "setuptools is not installed, so there is"
    return InstallError(
        f"tensorflow_hub cannot be imported: {setuptools} no pkg_resources (removed in "
        'setuptools 82); run pip install "setuptools<82", and add the Hugging Face extras '
        'with pip install -e ".[hf]", which keeps that pin'
    )


def check_tensorflow_hub() -> None:
    """Raises `InstallError` (see `missing_pkg_resources`) if `import tensorflow_hub` would
    fail for want of `pkg_resources`; looks the module up without importing it."""
    if importlib.util.find_spec("pkg_resources") is None:
        raise missing_pkg_resources()


def import_beam_module(module: str) -> object:
    """Imports one of albert-tf's Apache Beam pipelines (`albert_tf.preprocess.spm_beam`, ...), or raises
    `InstallError` naming the extra when Apache Beam is not installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("apache_beam"):
            raise
        raise InstallError('the Beam runner needs Apache Beam: pip install -e ".[beam]"') from None


# --- oneDNN ---------------------------------------------------------------------------------
# TensorFlow runs its oneDNN kernels on x86 by default only on CPUs with AVX512_VNNI, AVX512_BF16 or
# AMX; elsewhere (AVX2 machines: most laptops, AMD desktops, many cloud instances) it leaves them
# off unless TF_ENABLE_ONEDNN_OPTS=1. With them on, albert-tf measured faster in every case on both
# CPU kinds (benchmarks/README.md, "oneDNN"), and the fixtures agree within 1e-5 either way
# (tests/model/test_onednn.py). So albert-tf's own processes turn them on where the CPU has AVX2.

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


def cpuinfo_field(key: str, cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> str | None:
    """The value of the first `key` line of /proc/cpuinfo (None where there is none)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == key:
                    return value.strip()
    except OSError:
        pass
    return None


def cpu_flags(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's flags from /proc/cpuinfo (empty off Linux)."""
    return frozenset((cpuinfo_field("flags", cpuinfo) or "").split())


def onednn_choice(environ: Mapping[str, str], flags: frozenset[str]) -> str | None:
    """The TF_ENABLE_ONEDNN_OPTS albert-tf runs with: the user's value if set (the way to force
    either path), "1" on an x86 CPU with AVX2, otherwise None (TensorFlow decides)."""
    if environ.get(ONEDNN_VARIABLE, "") != "":
        return environ[ONEDNN_VARIABLE]
    return "1" if "avx2" in flags else None


# TF_ENABLE_ONEDNN_OPTS as the user gave it, before `use_onednn_choice` set it in os.environ
# (`_UNSET` until then): child processes that run peers must see the user's environment.
_UNSET = object()
_given: object = _UNSET


def use_onednn_choice(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Sets TF_ENABLE_ONEDNN_OPTS per `onednn_choice` in `environ` (default: this process's, where
    it only has an effect before TensorFlow is imported); returns the value, or None."""
    global _given
    if environ is None:
        environ = os.environ
        if _given is _UNSET:
            _given = environ.get(ONEDNN_VARIABLE)
    value = onednn_choice(environ, cpu_flags())
    if value is not None:
        environ[ONEDNN_VARIABLE] = value
    return value


def given_environment() -> dict[str, str]:
    """A copy of os.environ with TF_ENABLE_ONEDNN_OPTS as the user gave it."""
    env = dict(os.environ)
    if _given is not _UNSET:
        env.pop(ONEDNN_VARIABLE, None)
        if _given is not None:
            env[ONEDNN_VARIABLE] = _given
    return env
