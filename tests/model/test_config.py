import json

import pytest

from albert_tf.config import PRESETS, AlbertConfig, resolve_config
from albert_tf.errors import ConfigError


def test_released_config_files_round_trip(fixtures_dir, tmp_path):
    for name in ("albert_tf1_tiny", "albert_tf1_groups"):
        path = fixtures_dir / name / "albert_config.json"
        config = AlbertConfig.from_json_file(path)
        original = json.loads(path.read_text())
        for key, value in original.items():
            assert getattr(config, key) == value
        out = tmp_path / f"{name}.json"
        config.to_json_file(out)
        assert AlbertConfig.from_json_file(out) == config


def test_released_unused_keys_are_ignored():
    values = PRESETS["base"].to_dict() | {
        "net_structure_type": 0,
        "gap_size": 0,
        "num_memory_blocks": 0,
        "layers_to_keep": [],
    }
    assert AlbertConfig.from_dict(values) == PRESETS["base"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hidden_size": 30, "num_attention_heads": 4}, "not divisible"),
        ({"num_hidden_groups": 13}, "exceeds num_hidden_layers"),
        ({"vocab_size": 0}, "vocab_size must be a positive integer"),
        ({"intermediate_size": -1}, "intermediate_size must be a positive integer"),
        ({"hidden_act": "gelu_fast"}, "hidden_act"),
        ({"shared_params": "some"}, "shared_params"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
    ],
)
def test_invalid_configs_raise(changes, message):
    with pytest.raises(ConfigError, match=message):
        PRESETS["base"].replace(**changes)


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match="unknown config key.*hiden_size"):
        AlbertConfig.from_dict({"hiden_size": 768})


def test_group_of_layer_follows_the_original():
    config = PRESETS["base"].replace(num_hidden_layers=6, num_hidden_groups=4)
    assert [config.group_of_layer(i) for i in range(6)] == [0, 0, 1, 2, 2, 3]


def test_presets_and_v1_dropout():
    assert PRESETS["base"].hidden_dropout_prob == 0.0
    assert PRESETS["base_v1"].hidden_dropout_prob == 0.1
    assert PRESETS["large_v1"].attention_probs_dropout_prob == 0.1
    assert resolve_config("xxlarge").hidden_size == 4096
    with pytest.raises(ConfigError, match="neither a preset"):
        resolve_config("huge")
