"""``plugtorch.save`` / ``plugtorch.load``: checkpoints without pickle, written atomically.

A checkpoint is a zip archive (readable by ``numpy.load`` as an ``.npz``) holding
``plugtorch.json`` — the object's structure as JSON, tensors replaced by
references — and one ``tensors/<n>.npy`` per tensor, read back with
``allow_pickle=False``. Loading therefore never runs code from the file, which
is why only tensors, NumPy arrays, numbers, strings, bools, None, dtypes and
dicts / lists / tuples of them can be saved.

``load`` also reads PyTorch's ``.pt`` files (``torch.save``'s zip format) with a
restricted reader that accepts only what ``torch.load(weights_only=True)`` does and
never imports torch (:mod:`plugtorch.interop.torch_checkpoint`); other pickles are
refused with an explanation. For exchanging weights, ``plugtorch.save_file`` /
``load_file`` speak safetensors (:mod:`plugtorch.interop.safetensors`).

Saving to a path writes a temporary file in the same directory, fsyncs it and
renames it over the target: a crash mid-write leaves the previous checkpoint
intact.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
from collections import OrderedDict

import numpy as np

from .core.dtypes import dtype as _dtype
from .core.dtypes import dtype_from_name
from .core.errors import BackendUnavailableError
from .core.ops.creation import from_numpy
from .core.tensor import Tensor
from .interop.torch_checkpoint import UnsafeCheckpointError, is_torch_zip, load_torch_zip
from .utils.atomic import atomic_write

FORMAT = "plugtorch.save"
VERSION = 1
MANIFEST = "plugtorch.json"


# -- encoding -------------------------------------------------------------------------------

class _Encoder:
    def __init__(self):
        self.arrays: list[np.ndarray] = []
        self._seen: dict[int, int] = {}  # id(tensor) -> array index: shared tensors stay shared

    def encode(self, obj, where="obj"):
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, Tensor):
            return {"__tensor__": self._add(obj, obj.detach().numpy()), "dtype": obj.dtype.name,
                    "device": obj.backend, "requires_grad": bool(obj.requires_grad)}
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind in "OV":
                raise TypeError(f"plugtorch.save: {where} is a NumPy array of dtype {obj.dtype}, "
                                "which can only be stored by pickling; convert it to numbers first")
            return {"__ndarray__": self._add(obj, obj)}
        if isinstance(obj, np.generic):
            return self.encode(obj.item(), where)
        if isinstance(obj, _dtype):
            return {"__dtype__": obj.name}
        if isinstance(obj, dict):
            return {"__dict__": [[self.encode(k, f"a key of {where}"), self.encode(v, f"{where}[{k!r}]")]
                                 for k, v in obj.items()],
                    "ordered": isinstance(obj, OrderedDict)}
        if isinstance(obj, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, tuple):
            return {"__tuple__": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        raise TypeError(
            f"plugtorch.save cannot store {where} of type {type(obj).__module__}."
            f"{type(obj).__qualname__}: checkpoints hold only tensors, NumPy arrays, numbers, "
            "strings, bools, None, dtypes and dicts/lists/tuples of them (nothing is pickled, so "
            "loading a file can never run code). Save its state_dict() or plain values instead.")

    def _add(self, key_obj, array) -> int:
        key = id(key_obj)
        if key not in self._seen:
            self._seen[key] = len(self.arrays)
            self.arrays.append(array if array.flags.c_contiguous else array.copy())
        return self._seen[key]


def _write(manifest: dict, arrays, fh) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(MANIFEST, json.dumps(manifest))
        for i, arr in enumerate(arrays):
            with zf.open(f"tensors/{i}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


def save(obj, f) -> None:
    """Save ``obj`` to the path (or writable binary file) ``f``; see the module docstring."""
    enc = _Encoder()
    manifest = {"format": FORMAT, "version": VERSION, "object": enc.encode(obj)}
    if not isinstance(f, (str, os.PathLike)):
        _write(manifest, enc.arrays, f)
        return
    with atomic_write(f) as fh:
        _write(manifest, enc.arrays, fh)


# -- decoding -------------------------------------------------------------------------------

def _refuse(name: str, what: str):
    raise UnsafeCheckpointError(
        f"{name} is {what}. plugtorch.load never unpickles a bare pickle, because unpickling a "
        "file can run arbitrary code (PyTorch's zip checkpoints, torch.save since 1.6, are read "
        "with a restricted reader instead). If you trust the file, load it with the program "
        "that wrote it (e.g. torch.load) and re-save its tensors with plugtorch.save(obj, path) "
        "or torch.save(obj, path).")


class _Decoder:
    def __init__(self, zf: zipfile.ZipFile, name: str, map_location):
        self.zf, self.name, self.map_location = zf, name, map_location
        self._arrays: dict[int, np.ndarray] = {}
        self._tensors: dict[int, Tensor] = {}

    def array(self, ref) -> np.ndarray:
        if not isinstance(ref, int) or isinstance(ref, bool):
            raise ValueError(f"{self.name}: malformed checkpoint (tensor reference {ref!r})")
        if ref not in self._arrays:
            member = f"tensors/{ref}.npy"
            try:
                with self.zf.open(member) as fh:
                    self._arrays[ref] = np.lib.format.read_array(io.BytesIO(fh.read()),
                                                                 allow_pickle=False)
            except KeyError:
                raise ValueError(f"{self.name}: malformed checkpoint, {member} is missing") from None
            except ValueError as e:
                raise UnsafeCheckpointError(f"{self.name}: {member} cannot be read without "
                                            f"pickling ({e}); refusing it") from None
        return self._arrays[ref]

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict) or len(node) == 0:
            raise ValueError(f"{self.name}: malformed checkpoint (unexpected {node!r:.60})")
        if "__tensor__" in node:
            return self._tensor(node)
        if "__ndarray__" in node:
            return self.array(node["__ndarray__"]).copy()
        if "__tuple__" in node:
            return tuple(self.decode(v) for v in node["__tuple__"])
        if "__dtype__" in node:
            return dtype_from_name(node["__dtype__"])
        if "__dict__" in node:
            items = [(_hashable(self.decode(k)), self.decode(v)) for k, v in node["__dict__"]]
            return OrderedDict(items) if node.get("ordered") else dict(items)
        raise ValueError(f"{self.name}: malformed checkpoint (unknown entry {sorted(node)})")

    def _tensor(self, node) -> Tensor:
        ref = node["__tensor__"]
        if ref in self._tensors:
            return self._tensors[ref]
        arr = self.array(ref)
        dt = dtype_from_name(node["dtype"])
        t = from_numpy(np.array(arr, copy=True))
        if t.dtype is not dt:
            t = t.to(dt)
        device = self.map_location if self.map_location is not None else node.get("device", "cpu")
        if str(device) not in ("cpu", t.backend):
            try:
                t = t.to(device=device)
            except BackendUnavailableError as e:
                if self.map_location is not None:
                    raise
                raise BackendUnavailableError(
                    f"{self.name}: this checkpoint's tensors were saved on '{device}', which cannot be used "
                    f"here ({e}). On a machine without it, load them onto the CPU with "
                    "plugtorch.load(..., map_location='cpu')") from None
        if node.get("requires_grad"):
            t.requires_grad_(True)
        self._tensors[ref] = t
        return t


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key


def load(f, map_location=None, *, weights_only=True):
    """Load an object saved by :func:`save` from a path or readable binary file.

    ``map_location`` names the device (backend) to put tensors on; by default each
    goes back where it was saved. A PyTorch ``.pt`` file (``torch.save``) is read
    as ``torch.load(weights_only=True)`` would, without running any of its code; other
    pickles are refused. ``weights_only`` is accepted for PyTorch compatibility:
    nothing but weights is ever loaded.
    """
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<file>")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, str(name), map_location)
    return _load(f, str(name), map_location)


def _load(fh, name: str, map_location):
    head = fh.read(4)
    fh.seek(-len(head), io.SEEK_CUR)
    if head[:1] == b"\x80" or head[:1] in (b"(", b"]", b"}"):
        _refuse(name, "a pickle file (torch.save before PyTorch 1.6, or pickle.dump output)")
    if head != b"PK\x03\x04":
        raise ValueError(f"{name} is not a plugtorch checkpoint (it starts with bytes "
                         f"{head.hex() or '(empty file)'}; plugtorch.save files are zip archives)")
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as e:
        raise UnsafeCheckpointError(f"{name}: not a readable checkpoint: its zip archive is damaged or "
                                    f"truncated ({e}). The file is likely incomplete; save it again.") from None
    with zf:
        names = set(zf.namelist())
        if MANIFEST not in names:
            if is_torch_zip(names):
                return load_torch_zip(zf, name, map_location)
            raise ValueError(f"{name} is a zip archive but not a plugtorch checkpoint "
                             f"(no {MANIFEST} inside)")
        manifest = json.loads(zf.read(MANIFEST))
        if manifest.get("format") != FORMAT:
            raise ValueError(f"{name}: {MANIFEST} does not describe a plugtorch checkpoint")
        if manifest.get("version", 0) > VERSION:
            raise ValueError(f"{name} was written by a newer plugtorch (checkpoint version "
                             f"{manifest['version']}, this one reads up to {VERSION}); upgrade "
                             "plugtorch to load it")
        return _Decoder(zf, name, map_location).decode(manifest["object"])
