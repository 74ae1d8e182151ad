"""`tf.train.Example` protos and TFRecord framing written by hand, without TensorFlow.

Importing TensorFlow costs about 700 MB of RSS per process; data generation needs neither its
protos nor its writer. The bytes are the standard formats (the Example wire format, parsed by
`tf.io.parse_example`; TFRecord frames with masked CRC-32C, byte-identical to
`tf.io.TFRecordWriter`); features are written in a fixed order, so equal instances give equal
bytes.
"""

from __future__ import annotations

import functools

import numpy as np


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


def varints(values: np.ndarray | list[int], zeros: int = 0) -> bytes:
    """Packed Int64List payload of non-negative `values` followed by `zeros` zeros (padding)."""
    return _packed_varints(values) + b"\x00" * zeros


def runs(*value_counts: tuple[int, int]) -> bytes:
    """Packed Int64List payload of runs of small values: runs((1, 3), (0, 2)) = 1,1,1,0,0."""
    return b"".join(bytes([value]) * count for value, count in value_counts)


FLOAT_ONE = np.float32(1.0).astype("<f4").tobytes()  # a packed FloatList element
FLOAT_ZERO = bytes(4)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: `tag` is the encoded (field number << 3 | 2)."""
    return tag + _varint(len(payload)) + payload


@functools.lru_cache(maxsize=256)
def _key(name: str) -> bytes:
    return _field(b"\x0a", name.encode())


def int64_feature(values: np.ndarray | bytes) -> bytes:
    """A `Feature` holding an `Int64List`: non-negative values, or an already packed payload
    (`varints`, `runs`)."""
    payload = values if isinstance(values, bytes) else _packed_varints(values)
    return _field(b"\x1a", _field(b"\x0a", payload))


def float_feature(values: np.ndarray | bytes) -> bytes:
    """A `Feature` holding a `FloatList`: values, or packed little-endian float32 bytes."""
    payload = values if isinstance(values, bytes) else np.asarray(values, "<f4").tobytes()
    return _field(b"\x12", _field(b"\x0a", payload))


def encode_example(features: dict[str, tuple[str, np.ndarray]]) -> bytes:
    """Serializes a `tf.train.Example`.

    Args:
      features: name -> ("int64" | "float", 1-D values or packed payload bytes), written in the
        dict's order.
    """
    entries = []
    for name, (kind, values) in features.items():
        feature = int64_feature(values) if kind == "int64" else float_feature(values)
        entries.append(_field(b"\x0a", _key(name) + _field(b"\x12", feature)))
    return _field(b"\x0a", b"".join(entries))


def _crc32c_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1)
    return table.astype(np.uint32)


_CRC_TABLE = _crc32c_table()


def crc32c(messages: list[bytes]) -> np.ndarray:
    """CRC-32C (Castagnoli) of each message, uint32 [N]; vectorized across messages, so a batch
    of records costs one pass of numpy operations over the longest one."""
    if not messages:
        return np.zeros(0, np.uint32)
    lengths = np.array([len(m) for m in messages])
    order = np.argsort(-lengths, kind="stable")  # longest first: active rows form a prefix
    width = int(lengths[order[0]])
    data = np.zeros((width, len(messages)), np.uint8)  # [longest, N]: byte j of every message
    for column, i in enumerate(order):
        data[: lengths[i], column] = np.frombuffer(messages[i], np.uint8)
    ends = lengths[order]
    crc = np.full(len(messages), 0xFFFFFFFF, np.uint32)
    active = len(messages)
    for j in range(width):
        while ends[active - 1] <= j:
            active -= 1
        c = crc[:active]
        crc[:active] = np.take(_CRC_TABLE, (c ^ data[j, :active]) & 0xFF) ^ (c >> 8)
    result = np.empty_like(crc)
    result[order] = crc ^ np.uint32(0xFFFFFFFF)
    return result


def _masked(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC: rotate right by 15 bits, add a constant (mod 2^32)."""
    crc = crc.astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rotated + np.uint64(0xA282EAD8)) & np.uint64(0xFFFFFFFF)).astype("<u4")


def frame_records(records: list[bytes]) -> list[bytes]:
    """Each record framed as in a TFRecord file: uint64 length, masked CRC-32C of the length,
    the data, masked CRC-32C of the data (little-endian). Concatenated frames are the file."""
    headers = [len(r).to_bytes(8, "little") for r in records]
    header_crcs = _masked(crc32c(headers))
    data_crcs = _masked(crc32c(records))
    return [
        b"".join((header, header_crc.tobytes(), record, data_crc.tobytes()))
        for header, header_crc, record, data_crc in zip(
            headers, header_crcs, records, data_crcs, strict=True
        )
    ]
