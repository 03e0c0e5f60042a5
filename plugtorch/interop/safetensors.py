"""Weights in the safetensors format, through the ``safetensors`` package's NumPy API.

``save_file(model.state_dict(), "model.safetensors")`` writes a file that
``safetensors.torch.load_file`` reads into ``torch_model.load_state_dict``, and
``model.load_state_dict(load_file(path))`` loads one that PyTorch wrote with
``safetensors.torch.save_file``: the names match because plugtorch's modules name their
parameters and buffers as torch's do. The format is a JSON header and raw bytes, so
loading never runs code. bfloat16 tensors are written and read as bfloat16 (``BF16``), through
their bits: NumPy has no bfloat16, and the NumPy API reads none.

``safetensors`` is an optional dependency: ``pip install 'plugtorch[safetensors]'``.
"""
from __future__ import annotations

import json
import os
import struct

import ml_dtypes
import numpy as np

from ..core.dtypes import bfloat16, int16
from ..core.ops.creation import from_numpy
from ..core.tensor import Tensor
from ..utils.atomic import atomic_write

__all__ = ["save_file", "load_file", "save", "load"]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)  # what the NumPy API writes as BF16


def _numpy_api(who: str):
    try:
        import safetensors.numpy as api
    except ImportError:
        raise ModuleNotFoundError(
            f"plugtorch.{who} needs the safetensors package: pip install 'plugtorch[safetensors]' "
            "(or pip install safetensors); plugtorch.save/load, plugtorch's own format, need nothing extra.",
            name="safetensors") from None
    return api


def _arrays(tensors, who: str) -> dict[str, np.ndarray]:
    if not isinstance(tensors, dict):
        raise TypeError(f"plugtorch.{who}: expected a dict of name -> Tensor, got {type(tensors).__name__}")
    out = {}
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"plugtorch.{who}: keys must be strings, got {name!r}")
        if not isinstance(t, Tensor):
            raise TypeError(f"plugtorch.{who}: {name!r} is a {type(t).__name__}, not a Tensor; "
                            "safetensors files hold tensors only (put other values in metadata)")
        t = t.detach()
        # numpy() refuses bfloat16 (as torch's): its bits, viewed as ml_dtypes' bfloat16
        host = t.view(int16).numpy().view(_BFLOAT16) if t.dtype is bfloat16 else t.numpy()
        out[name] = np.require(host, requirements="C")  # 0-d stays 0-d
    return out


def _save(tensors: dict, metadata, who: str) -> bytes:
    return _numpy_api(who).save(_arrays(tensors, who), metadata=metadata)


def save(tensors: dict, metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors bytes of a ``name -> Tensor`` dict."""
    return _save(tensors, metadata, "save")


def save_file(tensors: dict, filename, metadata: dict[str, str] | None = None) -> None:
    """Write a ``name -> Tensor`` dict (e.g. ``model.state_dict()``) as a safetensors file.

    The file is written atomically: a crash mid-write leaves any previous file intact.
    """
    data = _save(tensors, metadata, "save_file")
    with atomic_write(os.fspath(filename)) as fh:
        fh.write(data)


def _to_tensors(arrays: dict, device) -> dict[str, Tensor]:
    out = {}
    for name, arr in arrays.items():
        arr = arr if arr.flags.writeable else arr.copy()
        t = from_numpy(arr.view(np.int16)).view(bfloat16) if arr.dtype == _BFLOAT16 else from_numpy(arr)
        out[name] = t if str(device) in ("cpu", t.backend) else t.to(device=device)
    return out


def load(data: bytes, device="cpu") -> dict[str, Tensor]:
    """The tensors in safetensors ``data`` (bytes)."""
    api = _numpy_api("load")
    try:
        arrays = api.load(data)
    except (TypeError, KeyError) as e:  # the NumPy API reads no BF16 entry
        if "bfloat16" not in str(e) and "BF16" not in str(e):
            raise
        arrays = _read(data, "<bytes>")
    return _to_tensors(arrays, device)


def load_file(filename, device="cpu") -> dict[str, Tensor]:
    """The ``name -> Tensor`` dict in a safetensors file, on ``device`` (a backend name)."""
    api = _numpy_api("load_file")
    path = os.fspath(filename)
    try:
        arrays = api.load_file(path)
    except (TypeError, KeyError) as e:
        if "bfloat16" not in str(e) and "BF16" not in str(e):
            raise
        with open(path, "rb") as fh:
            arrays = _read(fh.read(), path)
    return _to_tensors(arrays, device)


_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U8": "u1", "BOOL": "?"}


def _read(data: bytes, origin: str) -> dict[str, np.ndarray]:
    """Read a file holding bfloat16 entries, which the NumPy API refuses: the format is a
    little-endian u64 header size, a JSON header of name -> dtype/shape/data_offsets, then
    the bytes; bfloat16 ones are read as their bits, viewed as ml_dtypes' bfloat16."""
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = memoryview(data)[8 + size:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = body[begin:end]
        if info["dtype"] == "BF16":
            arr = np.frombuffer(raw, dtype="<u2").astype(np.uint16).view(_BFLOAT16)
        elif info["dtype"] in _DTYPES:
            stored = np.dtype(_DTYPES[info["dtype"]])
            arr = np.frombuffer(raw, dtype=stored).astype(stored.newbyteorder("="))
        else:
            raise TypeError(f"{origin}: tensor {name!r} has dtype {info['dtype']}, which plugtorch "
                            "cannot hold")
        out[name] = arr.reshape(info["shape"])
    return out
