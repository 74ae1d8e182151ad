import json
import subprocess
import sys

import pytest

from albert_tf.cli import main
from albert_tf.config import PRESETS
from albert_tf.params import parameter_breakdown

EXPECTED = {"base": 11_683_584, "large": 17_683_968, "xlarge": 58_724_864, "xxlarge": 222_595_584}


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_params_cli_prints_exact_preset_totals(preset, capsys):
    assert main(["params", "--config", preset]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"] == EXPECTED[preset]


def test_embedding_factorization_arithmetic():
    report = parameter_breakdown(PRESETS["base"])
    assert report["embedding_factorization"] == {
        "unfactorized_V_x_H": 23_040_000,
        "factorized_V_x_E_plus_E_x_H": 3_938_304,
    }
    assert report["unfactorized_unshared"]["total"] > 8 * report["total"]


def test_all_shared_total_does_not_depend_on_depth():
    totals = {
        parameter_breakdown(PRESETS["base"].replace(num_hidden_layers=n))["total"]
        for n in (1, 12, 48)
    }
    assert totals == {EXPECTED["base"]}


def test_params_cli_bad_config_exits_2(tmp_path):
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"hidden_size": 30, "num_attention_heads": 4}))
    result = subprocess.run(
        [sys.executable, "-m", "albert_tf.cli", "params", "--config", str(bad)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "not divisible" in result.stderr
