"""`albert-tf`: one entry point, one module per subcommand under `albert_tf.commands`.

Each command module defines `HELP` (one line), `add_arguments(parser)` and `run(args)`. Modules
import TensorFlow inside `run`, so `--help` stays fast. A user mistake surfaces as an
`AlbertError`: one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import sys
import warnings

COMMANDS = (
    "quickstart",
    "train-tokenizer",
    "create-pretraining-data",
    "pretrain",
    "evaluate",
    "check",
    "finetune",
    "predict",
    "convert",
    "export",
    "params",
    "benchmark",
)


def _module_name(command: str) -> str:
    return "albert_tf.commands." + command.replace("-", "_")


def _module(command: str):
    return importlib.import_module(_module_name(command))


def available_commands() -> list[str]:
    """Commands whose module is installed (tests/test_cli.py asserts that is all of them)."""
    return [c for c in COMMANDS if importlib.util.find_spec(_module_name(c)) is not None]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, like every other error (exit 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="albert-tf", description="ALBERT for TensorFlow 2 and Keras, with TF-Hub export."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in available_commands():
        module = _module(command)
        sub = subparsers.add_parser(command, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.add_argument(
            "--verbose",
            action="store_true",
            help="show TensorFlow's C++ log (CUDA and oneDNN start-up notices included) and "
            "the libraries' own logs",
        )
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from albert_tf import startup_noise
    from albert_tf.environment import use_onednn_choice

    args = build_parser().parse_args(argv)
    filtered = startup_noise.wanted(args.verbose)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if args.verbose else "2")
    use_onednn_choice()  # before any command imports TensorFlow
    # setuptools 81 warns at every `import tensorflow_hub` (tensorflow-hub imports pkg_resources).
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    with startup_noise.NoiseFilter() if filtered else contextlib.nullcontext():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """`args.run(args)`, with a user mistake reported as one line and exit code 2."""
    from albert_tf.environment import missing_pkg_resources
    from albert_tf.errors import AlbertError
    from albert_tf.io_utils import Terminated

    try:
        try:
            return args.run(args) or 0
        except ModuleNotFoundError as e:
            if e.name != "pkg_resources":
                raise
            raise missing_pkg_resources() from None
    except AlbertError as e:
        print(f"albert-tf {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        # 128 + the signal's number, as a shell reports a process the signal killed.
        terminated = isinstance(e, Terminated)  # SIGTERM, under io_utils.sigterm_interrupts
        print(
            f"albert-tf {args.command}: {'terminated' if terminated else 'interrupted'}",
            file=sys.stderr,
        )
        return 143 if terminated else 130


if __name__ == "__main__":
    sys.exit(main())
