import subprocess
import sys

from albert_tf.cli import COMMANDS, available_commands


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
