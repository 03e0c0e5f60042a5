"""Writing ``torch.save``'s zip format: any picklable object, tensors as torch stores them.

The archive holds ``archive/data.pkl`` (the object, pickled with protocol 2 as torch pickles it),
one ``archive/data/<key>`` record of raw little-endian bytes per tensor, and the ``byteorder``,
``version`` and ``.data/serialization_id`` records torch writes. A tensor is pickled exactly as
torch pickles one, ``torch._utils._rebuild_tensor_v2`` over a persistent storage reference; a
dtype as ``torch.float32``, a ``Size`` as ``torch.Size``, a device as ``torch.device``. So
``torch.load`` reads a plugtorch file of tensors (``weights_only=True`` included), and
``plugtorch.load`` reads it back with either of its readers. Everything else (modules,
optimizers, the user's classes) is pickled by reference to its plugtorch class, as ``pickle``
does: only plugtorch can load those again, with ``weights_only=False``.

torch's names are written without importing torch: the pure-Python pickler is used because it
lets :meth:`_Pickler.save` write a ``GLOBAL`` opcode for a name no module here defines.
"""
from __future__ import annotations

import io
import os
import pickle
import struct
import zipfile
from collections import OrderedDict
from typing import Any

import ml_dtypes
import numpy as np

from ..core.device import Device
from ..core.dtypes import bfloat16, int16
from ..core.dtypes import dtype as _dtype
from ..core.tensor import Size, Tensor

__all__ = ["write_torch_zip"]

PROTOCOL = 2  # torch.serialization.DEFAULT_PROTOCOL
_STORAGE_OF = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
               "bfloat16": "BFloat16Storage",
               "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage",
               "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage"}


class _Global:
    """A ``module.name`` to write as a pickle GLOBAL, whether or not that module exists here."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce insists on a callable; it is never called
        raise TypeError(f"{self.module}.{self.name} is a name written into a pickle, not a function")


_GLOBALS: dict[tuple[str, str], _Global] = {}


def _g(module: str, name: str) -> _Global:
    key = (module, name)
    if key not in _GLOBALS:
        _GLOBALS[key] = _Global(module, name)
    return _GLOBALS[key]


class _StorageOut:
    """A tensor's bytes, written as record ``data/<key>`` and pickled as a persistent id."""

    __slots__ = ("key", "array", "location")

    def __init__(self, key: str, array: np.ndarray, location: str):
        self.key, self.array, self.location = key, array, location


def _location(t: Tensor) -> str:
    # torch's tag for host memory is "cpu"; a GPU backend's tensors are tagged with its name
    # (plugtorch.load puts them back there; torch.load reads them with map_location="cpu")
    if t.backend == "numpy":
        return "cpu"
    index = t.device.index
    return t.backend if index is None else f"{t.backend}:{index}"


# the pure-Python pickler, whose save() and write() a subclass may use (typeshed lists neither)
_PythonPickler: Any = pickle._Pickler  # type: ignore[attr-defined]


class _Pickler(_PythonPickler):
    def __init__(self, fh, protocol: int):
        super().__init__(fh, protocol=protocol)
        self.storages: list[_StorageOut] = []

    def persistent_id(self, obj):
        if type(obj) is _StorageOut:
            name = _STORAGE_OF[str(obj.array.dtype)]
            return ("storage", _g("torch", name), obj.key, obj.location, obj.array.size)
        return None

    def save(self, obj, save_persistent_id=True):
        if type(obj) is _Global or type(obj) is _dtype:
            if id(obj) in self.memo:
                self.write(self.get(self.memo[id(obj)][0]))
                return
            module, name = (obj.module, obj.name) if type(obj) is _Global else ("torch", obj.name)
            self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode())
            self.memoize(obj)
            return
        super().save(obj, save_persistent_id)

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if type(obj) is Size:
            return _g("torch", "Size"), (tuple(obj),)
        if type(obj) is Device:
            kind = "cpu" if obj.type == "numpy" else obj.type
            return _g("torch", "device"), (kind,) if obj.index is None else (kind, obj.index)
        return NotImplemented

    def _tensor(self, t: Tensor):
        from ..nn.parameter import Parameter
        if isinstance(t, Parameter):
            return (_g("torch._utils", "_rebuild_parameter"),
                    (t.detach(), bool(t.requires_grad), OrderedDict()))
        if t.dtype.name not in _STORAGE_OF:
            raise pickle.PicklingError(f"plugtorch.save: tensors of dtype {t.dtype} cannot be stored "
                                       "in torch's format")
        host = t.detach().cpu()
        # numpy() refuses bfloat16 (as torch's): its bits, viewed as ml_dtypes' bfloat16
        array = host.view(int16).numpy().view(ml_dtypes.bfloat16) if t.dtype is bfloat16 else host.numpy()
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            array = array.copy(order="C")
        storage = _StorageOut(str(len(self.storages)), array, _location(t))
        self.storages.append(storage)
        strides = tuple(s // array.itemsize for s in array.strides) if array.size else \
            _contiguous_strides(array.shape)
        args: tuple = (storage, 0, tuple(array.shape), strides, bool(t.requires_grad), OrderedDict())
        if type(t) is Tensor:
            return _g("torch._utils", "_rebuild_tensor_v2"), args
        # a Tensor subclass pickles as torch pickles one: rebuilt as a Tensor, then given its class
        return (_g("torch._tensor", "_rebuild_from_type_v2"),
                (_g("torch._utils", "_rebuild_tensor_v2"), type(t), args, None))


def _contiguous_strides(shape) -> tuple[int, ...]:
    strides, n = [], 1
    for s in reversed(shape):
        strides.append(n)
        n *= max(s, 1)
    return tuple(reversed(strides))


def write_torch_zip(obj, fh, protocol: int = PROTOCOL, archive: str = "archive") -> None:
    """Pickle ``obj`` into ``fh`` as a ``torch.save`` zip archive (see the module docstring)."""
    buf = io.BytesIO()
    pickler = _Pickler(buf, protocol)
    pickler.dump(obj)
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(f"{archive}/data.pkl", buf.getvalue())
        zf.writestr(f"{archive}/byteorder", "little")
        for storage in pickler.storages:
            array = storage.array
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            with zf.open(f"{archive}/data/{storage.key}", "w", force_zip64=True) as member:
                member.write(array.reshape(-1).view(np.uint8).data)
        zf.writestr(f"{archive}/version", "3\n")
        zf.writestr(f"{archive}/.data/serialization_id",
                    str(struct.unpack("<Q", os.urandom(8))[0]).rjust(20, "0"))
