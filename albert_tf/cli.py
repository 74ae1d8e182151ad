"""`albert-tf`: one entry point, one module per subcommand under `albert_tf.commands`.

Each command module defines `HELP` (one line), `add_arguments(parser)` and `run(args)`. Modules
import TensorFlow inside `run`, so `--help` stays fast. A user mistake surfaces as an
`AlbertError`: one line on stderr and exit code 2.

One name per concept across the commands (docs/reference/cli.md, "Names"): `--init` is where
training starts (finetune, pretrain), `--checkpoint` a model a command reads (evaluate, export,
predict), `--eval` held-out data (finetune, pretrain, evaluate) and `--max-eval-examples` a cap
on it, `--max-seq-length` the length token sequences are cut or padded to, `--train-steps` a
count of training steps, `--output` what a command writes. A command declares an old name as
an alias of the new one (`add_argument("--eval", "--eval-data", ...)`); `DEPRECATED` lists
the old names: hidden from help, and one line on stderr when used.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import importlib.util
import os
import sys
import warnings

from albert_tf import __version__, startup_noise
from albert_tf.config import did_you_mean
from albert_tf.environment import missing_pkg_resources, use_onednn_choice
from albert_tf.errors import AlbertError
from albert_tf.io_utils import Terminated

COMMANDS = (
    "quickstart",
    "train-tokenizer",
    "create-pretraining-data",
    "pretrain",
    "evaluate",
    "check",
    "finetune",
    "distill",
    "predict",
    "convert",
    "export",
    "serve",
    "params",
    "benchmark",
)


# Old option names, per command, and the name that replaced them (each command's parser declares
# the old name as an alias of the new: tests/cli/test_cli.py checks that).
DEPRECATED = {
    "quickstart": {"--out": "--output"},
    "pretrain": {"--init-checkpoint": "--init", "--eval-data": "--eval"},
    "evaluate": {"--data": "--eval", "--max-examples": "--max-eval-examples"},
    "check": {"--seq-length": "--max-seq-length"},
    "finetune": {"--max-steps": "--train-steps"},
    "predict": {"--model": "--checkpoint"},
    "export": {"--seq-length": "--max-seq-length"},
}


def _module_name(command: str) -> str:
    return "albert_tf.commands." + command.replace("-", "_")


def _module(command: str):
    return importlib.import_module(_module_name(command))


def available_commands() -> list[str]:
    """Commands whose module is installed (tests/cli/test_cli.py asserts that is all of them)."""
    return [c for c in COMMANDS if importlib.util.find_spec(_module_name(c)) is not None]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, like every other error (exit 2), and
    whose unknown options name the command's nearest real one."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self._subparsers._group_actions[0].choices[parsed.command]
            self.error(f"unrecognized arguments: {' '.join(unknown)}{nearest(unknown, command)}")
        return parsed


def nearest(unknown: list[str], command: argparse.ArgumentParser) -> str:
    """ "; did you mean --NAME?" for the first unknown option of `command` that is near one of
    its visible options (`--learning_rate` finds `--learning-rate`), else ""."""
    options = [
        name
        for action in command._actions
        for name in visible_options(action, command.prog.split()[-1])
        if name.startswith("--")
    ]
    for word in unknown:
        if word.startswith("--"):
            suggestion = did_you_mean(word.partition("=")[0].replace("_", "-"), options)
            if suggestion:
                return suggestion
    return ""


def visible_options(action: argparse.Action, command: str) -> list[str]:
    """The names of `command`'s option `action` less its deprecated aliases (what help and
    the reference show)."""
    hidden = DEPRECATED.get(command, {})
    return [o for o in action.option_strings if o not in hidden]


class _HelpFormatter(argparse.HelpFormatter):
    """Help without deprecated aliases, and with every default that is not already stated."""

    def __init__(self, prog: str, *args, command: str, **kwargs) -> None:
        super().__init__(prog, *args, **kwargs)
        self.command = command

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings:
            return super()._format_action_invocation(action)
        names = visible_options(action, self.command)
        shown = argparse.Action(names, action.dest, nargs=action.nargs)
        shown.metavar, shown.choices = action.metavar, action.choices
        return super()._format_action_invocation(shown)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        stated = "default" in text or action.required or action.nargs == 0
        if stated or action.default in (None, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def deprecation_notes(argv: list[str]) -> list[str]:
    """One line per deprecated option name in `argv` (the command's arguments after its name)."""
    if not argv or argv[0] not in DEPRECATED:
        return []
    command, renamed, notes = argv[0], DEPRECATED[argv[0]], []
    for word in argv[1:]:
        if word == "--":
            break
        name = word.partition("=")[0]
        if name in renamed:
            notes.append(f"albert-tf {command}: {name} is deprecated, use {renamed[name]}")
    return notes


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="albert-tf", description="ALBERT for TensorFlow 2 and Keras, with TF-Hub export."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in available_commands():
        module = _module(command)
        sub = subparsers.add_parser(
            command,
            help=module.HELP,
            description=module.HELP,
            formatter_class=functools.partial(_HelpFormatter, command=command),
        )
        module.add_arguments(sub)
        if "--quiet" not in sub._option_string_actions:
            sub.add_argument("--quiet", action="store_true", help="no progress bars")
        sub.add_argument(
            "--verbose",
            action="store_true",
            help="show TensorFlow's C++ log (CUDA and oneDNN start-up notices included) and "
            "the libraries' own logs",
        )
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    for note in deprecation_notes(argv):
        print(note, file=sys.stderr)
    if args.quiet and "tqdm" not in sys.modules:
        os.environ["TQDM_DISABLE"] = "1"  # tqdm reads it on import: every bar of this process
    filtered = startup_noise.wanted(args.verbose)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if args.verbose else "2")
    use_onednn_choice()  # before any command imports TensorFlow
    # setuptools 81 warns at every `import tensorflow_hub` (tensorflow-hub imports pkg_resources).
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    with startup_noise.NoiseFilter() if filtered else contextlib.nullcontext():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """`args.run(args)`, with a user mistake reported as one line and exit code 2."""
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
