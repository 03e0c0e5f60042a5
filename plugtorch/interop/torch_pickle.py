"""The pickle inside a ``torch.save`` archive, unpickled without running any of it.

Unpickling can call any function a file names, so this unpickler lets the pickle name only a
short list of things (``ALLOWED``: torch's tensor rebuild functions, storage types, dtypes,
``OrderedDict``, ``torch.Size``...), each mapped to a function of ours that builds plain data or
a placeholder (``_Storage``, ``_TensorRef``, ``_DType``) for :mod:`.torch_checkpoint` to check
and turn into plugtorch objects, never to the real ``torch`` object. Anything else is refused
before it is looked up, so nothing from the file ever runs: what ``torch.load(weights_only=True)``
accepts is read, the rest is an :class:`UnsafeCheckpointError`. What the pickle's numbers could
make the unpickler itself allocate is checked before it runs, by :mod:`.pickle_scan`.
"""
from __future__ import annotations

import collections
import pickle
import reprlib
import sys

import numpy as np

_STORAGES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
             "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
             "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
             "BoolStorage": "bool"}
_DTYPES = {"float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}


class UnsafeCheckpointError(RuntimeError, pickle.UnpicklingError):
    """A file plugtorch.load refuses: reading it would run code from it, or it is damaged, or
    it states sizes that would make reading it take memory out of all proportion to its own.
    It is a ``pickle.UnpicklingError`` too, which is what ``torch.load`` raises."""


# -- globals the user trusts: torch.serialization.add_safe_globals' registry ----------------

_marked_safe_globals: list = []


def user_allowed_globals() -> dict:
    """``"module.qualname"`` -> object, for what add_safe_globals allowed (torch's naming)."""
    out = {}
    for entry in _marked_safe_globals:
        if isinstance(entry, tuple):
            if len(entry) != 2:
                raise ValueError("Expected tuple of length 2 (global, str of callable full path), "
                                 f"but got tuple of length: {len(entry)}")
            if type(entry[1]) is not str:
                raise TypeError("Expected second item in tuple to be str of callable full path, "
                                f"but got: {type(entry[1])}")
            out[entry[1]] = entry[0]
        else:
            out[f"{entry.__module__}.{entry.__qualname__}"] = entry
    return out


# -- placeholders: what the pickle builds, checked and turned into tensors afterwards ------

class _Storage:
    """A storage the pickle referred to: its bytes, read from the archive on first use."""

    __slots__ = ("reader", "key", "dtype", "numel", "location", "_array")

    def __init__(self, reader, key: str, dtype: str, numel: int, location: str = "cpu"):
        self.reader, self.key, self.dtype, self.numel = reader, key, dtype, numel
        self.location = location
        self._array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = self.reader.storage_bytes(self.key, self.dtype, self.numel)
        return self._array

    def __setstate__(self, state):
        raise UnsafeCheckpointError("the pickle tries to set attributes on a storage")


class _TensorRef:
    __slots__ = ("array", "requires_grad", "parameter", "location")

    def __init__(self, array: np.ndarray, requires_grad: bool, parameter: bool = False,
                 location: str = "cpu"):
        self.array, self.requires_grad, self.parameter = array, requires_grad, parameter
        self.location = location

    def __setstate__(self, state):
        raise UnsafeCheckpointError("the pickle tries to set attributes on a tensor")


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxstring, _SHOW.maxother = 3, 30, 30
_SHOW.maxtuple = _SHOW.maxlist = _SHOW.maxdict = _SHOW.maxset = _SHOW.maxfrozenset = 3


def _show(value) -> str:
    """A short repr of something from the pickle, which may be huge, shared or deeply nested."""
    if isinstance(value, int) and value.bit_length() > 64:  # repr of a huge int is refused
        return f"an int of {value.bit_length()} bits"
    return _SHOW.repr(value)


# Sizes, strides and offsets above this are no tensor's, and their byte counts overflow NumPy.
_LARGEST = sys.maxsize // 16


def _int(value, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnsafeCheckpointError(f"malformed tensor: {what} is {_show(value)}, not an int")
    if not -_LARGEST <= value <= _LARGEST:
        raise UnsafeCheckpointError(f"malformed tensor: {what} is {_show(value)}, larger than any "
                                    "tensor's")
    return value


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    if not isinstance(storage, _Storage):
        raise UnsafeCheckpointError(f"malformed tensor: its storage is a {type(storage).__name__}")
    offset = _int(storage_offset, "the storage offset")
    if not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)) or len(size) > 64:
        raise UnsafeCheckpointError(f"malformed tensor: size {_show(size)}, stride {_show(stride)}")
    size = tuple(_int(s, "a size") for s in size)
    stride = tuple(_int(s, "a stride") for s in stride)
    if len(size) != len(stride) or offset < 0 or min(size + stride, default=0) < 0:
        raise UnsafeCheckpointError(f"malformed tensor: size {size}, stride {stride}, offset {offset}")
    base = storage.array()
    if 0 in size:
        return _TensorRef(np.empty(size, dtype=base.dtype), bool(requires_grad),
                          location=storage.location)
    # the furthest element must lie inside the storage: never read past it
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.numel:
        raise UnsafeCheckpointError(
            f"malformed tensor: size {size} and stride {stride} at offset {offset} reach "
            f"element {last} of a storage of {storage.numel}")
    # A view of the storage, as torch.load gives: tensors saved as views of one storage share it
    # again, and a stride-0 view costs nothing however large its shape (copying one out could
    # turn four bytes into 16 GiB). Writes go to the storage; plugtorch, like torch, refuses
    # in-place writes to a tensor whose elements overlap.
    view = np.lib.stride_tricks.as_strided(base[offset:], size, [s * base.itemsize for s in stride])
    return _TensorRef(view, bool(requires_grad), location=storage.location)


def _rebuild_parameter(data, requires_grad, backward_hooks=None, state=None):
    if not isinstance(data, _TensorRef):
        raise UnsafeCheckpointError(f"malformed parameter: its data is a {type(data).__name__}")
    return _TensorRef(data.array, bool(requires_grad), parameter=True, location=data.location)


def _rebuild_from_type_v2(func, new_type, args, state):
    if func is not _rebuild_tensor_v2 or new_type not in (_TENSOR_TYPE, _PARAMETER_TYPE):
        raise UnsafeCheckpointError("a tensor subclass other than torch.Tensor / nn.Parameter")
    t = func(*args)
    return _rebuild_parameter(t, t.requires_grad) if new_type is _PARAMETER_TYPE else t


def _latin1_bytes(text, encoding="latin1"):
    # protocol 2 spells bytes as _codecs.encode(str, "latin1"); any other codec is refused
    if encoding != "latin1" or not isinstance(text, str):
        raise UnsafeCheckpointError(f"_codecs.encode with encoding {_show(encoding)}")
    return text.encode("latin1")


class _TorchType:
    """torch.Tensor / nn.Parameter as a type argument, never the class itself."""

    def __init__(self, name: str):
        self.name = name


_TENSOR_TYPE, _PARAMETER_TYPE = _TorchType("torch.Tensor"), _TorchType("torch.nn.Parameter")


class _DType(str):
    """A torch dtype named in the pickle (mapped to plugtorch's after unpickling)."""


class _StorageType(str):
    """A torch storage class named in a storage reference."""


def _size(dims=()):
    return tuple(dims)


def _device(kind, index=None) -> str:
    # torch.device pickles as ("cuda", 0) or ("cpu",); only a name and an index may come back
    # (str() of whatever the pickle passed could be a gigabyte-long repr)
    if not isinstance(kind, str) or not (index is None or type(index) is int):
        raise UnsafeCheckpointError(f"torch.device({_show(kind)}, {_show(index)}): a device is a "
                                    "name and an optional index")
    return kind if index is None else f"{kind}:{index}"


ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch", "Tensor"): _TENSOR_TYPE,
    ("torch.nn.parameter", "Parameter"): _PARAMETER_TYPE,
    ("torch", "Size"): _size,
    ("torch", "device"): _device,
    ("_codecs", "encode"): _latin1_bytes,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("__builtin__", "set"): set,  # protocol 2 spells builtins so
    ("__builtin__", "frozenset"): frozenset,
    **{("torch", name): _StorageType(name) for name in _STORAGES},
    **{("torch", name): _DType(name) for name in (*_DTYPES, "bfloat16", "float", "double", "long",
                                                   "half", "int", "short")},
}
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "long": "int64", "half": "float16",
                  "int": "int32", "short": "int16"}


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh, reader):
        super().__init__(fh)
        self.reader = reader

    def find_class(self, module, name):
        found = ALLOWED.get((module, name))
        if found is None:
            found = self.reader.user_globals.get(f"{module}.{name}")
        if found is None:
            raise UnsafeCheckpointError(
                f"its pickle asks for {module}.{name}, which is not a tensor, container, number or "
                "string. plugtorch.load reads only what torch.load(weights_only=True) accepts and "
                "looked nothing up, so no code from the file ran. This file can still be loaded, "
                "but do so only if you trust its source: (1) plugtorch.load(..., "
                "weights_only=False), which can run arbitrary code from it; or (2) allow that "
                f"global with plugtorch.serialization.add_safe_globals([{module}.{name}]) or the "
                f"plugtorch.serialization.safe_globals([{module}.{name}]) context manager")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise UnsafeCheckpointError(f"unknown persistent reference {_show(pid)}")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or \
                _int(numel, "a storage size") < 0 or not isinstance(location, str) or \
                len(location) > 64:
            raise UnsafeCheckpointError(f"malformed storage reference {_show(pid)}")
        return self.reader.storage(key, _STORAGES[storage_type], numel, location)
