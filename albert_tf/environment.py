"""The installation and CPU environment albert-tf runs in: defined in `preprocess.base.environment` (the ground floor of the three packages),
importable from here as before."""

from preprocess.base.environment import (
    ONEDNN_VARIABLE,
    check_tensorflow_hub,
    cpu_flags,
    cpuinfo_field,
    given_environment,
    import_beam_module,
    missing_pkg_resources,
    onednn_choice,
    use_onednn_choice,
)

__all__ = [
    "missing_pkg_resources",
    "check_tensorflow_hub",
    "import_beam_module",
    "ONEDNN_VARIABLE",
    "cpuinfo_field",
    "cpu_flags",
    "onednn_choice",
    "use_onednn_choice",
    "given_environment",
]
