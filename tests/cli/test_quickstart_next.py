"""What the quickstart suggests next: every command runs after the README's install (its
program is installed, its options parse, the files it names exist)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

from albert_tf.cli import build_parser
from albert_tf.quickstart.report import next_steps, print_next_steps
from tests.conftest import REPO

FILES = ("--train", "--eval", "--checkpoint", "--init")  # options that name a file or folder


def _quickstart_output(root: Path) -> SimpleNamespace:
    out = root / "albert_quickstart"
    for folder in ("pretrain", "hub/encoder", "hub/preprocess", "data"):
        (out / folder).mkdir(parents=True)
    return SimpleNamespace(
        out_dir=str(out),
        checkpoint_dir=str(out / "pretrain"),
        encoder_dir=str(out / "hub/encoder"),
        preprocess_dir=str(out / "hub/preprocess"),
        curves=str(out / "curves.png"),
        seconds=90.0,
        pretrain_steps=720,
    )


def _check(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    """The program of one suggested command, after checking that it would run."""
    program = argv[0]
    if program == "albert-tf":
        args = build_parser().parse_args(argv[1:])  # SystemExit (exit 2) if it does not parse
        assert callable(args.run)
        for flag, value in zip(argv[1:], argv[2:], strict=False):
            if flag in FILES and value != "albert_en_mini":
                assert (cwd / value).exists(), (argv, value)
    elif program == "jupyter":
        assert argv[1] == "execute" and importlib.util.find_spec("nbclient"), argv
        assert (cwd / argv[2]).is_file() and Path(env["ALBERT_TF_MODULES"]).is_dir(), argv
    assert shutil.which(program), f"{program} is not installed"
    return program


def test_every_next_command_runs_after_the_readme_install(tmp_path):
    result = _quickstart_output(tmp_path)
    lines = next_steps(result, cwd=REPO)
    programs = []
    for line in lines:
        argv, env = shlex.split(line.partition("   # ")[0]), {}
        while re.match(r"[A-Z_]+=", argv[0]):  # VARIABLE=value before the program
            key, _, value = argv.pop(0).partition("=")
            env[key] = value
        programs.append(_check(argv, env, REPO))
    assert programs == ["tensorboard", *["albert-tf"] * 5, "jupyter"]
    assert any("--init albert_en_mini" in line for line in lines)


def test_without_the_repository_only_the_commands_that_need_none(tmp_path, monkeypatch):
    import albert_tf.quickstart.report as report

    monkeypatch.setattr(report, "_repository", lambda cwd: None)
    lines = next_steps(_quickstart_output(tmp_path))
    assert len(lines) == 4 and not any("examples/" in line or "colab" in line for line in lines)


def test_the_printed_next_steps_are_those(tmp_path):
    printed = []
    result = _quickstart_output(tmp_path)
    print_next_steps(result, printed.append)
    text = "\n".join(printed)
    assert "jupyter notebook" not in text
    tail = text.split("Next:\n", 1)[1].splitlines()
    assert tail == [f"  {line}" for line in next_steps(result)]
