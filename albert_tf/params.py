"""Parameter arithmetic for an `AlbertConfig`, computed from shapes alone (no TensorFlow).

`tests/model/test_params.py` checks these formulas against the built model's variables.
"""

from __future__ import annotations

from typing import Any

from albert_tf.config import AlbertConfig


def attention_params(config: AlbertConfig) -> int:
    """Query, key, value and output projections with biases, plus the post-attention LayerNorm."""
    h = config.hidden_size
    return 4 * (h * h + h) + 2 * h


def ffn_params(config: AlbertConfig) -> int:
    """Intermediate and output dense layers with biases, plus the post-FFN LayerNorm."""
    h, f = config.hidden_size, config.intermediate_size
    return (h * f + f) + (f * h + h) + 2 * h


def layers_per_group(config: AlbertConfig) -> list[int]:
    counts = [0] * config.num_hidden_groups
    for layer in range(config.num_hidden_layers):
        counts[config.group_of_layer(layer)] += 1
    return counts


def group_params(config: AlbertConfig, group: int) -> int:
    """Parameters owned by one group, given how `shared_params` shares them across its layers."""
    layers = layers_per_group(config)[group]
    attention_copies = 1 if config.shared_params in ("all", "attention") else layers
    ffn_copies = 1 if config.shared_params in ("all", "ffn") else layers
    per_inner = attention_copies * attention_params(config) + ffn_copies * ffn_params(config)
    return config.inner_group_num * per_inner


def parameter_breakdown(config: AlbertConfig) -> dict[str, Any]:
    """The backbone's parameters by part, the heads, and the unfactorized, unshared comparison.

    `total` counts the backbone only: embeddings, projection, encoder and pooler.
    """
    v, e, h = config.vocab_size, config.embedding_size, config.hidden_size
    p, t = config.max_position_embeddings, config.type_vocab_size
    embeddings = {
        "word_embeddings": v * e,
        "position_embeddings": p * e,
        "token_type_embeddings": t * e,
        "layer_norm": 2 * e,
    }
    projection = e * h + h if e != h else 0
    groups = [group_params(config, g) for g in range(config.num_hidden_groups)]
    pooler = h * h + h
    total = sum(embeddings.values()) + projection + sum(groups) + pooler
    heads = {"mlm": (h * e + e) + 2 * e + v, "sop": 2 * h + 2}
    # BERT-style: embeddings of width H, one set of block weights per layer.
    block = config.inner_group_num * (attention_params(config) + ffn_params(config))
    bert_embeddings = (v + p + t) * h + 2 * h
    bert_total = bert_embeddings + config.num_hidden_layers * block + pooler
    return {
        "config": config.to_dict(),
        "total": total,
        "breakdown": {
            "embeddings": embeddings,
            "embedding_hidden_mapping_in": projection,
            "groups": groups,
            "pooler": pooler,
        },
        "heads": heads,
        "embedding_factorization": {
            "unfactorized_V_x_H": v * h,
            "factorized_V_x_E_plus_E_x_H": v * e + e * h,
        },
        "unfactorized_unshared": {"total": bert_total, "ratio_to_albert": bert_total / total},
    }
