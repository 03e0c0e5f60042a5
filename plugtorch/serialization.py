"""``plugtorch.save`` / ``plugtorch.load``: PyTorch's checkpoint format, written atomically.

``save`` pickles any object (a tensor, a state dict, a whole ``nn.Module``, an optimizer) into
``torch.save``'s zip format (:mod:`plugtorch.interop.torch_writer`): tensors are stored as torch
stores them, so ``torch.load`` reads a file of tensors and containers, and plugtorch reads
files written by either.

``load`` has torch 2.13's two readers. ``weights_only=True`` (the default) never runs code from
the file: it accepts tensors, dtypes, ``Size``, devices, containers and primitive values, plus
the globals the user allowed with :func:`add_safe_globals` / :class:`safe_globals`, and refuses
anything else with an :class:`UnsafeCheckpointError` that says what to do
(:mod:`plugtorch.interop.torch_checkpoint`). ``weights_only=False`` unpickles whatever the file
holds, which can run arbitrary code: use it only for files you trust. There, torch's names map
onto plugtorch's: ``torch.nn.modules.linear.Linear`` in a file written by ``torch.save(model)``
is loaded as ``plugtorch.nn.modules.linear.Linear`` (plugtorch keeps torch's module layout) with
the attributes torch pickled, and the user's own classes are imported as pickle imports them.

Files written by earlier plugtorch versions (a zip holding ``plugtorch.json`` and ``.npy``
tensors, never pickled) are still read. Bare pickles (``torch.save`` before PyTorch 1.6, or
``pickle.dump``) are refused. For exchanging weights, ``plugtorch.save_file`` / ``load_file``
speak safetensors (:mod:`plugtorch.interop.safetensors`).

Saving to a path writes a temporary file in the same directory, fsyncs it and renames it over
the target: a crash mid-write leaves the previous checkpoint intact.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import warnings
import zipfile
from collections import OrderedDict

import numpy as np

from .core.device import Device
from .core.dtypes import dtype_from_name
from .core.errors import BackendUnavailableError
from .core.ops.creation import from_numpy
from .core.tensor import Tensor
from .interop import torch_pickle as _torch_pickle
from .interop.torch_checkpoint import UnsafeCheckpointError, is_torch_zip, load_torch_zip
from .interop.torch_writer import PROTOCOL as DEFAULT_PROTOCOL
from .interop.torch_writer import write_torch_zip
from .utils.atomic import atomic_write

__all__ = ["DEFAULT_PROTOCOL", "UnsafeCheckpointError", "add_safe_globals", "clear_safe_globals",
           "get_safe_globals", "load", "safe_globals", "save"]

# what earlier plugtorch versions wrote, still read
FORMAT = "plugtorch.save"
VERSION = 1
MANIFEST = "plugtorch.json"


# -- safe globals: torch.serialization's registry for the weights_only reader --------------

def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes / functions (or ``(obj, "module.name")`` pairs) in ``weights_only`` loads."""
    for entry in safe_globals:
        if entry not in _torch_pickle._marked_safe_globals:
            _torch_pickle._marked_safe_globals.append(entry)


def get_safe_globals() -> list:
    """The globals :func:`add_safe_globals` allowed."""
    return list(_torch_pickle._marked_safe_globals)


def clear_safe_globals() -> None:
    """Forget every global :func:`add_safe_globals` allowed."""
    _torch_pickle._marked_safe_globals.clear()


class safe_globals:
    """Within ``with safe_globals([...]):``, ``weights_only`` loads accept these globals too."""

    def __init__(self, safe_globals: list):
        self.safe_globals = safe_globals
        self._before: list = []

    def __enter__(self):
        self._before = get_safe_globals()
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _torch_pickle._marked_safe_globals[:] = self._before


# -- saving ---------------------------------------------------------------------------------

def save(obj, f, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False) -> None:
    """Pickle ``obj`` to the path (or writable binary file) ``f`` in ``torch.save``'s zip format."""
    if pickle_module is not pickle:
        raise ValueError("plugtorch.save: only the standard pickle module is supported as "
                         f"pickle_module (got {pickle_module!r})")
    if not _use_new_zipfile_serialization:
        raise ValueError("plugtorch.save writes only the zip format (torch.save since PyTorch 1.6); "
                         "_use_new_zipfile_serialization=False is not supported")
    if not isinstance(f, (str, os.PathLike)):
        write_torch_zip(obj, f, pickle_protocol)
        return
    with atomic_write(f) as fh:
        write_torch_zip(obj, fh, pickle_protocol)


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


def _weights_only_from_environment(weights_only):
    """torch.load's default and its two environment overrides: TORCH_FORCE_WEIGHTS_ONLY_LOAD
    always reads weights only; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD (with a warning) unpickles
    anything where the call did not say, so that scripts written before torch 2.6 made
    weights_only the default (pytorch/examples' time_sequence_prediction, for one) run as they are."""
    true_values = ["1", "y", "yes", "true"]
    force = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in true_values
    force_no = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in true_values
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` "
                           "should be set, but both were set.")
    if force:
        return True
    if weights_only is None:
        if force_no:
            warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the"
                          "`weights_only` argument was not explicitly passed to `torch.load`, forcing "
                          "weights_only=False.", UserWarning, stacklevel=3)
            return False
        return True
    return weights_only


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load an object saved by :func:`save` or ``torch.save`` from a path or readable binary file.

    ``map_location`` names the device (backend) to put tensors on; by default each goes back
    where it was saved. ``weights_only`` (``None`` means True, as in torch 2.13) reads only
    tensors, containers, primitive values and the globals allowed by :func:`add_safe_globals`,
    never running code from the file; ``weights_only=False`` unpickles anything, for files you
    trust. As in torch, the environment variable TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 makes every load
    weights-only and TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 makes ``weights_only=None`` mean False.
    See the module docstring.
    """
    weights_only = _weights_only_from_environment(weights_only)
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("plugtorch.load: only the standard pickle module is supported as "
                         f"pickle_module (got {pickle_module!r})")
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    if mmap:
        raise ValueError("plugtorch.load does not memory-map checkpoints (mmap=True); load without it")
    if pickle_load_args:
        raise TypeError(f"plugtorch.load got unexpected keyword arguments {sorted(pickle_load_args)}")
    if isinstance(map_location, Device):
        map_location = str(map_location)
    elif map_location is not None and not isinstance(map_location, str):
        raise TypeError("plugtorch.load: map_location must be a device name or a plugtorch.device "
                        f"(got {type(map_location).__name__}); dicts and functions are not supported")
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<file>")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, str(name), map_location, bool(weights_only))
    return _load(f, str(name), map_location, bool(weights_only))


def _load(fh, name: str, map_location, weights_only: bool):
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
                return load_torch_zip(zf, name, map_location, weights_only)
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
