"""Reading PyTorch's ``.pt`` checkpoints (``torch.save`` since 1.6) without running their code.

Such a file is a zip archive: ``<name>/data.pkl`` is a pickle of the object with each
tensor's storage replaced by a reference, and ``<name>/data/<key>`` holds that storage's
raw bytes. Unpickling can call any function a file names, so this reader lets the pickle
name only a short list of things (``ALLOWED``: torch's tensor rebuild functions, storage
types, dtypes, ``OrderedDict``, ``torch.Size``...), each mapped to a function of ours that
builds plain data, never to the real ``torch`` object. Anything else is refused before it
is looked up, so nothing from the file ever runs: what ``torch.load(weights_only=True)``
accepts is read, the rest is an :class:`UnsafeCheckpointError`. ``torch`` is not imported.

Tensors come back as plugtorch tensors with their own memory (views into one storage are
copied apart); bfloat16, which NumPy lacks, is widened exactly to float32.
"""
from __future__ import annotations

import collections
import io
import pickle
import warnings
import zipfile

import numpy as np

from ..core.dtypes import dtype_from_name
from ..core.ops.creation import from_numpy

__all__ = ["is_torch_zip", "load_torch_zip"]

_STORAGES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
             "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
             "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
             "BoolStorage": "bool"}
_DTYPES = {"float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}


class UnsafeCheckpointError(RuntimeError):
    """A file plugtorch.load refuses because reading it would mean running code from it."""


def is_torch_zip(names) -> bool:
    return any(n == "data.pkl" or n.endswith("/data.pkl") for n in names)


# -- placeholders: what the pickle builds, checked and turned into tensors afterwards ------

class _Storage:
    """A storage the pickle referred to: its bytes, read from the archive on first use."""

    __slots__ = ("reader", "key", "dtype", "numel", "_array")

    def __init__(self, reader, key: str, dtype: str, numel: int):
        self.reader, self.key, self.dtype, self.numel = reader, key, dtype, numel
        self._array = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = self.reader.storage_bytes(self.key, self.dtype, self.numel)
        return self._array

    def __setstate__(self, state):
        raise UnsafeCheckpointError("the pickle tries to set attributes on a storage")


class _TensorRef:
    __slots__ = ("array", "requires_grad", "parameter")

    def __init__(self, array: np.ndarray, requires_grad: bool, parameter: bool = False):
        self.array, self.requires_grad, self.parameter = array, requires_grad, parameter

    def __setstate__(self, state):
        raise UnsafeCheckpointError("the pickle tries to set attributes on a tensor")


def _int(value, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnsafeCheckpointError(f"malformed tensor: {what} is {value!r}, not an int")
    return value


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    if not isinstance(storage, _Storage):
        raise UnsafeCheckpointError(f"malformed tensor: its storage is a {type(storage).__name__}")
    offset = _int(storage_offset, "the storage offset")
    size = tuple(_int(s, "a size") for s in size)
    stride = tuple(_int(s, "a stride") for s in stride)
    if len(size) != len(stride) or offset < 0 or min(size + stride, default=0) < 0:
        raise UnsafeCheckpointError(f"malformed tensor: size {size}, stride {stride}, offset {offset}")
    base = storage.array()
    if 0 not in size:  # the furthest element must lie inside the storage: never read past it
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= storage.numel:
            raise UnsafeCheckpointError(
                f"malformed tensor: size {size} and stride {stride} at offset {offset} reach "
                f"element {last} of a storage of {storage.numel}")
        view = np.lib.stride_tricks.as_strided(base[offset:], size,
                                               [s * base.itemsize for s in stride], writeable=False)
    else:
        view = np.empty(size, dtype=base.dtype)
    return _TensorRef(np.array(view, copy=True, order="C"), bool(requires_grad))


def _rebuild_parameter(data, requires_grad, backward_hooks=None, state=None):
    if not isinstance(data, _TensorRef):
        raise UnsafeCheckpointError(f"malformed parameter: its data is a {type(data).__name__}")
    return _TensorRef(data.array, bool(requires_grad), parameter=True)


def _rebuild_from_type_v2(func, new_type, args, state):
    if func is not _rebuild_tensor_v2 or new_type not in (_TENSOR_TYPE, _PARAMETER_TYPE):
        raise UnsafeCheckpointError("a tensor subclass other than torch.Tensor / nn.Parameter")
    t = func(*args)
    return _rebuild_parameter(t, t.requires_grad) if new_type is _PARAMETER_TYPE else t


def _latin1_bytes(text, encoding="latin1"):
    # protocol 2 spells bytes as _codecs.encode(str, "latin1"); any other codec is refused
    if encoding != "latin1" or not isinstance(text, str):
        raise UnsafeCheckpointError(f"_codecs.encode with encoding {encoding!r}")
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


ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch", "Tensor"): _TENSOR_TYPE,
    ("torch.nn.parameter", "Parameter"): _PARAMETER_TYPE,
    ("torch", "Size"): _size,
    ("torch", "device"): str,
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
            raise UnsafeCheckpointError(
                f"its pickle asks for {module}.{name}, which is not a tensor, container, number or "
                "string. plugtorch.load reads only what torch.load(weights_only=True) accepts and "
                "looked nothing up, so no code from the file ran")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise UnsafeCheckpointError(f"unknown persistent reference {pid!r:.80}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str):
            raise UnsafeCheckpointError(f"malformed storage reference {pid!r:.80}")
        return self.reader.storage(key, _STORAGES[storage_type], _int(numel, "a storage size"))


class _Reader:
    def __init__(self, zf: zipfile.ZipFile, name: str, pkl: str, map_location):
        self.zf, self.name, self.map_location = zf, name, map_location
        self.prefix = pkl[:-len("data.pkl")]
        order = self.prefix + "byteorder"
        self.byteorder = zf.read(order).decode().strip() if order in zf.namelist() else "little"
        if self.byteorder not in ("little", "big"):
            raise UnsafeCheckpointError(f"unknown byte order {self.byteorder!r}")
        self._storages: dict[str, _Storage] = {}
        self.widened = False

    def storage(self, key: str, dtype: str, numel: int) -> _Storage:
        if key not in self._storages:
            self._storages[key] = _Storage(self, key, dtype, numel)
        return self._storages[key]

    def storage_bytes(self, key: str, dtype: str, numel: int) -> np.ndarray:
        record = f"{self.prefix}data/{key}"
        try:
            raw = self.zf.read(record)
        except KeyError:
            raise UnsafeCheckpointError(f"storage {record} is missing from the archive") from None
        itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
        if len(raw) < numel * itemsize:
            raise UnsafeCheckpointError(f"storage {record} holds {len(raw)} bytes, fewer than its "
                                        f"{numel} elements of {dtype} need")
        order = "<" if self.byteorder == "little" else ">"
        if dtype == "bfloat16":  # the top half of a float32: widening is exact
            self.widened = True
            half = np.frombuffer(raw, dtype=order + "u2", count=numel).astype(np.uint32)
            return (half << 16).view(np.float32)
        if dtype == "bool":
            return np.frombuffer(raw, dtype=np.uint8, count=numel).astype(np.bool_)
        return np.frombuffer(raw, dtype=order + np.dtype(dtype).str[1:], count=numel).astype(dtype)

    def tensor(self, ref: _TensorRef):
        t = from_numpy(ref.array)
        if self.map_location is not None and str(self.map_location) not in ("cpu", t.backend):
            t = t.to(device=self.map_location)
        if ref.parameter:
            from ..nn.parameter import Parameter
            return Parameter(t, requires_grad=ref.requires_grad)
        if ref.requires_grad and t.is_floating_point():
            t.requires_grad_(True)
        return t


def _finish(obj, reader: _Reader, memo: dict):
    """Replace placeholders with plugtorch objects; refuse anything a state dict cannot hold."""
    key = id(obj)
    if key in memo:
        return memo[key]
    if obj is None or isinstance(obj, (bool, int, float, complex, bytes)):
        return obj
    if isinstance(obj, _DType):
        name = _DTYPE_ALIASES.get(obj, str(obj))
        if name not in _DTYPES:
            raise UnsafeCheckpointError(f"torch.{obj}: plugtorch has no such dtype")
        return dtype_from_name(name)
    if isinstance(obj, str) and type(obj) is str:
        return obj
    if isinstance(obj, _TensorRef):
        out = reader.tensor(obj)
    elif type(obj) in (dict, collections.OrderedDict):
        out = type(obj)()
        memo[key] = out
        for k, v in obj.items():
            out[_finish(k, reader, memo)] = _finish(v, reader, memo)
    elif type(obj) is list:
        out = []
        memo[key] = out
        out.extend(_finish(v, reader, memo) for v in obj)
    elif type(obj) in (tuple, set, frozenset):
        out = type(obj)(_finish(v, reader, memo) for v in obj)
    else:
        raise UnsafeCheckpointError(f"it holds a {type(obj).__name__}, which a weights-only "
                                    "checkpoint cannot contain")
    memo[key] = out
    return out


def load_torch_zip(zf: zipfile.ZipFile, name: str, map_location=None):
    """The object in a ``torch.save`` zip archive, read without running any of its code."""
    names = zf.namelist()
    pkls = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
    if any(n.endswith("constants.pkl") or "/code/" in n for n in names):
        raise UnsafeCheckpointError(
            f"{name} is a TorchScript archive (torch.jit.save), which holds code; plugtorch.load "
            "reads tensors only. Save the model's state_dict() with torch.save instead.")
    if len(pkls) != 1:
        raise UnsafeCheckpointError(f"{name}: expected one data.pkl in the archive, found {pkls}")
    reader = _Reader(zf, name, pkls[0], map_location)
    try:
        raw = _Unpickler(io.BytesIO(zf.read(pkls[0])), reader).load()
        out = _finish(raw, reader, {})
    except UnsafeCheckpointError as e:
        raise UnsafeCheckpointError(f"{name}: refused: {e}. If you trust the file, load it with "
                                    "torch.load and re-save its state_dict().") from None
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, IndexError, KeyError,
            AttributeError) as e:
        raise UnsafeCheckpointError(f"{name}: not a readable PyTorch checkpoint "
                                    f"({type(e).__name__}: {e})") from None
    if reader.widened:
        warnings.warn(f"{name}: bfloat16 tensors were widened to float32 (exactly; plugtorch has "
                      "no bfloat16)", UserWarning, stacklevel=4)
    return out
