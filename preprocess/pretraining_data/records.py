"""`tf.train.Example` protos encoded by hand, so worker processes never import TensorFlow.

The bytes are the standard wire format (parsed by `tf.io.parse_example` and every protobuf
library); features are written in a fixed order, so equal instances give equal bytes.
"""

from __future__ import annotations

import functools

import numpy as np


def feature_lengths(
    max_seq_length: int, max_predictions_per_seq: int, masked: bool = True
) -> dict[str, tuple[str, int]]:
    """The features of every record, in order: name -> (dtype, fixed length).

    Masked data holds the original's seven features; unmasked data (`mask=False`, for dynamic
    masking in the input pipeline) holds `input_ids` before masking and `token_boundary` (1 where
    a piece begins a word, the original ALBERT feature) instead of the `masked_lm_*` features.
    """
    spec = {
        "input_ids": ("int64", max_seq_length),
        "input_mask": ("int64", max_seq_length),
        "segment_ids": ("int64", max_seq_length),
    }
    if masked:
        spec["masked_lm_positions"] = ("int64", max_predictions_per_seq)
        spec["masked_lm_ids"] = ("int64", max_predictions_per_seq)
        spec["masked_lm_weights"] = ("float", max_predictions_per_seq)
    else:
        spec["token_boundary"] = ("int64", max_seq_length)
    spec["next_sentence_labels"] = ("int64", 1)
    return spec


@functools.lru_cache(maxsize=65536)
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _packed_varints(values: np.ndarray) -> bytes:
    """Base-128 varints of non-negative integers, concatenated."""
    v = np.asarray(values, dtype=np.int64)
    if v.size <= 32:
        return b"".join(map(_varint, v.tolist()))
    top = int(v.max())
    if top < 0x80:
        return v.astype(np.uint8).tobytes()
    if top < 0x4000:  # at most two bytes each: the common case for token ids
        two = v >= 0x80
        pairs = np.stack([(v & 0x7F) | (two * 0x80), v >> 7], axis=1)  # [N, 2]
        keep = np.stack([np.ones_like(two), two], axis=1)
        return pairs[keep].astype(np.uint8).tobytes()
    width = (top.bit_length() + 6) // 7
    num_bytes = np.ones(v.shape, np.int64)
    for k in range(1, width):
        num_bytes += v >= 1 << (7 * k)
    groups = np.stack([(v >> (7 * k)) & 0x7F for k in range(width)], axis=1)  # [N, width]
    groups |= (np.arange(width)[None, :] < num_bytes[:, None] - 1) * 0x80
    keep = np.arange(width)[None, :] < num_bytes[:, None]
    return groups[keep].astype(np.uint8).tobytes()


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: `tag` is the encoded (field number << 3 | 2)."""
    return tag + _varint(len(payload)) + payload


@functools.lru_cache(maxsize=256)
def _key(name: str) -> bytes:
    return _field(b"\x0a", name.encode())


def int64_feature(values: np.ndarray) -> bytes:
    """A `Feature` holding an `Int64List` (packed); values must be non-negative."""
    return _field(b"\x1a", _field(b"\x0a", _packed_varints(values)))


def float_feature(values: np.ndarray) -> bytes:
    """A `Feature` holding a `FloatList` (packed little-endian float32)."""
    return _field(b"\x12", _field(b"\x0a", np.asarray(values, dtype="<f4").tobytes()))


def encode_example(features: dict[str, tuple[str, np.ndarray]]) -> bytes:
    """Serializes a `tf.train.Example`.

    Args:
      features: name -> ("int64" | "float", 1-D values), written in the dict's order.
    """
    entries = []
    for name, (kind, values) in features.items():
        feature = int64_feature(values) if kind == "int64" else float_feature(values)
        entries.append(_field(b"\x0a", _key(name) + _field(b"\x12", feature)))
    return _field(b"\x0a", b"".join(entries))
