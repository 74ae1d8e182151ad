import subprocess
import sys

from albert_tf.cli import COMMANDS, DEPRECATED, available_commands, build_parser, main


def test_every_command_is_installed():
    assert available_commands() == list(COMMANDS)


def test_every_command_has_help():
    for command in COMMANDS:
        result = subprocess.run(
            [sys.executable, "-m", "albert_tf.cli", command, "--help"],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
        assert "usage: albert-tf " + command in result.stdout


def _subparsers():
    import argparse

    from albert_tf.cli import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


# Names of one concept; the parsers may show one of each set (the others only as deprecated
# aliases). `--init` (where training starts) and `--checkpoint` (a model read) are two concepts.
SYNONYMS = (
    {"--init", "--init-checkpoint"},
    {"--checkpoint", "--model"},
    {"--max-seq-length", "--seq-length"},
    {"--train-steps", "--max-steps"},
    {"--output", "--out"},
    {"--quiet", "--no-progress"},
    {"--eval", "--eval-data"},
    {"--max-eval-examples", "--max-examples"},
)


def test_every_option_has_help_and_one_name_per_concept():
    import argparse

    from albert_tf.cli import DEPRECATED, visible_options

    shown = set()
    for command, sub in _subparsers().items():
        for action in sub._actions:
            assert action.help, f"albert-tf {command}: {action.option_strings} has no help"
            names = visible_options(action, command)
            # one name, but -h/--help and a switch's two polarities (--x/--no-x) are one option
            assert (
                len(names) <= 1
                or names == ["-h", "--help"]
                or (
                    isinstance(action, argparse.BooleanOptionalAction)
                    and names == [names[0], "--no-" + names[0][2:]]
                )
            ), f"albert-tf {command}: {names} are one option"
            shown.update(names)
            hidden = set(action.option_strings) - set(names)
            assert hidden <= set(DEPRECATED.get(command, {})), (command, hidden)
        assert "--quiet" in sub._option_string_actions, command
    for names in SYNONYMS:
        assert len(names & shown) <= 1, f"one concept, several names: {sorted(names & shown)}"


def test_each_deprecated_name_is_an_alias_of_its_replacement():
    subparsers = _subparsers()
    for command, renamed in DEPRECATED.items():
        actions = subparsers[command]._option_string_actions
        for old, new in renamed.items():
            assert actions[old] is actions[new], (command, old, new)


def test_help_shows_defaults_and_hides_deprecated_names():
    text = _subparsers()["finetune"].format_help()
    assert "(default: 32)" in text  # --batch-size
    assert "--max-steps" not in text and "--train-steps" in text
    assert "(default: None)" not in text and "(default: False)" not in text


def test_a_deprecated_name_works_and_says_so(capsys):
    from albert_tf.cli import build_parser, deprecation_notes

    argv = ["predict", "--model", "m", "--input", "x.tsv"]
    assert build_parser().parse_args(argv).checkpoint == "m"
    assert deprecation_notes(argv) == ["albert-tf predict: --model is deprecated, use --checkpoint"]
    assert deprecation_notes(["export", "--seq-length=16"]) == [
        "albert-tf export: --seq-length is deprecated, use --max-seq-length"
    ]


FINETUNE = ["--task", "classify", "--train", "t.tsv", "--init", "albert_en_mini", "--output", "r"]


def test_a_misspelt_option_names_the_nearest_real_one():
    for argv, suggestion in (
        (["finetune", *FINETUNE, "--learning_rate", "1e-4"], "--learning-rate"),
        (["predict", "--checkpoint", "r", "--input", "t.tsv", "--ouptut", "p"], "--output"),
        (
            ["export", "--checkpoint", "r", "--output", "o", "--max_seq_length=64"],
            "--max-seq-length",
        ),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "albert_tf.cli", *argv], capture_output=True, text=True
        )
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1
        assert done.stderr.startswith("albert-tf: error: unrecognized arguments: ")
        assert done.stderr.endswith(f"; did you mean {suggestion}? (see --help)\n")
    done = subprocess.run(
        [sys.executable, "-m", "albert_tf.cli", "params", "--config", "tiny", "--zzz"],
        capture_output=True,
        text=True,
    )
    assert done.stderr == "albert-tf: error: unrecognized arguments: --zzz (see --help)\n"


def test_held_out_data_is_eval_on_every_command():
    for command in ("pretrain", "evaluate", "finetune"):
        result = subprocess.run(
            [sys.executable, "-m", "albert_tf.cli", command, "--help"],
            capture_output=True,
            text=True,
        )
        assert "--eval " in result.stdout, command
        assert "--eval-data" not in result.stdout and "--max-examples" not in result.stdout
    parser = build_parser()
    pretrain = ["pretrain", "--data", "t", "--output", "o", "--train-steps", "1"]
    args = parser.parse_args([*pretrain, "--batch-size", "2", "--eval-data", "h"])
    assert (args.eval, args.init, args.seed, args.keep) == ("h", None, 12345, 3)
    args = parser.parse_args(
        ["evaluate", "--checkpoint", "c", "--data", "h", "--max-examples", "7"]
    )
    assert (args.eval, args.max_eval_examples) == ("h", 7)


def test_an_old_name_prints_one_deprecation_line(tmp_path, capsys):
    # evaluate refuses the missing checkpoint after parsing: exit 2, and one line says each
    # old name's replacement.
    argv = ["evaluate", "--checkpoint", str(tmp_path / "none"), "--data", str(tmp_path / "h")]
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "albert-tf evaluate: --data is deprecated, use --eval"
    assert sum("deprecated" in line for line in lines) == 1
    assert lines[-1].startswith("albert-tf evaluate: error: ")


def test_version():
    from albert_tf import __version__

    result = subprocess.run(
        [sys.executable, "-m", "albert_tf.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout.strip() == f"albert-tf {__version__}"


def test_export_finetuned_refuses_to_replace_its_folders(tmp_path, capsys):
    from albert_tf.cli import main

    (tmp_path / "hf").mkdir()
    assert main(["export", "--finetuned", str(tmp_path), "--hf"]) == 2
    err = capsys.readouterr().err
    assert f"output {tmp_path / 'hf'} already exists (pass --overwrite" in err
