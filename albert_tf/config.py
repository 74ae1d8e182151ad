"""`AlbertConfig`: the model's hyperparameters, with the original `albert_config.json` names."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_tf.errors import ConfigError

# The files of a checkpoint directory (albert_tf.checkpoint) besides the checkpoint itself; the
# exported encoder's assets carry the same names.
CONFIG_FILE = "albert_config.json"
SP_MODEL_FILE = "spm.model"
SP_VOCAB_FILE = "spm.vocab"

# Activation names accepted in `hidden_act`. In an ALBERT config "gelu" is the tanh approximation
# (the original code's `gelu`); Hugging Face calls that one "gelu_new" and the erf form "gelu".
ACTIVATIONS = ("gelu", "gelu_new", "gelu_exact", "gelu_python", "relu", "swish")

# How blocks share weights across the layers of a group (the paper's Table 4 ablations).
SHARED_PARAMS = ("all", "attention", "ffn", "none")

# Models shipped in the package (albert_tf/pretrained/NAME/): a name works wherever a config or
# a checkpoint is read (albert_tf.pretrained).
SHIPPED_DIR = Path(__file__).resolve().parent / "pretrained"
SHIPPED_MODELS = ("albert_en_mini",)


def did_you_mean(name: str | os.PathLike, names: Iterable[str] = SHIPPED_MODELS) -> str:
    """ "; did you mean NAME?" for the one of `names` nearest to a mistyped `name` (difflib's
    ratio at least 0.8), else "": the tail of an error line."""
    close = difflib.get_close_matches(str(name), list(names), n=1, cutoff=0.8)
    return f"; did you mean {close[0]}?" if close else ""


# Keys of released config files that the original code never reads.
IGNORED_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep")


@dataclass(frozen=True)
class AlbertConfig:
    """Hyperparameters of an ALBERT encoder; validated on creation."""

    vocab_size: int = 30000  # V: rows of the word-embedding table
    embedding_size: int = 128  # E: width of the factorized embeddings
    hidden_size: int = 768  # H: width of every transformer block
    num_hidden_layers: int = 12  # layers applied (each applies its group's inner blocks)
    num_hidden_groups: int = 1  # groups of parameters; layer i uses group int(i / L * G)
    num_attention_heads: int = 12  # heads per attention; must divide hidden_size
    intermediate_size: int = 3072  # FFN width
    inner_group_num: int = 1  # blocks per group, applied in order by each of its layers
    down_scale_factor: int = 1  # present in released configs; the original only supports 1
    hidden_act: str = "gelu"  # one of ACTIVATIONS; "gelu" is the tanh approximation
    hidden_dropout_prob: float = 0.0  # dropout on embeddings and block outputs
    attention_probs_dropout_prob: float = 0.0  # dropout on attention probabilities
    max_position_embeddings: int = 512  # rows of the position-embedding table
    type_vocab_size: int = 2  # rows of the token-type (segment) table
    initializer_range: float = 0.02  # stddev of the truncated-normal initializer
    shared_params: str = "all"  # our extension: "all" | "attention" | "ffn" | "none"

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_hidden_groups",
            "num_attention_heads",
            "intermediate_size",
            "inner_group_num",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.down_scale_factor != 1:
            raise ConfigError(f"down_scale_factor must be 1, got {self.down_scale_factor!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} is not divisible by "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(
                f"num_hidden_groups {self.num_hidden_groups} exceeds "
                f"num_hidden_layers {self.num_hidden_layers}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act {self.hidden_act!r} is not one of {ACTIVATIONS}")
        if self.shared_params not in SHARED_PARAMS:
            raise ConfigError(f"shared_params {self.shared_params!r} is not one of {SHARED_PARAMS}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            raise ConfigError(f"initializer_range must be positive, got {self.initializer_range!r}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def group_of_layer(self, layer: int) -> int:
        """The group whose parameters layer `layer` uses (the original's integer division)."""
        return int(layer / self.num_hidden_layers * self.num_hidden_groups)

    def replace(self, **changes: Any) -> AlbertConfig:
        """A copy with `changes` applied (validated)."""
        return dataclasses.replace(self, **changes)

    # === Serialization ===

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AlbertConfig:
        """Builds a config from an `albert_config.json`-style dict; unknown keys are an error."""
        if not isinstance(values, dict):
            raise ConfigError(f"a config must be a JSON object, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known - set(IGNORED_KEYS))
        if unknown:
            raise ConfigError(f"unknown config key(s): {', '.join(unknown)}")
        return cls(**{k: v for k, v in values.items() if k in known})

    @classmethod
    def from_json_string(cls, text: str) -> AlbertConfig:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"config is not valid JSON: {e}") from None
        return cls.from_dict(values)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> AlbertConfig:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read config {path}: {e.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config {path} is not a JSON text file (not UTF-8)") from None
        try:
            return cls.from_json_string(text)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        Path(path).write_text(self.to_json_string(), encoding="utf-8")


# === Presets ===

_V2 = dict(vocab_size=30000, embedding_size=128, max_position_embeddings=512, hidden_act="gelu")

# The v2 releases by (hidden_size, num_hidden_layers, num_attention_heads, intermediate_size).
_V2_SIZES = {
    "base": (768, 12, 12, 3072),
    "large": (1024, 24, 16, 4096),
    "xlarge": (2048, 24, 32, 8192),
    "xxlarge": (4096, 12, 64, 16384),
}

PRESETS: dict[str, AlbertConfig] = {
    **{
        name: AlbertConfig(
            **_V2,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=ffn,
        )
        for name, (hidden, layers, heads, ffn) in _V2_SIZES.items()
    },
    # Small enough to pretrain in minutes on a laptop CPU; used by the quickstart and demos.
    "tiny": AlbertConfig(
        vocab_size=8000,
        embedding_size=64,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        max_position_embeddings=128,
    ),
}
# v1 releases differ from v2 only in dropout.
for _name in ("base", "large"):
    PRESETS[f"{_name}_v1"] = PRESETS[_name].replace(
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1
    )


def resolve_config(spec: str | os.PathLike | AlbertConfig) -> AlbertConfig:
    """A config from a preset name, a path to an `albert_config.json`, or a config itself."""
    if isinstance(spec, AlbertConfig):
        return spec
    name = str(spec)
    if name in PRESETS:
        return PRESETS[name]
    if name in SHIPPED_MODELS and not os.path.exists(name):
        return AlbertConfig.from_json_file(SHIPPED_DIR / name / CONFIG_FILE)
    if os.path.isdir(name):
        name = os.path.join(name, CONFIG_FILE)
    if not os.path.exists(name):
        raise ConfigError(
            f"{spec!r} is neither a preset ({', '.join(PRESETS)}), a shipped model "
            f"({', '.join(SHIPPED_MODELS)}) nor a config file"
            + did_you_mean(name, (*PRESETS, *SHIPPED_MODELS))
        )
    return AlbertConfig.from_json_file(name)
