"""The IDX file format of MNIST and Fashion-MNIST, read into NumPy with clear errors.

Layout (big-endian): two zero bytes, a type code, the number of dimensions n,
then n uint32 sizes, then the values in C order. A file may be gzip-compressed.
"""
from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np

TYPE_CODES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


class IDXFormatError(ValueError):
    """A file that is not a well-formed IDX file (corrupt, truncated or of another format)."""


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The contents of ``path``, decompressed when it is gzip (recognised by its magic bytes)."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as e:
        raise IDXFormatError(
            f"{path} is a truncated or corrupt gzip file ({len(raw):,} bytes; {e}). Delete it and "
            "download it again, or replace it with a good copy.") from None


def parse_idx(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """The array stored in IDX bytes ``data`` (``name`` only labels errors)."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in TYPE_CODES:
        raise IDXFormatError(
            f"{name} is not an IDX file: it starts with bytes {data[:4].hex() or '(empty)'}, "
            "expected 0000 followed by a type code (08 for uint8) and the number of dimensions")
    dtype, ndim = TYPE_CODES[data[2]], data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXFormatError(f"{name} is truncated: its header needs {header} bytes, the file "
                             f"holds {len(data)}")
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    actual = len(data) - header
    if actual != expected:
        what = "truncated" if actual < expected else "longer than its header says"
        raise IDXFormatError(
            f"{name} is {what}: its header declares shape {shape} of {dtype.name} "
            f"({expected:,} bytes of values) but it holds {actual:,}. Delete it and download it "
            "again, or replace it with a good copy.")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file, raw or gzip-compressed."""
    return parse_idx(read_bytes(path), str(path))
