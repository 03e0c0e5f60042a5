"""Reading PyTorch's ``.pt`` checkpoints (``torch.save`` since 1.6) without running their code.

Such a file is a zip archive: ``<name>/data.pkl`` is a pickle of the object with each
tensor's storage replaced by a reference, and ``<name>/data/<key>`` holds that storage's
raw bytes. :mod:`.torch_pickle` unpickles the pickle into plain data and placeholders without
running any of it (what ``torch.load(weights_only=True)`` accepts is read, the rest is an
:class:`UnsafeCheckpointError`); this module reads the records, and turns the placeholders
into plugtorch objects. ``torch`` is not imported.

Tensors come back as plugtorch tensors viewing their storage, as in PyTorch: tensors saved as
views of one storage share its memory again, and a stride-0 view of four bytes stays four bytes
however large its shape. Each storage is read once, so what a load allocates is bounded by the
archive's records, never by what the pickle claims. bfloat16 storages are read through their
bits as ml_dtypes' bfloat16 (NumPy has none) and load as plugtorch.bfloat16. Before
unpickling, :mod:`.pickle_scan` checks the pickle for lengths, memo indices and nesting
that would make the unpickler itself allocate or recurse without bound. A
damaged or hostile archive is refused with what was wrong with it, never a bare zipfile error.
"""
from __future__ import annotations

import collections
import functools
import io
import pickle
import zipfile
import zlib

import ml_dtypes
import numpy as np

from ..core.dtypes import bfloat16, dtype_from_name
from ..core.errors import BackendUnavailableError
from ..core.ops.creation import from_numpy
from .pickle_scan import scan
from .torch_pickle import (
    _DTYPE_ALIASES,
    _DTYPES,
    ALLOWED,
    UnsafeCheckpointError,
    _DType,
    _rebuild_tensor_v2,
    _show,
    _Storage,
    _StorageType,
    _TensorRef,
    _Unpickler,
    user_allowed_globals,
)

__all__ = ["UnsafeCheckpointError", "is_torch_zip", "load_torch_zip"]


def is_torch_zip(names) -> bool:
    return any(n == "data.pkl" or n.endswith("/data.pkl") for n in names)


# Copying tensors to another device copies each view apart (plugtorch has no strided views
# there), so overlapping views would multiply the storages: this many times them is allowed.
_DEVICE_COPY_FACTOR, _DEVICE_COPY_SLACK = 4, 64 << 20
# torch writes records stored and reads deflated ones too; other methods (bzip2, lzma) can
# expand a few bytes into gigabytes, and torch cannot read them either.
_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FLAGS_REFUSED = 0x1 | 0x20 | 0x40  # encrypted, compressed patch data, strongly encrypted


class _Damaged(UnsafeCheckpointError):
    """A record that cannot be read as torch.save writes it (torch.load could not either)."""


class _Reader:
    def __init__(self, zf: zipfile.ZipFile, name: str, pkl: str, map_location):
        self.zf, self.name, self.map_location = zf, name, map_location
        self.prefix = pkl[:-len("data.pkl")]
        self.archive_bytes = zf.fp.seek(0, io.SEEK_END) if zf.fp is not None else 0
        self.byteorder = "little"
        self._storages: dict[str, _Storage] = {}
        self.stored_bytes = self.copied_bytes = 0
        self.user_globals = user_allowed_globals()

    def read(self, record: str) -> bytes:
        """A record's bytes, or a refusal saying what is wrong with it (never a zipfile error)."""
        try:
            info = self.zf.getinfo(record)
        except KeyError:
            raise _Damaged(f"{record} is missing from the archive") from None
        if info.compress_type not in _METHODS:
            raise _Damaged(
                f"{record} is compressed with zip method {info.compress_type}; only stored and "
                "deflated records are read (torch.save writes them stored)")
        if info.flag_bits & _FLAGS_REFUSED:
            raise _Damaged(f"{record} is encrypted or patched (zip flags {info.flag_bits:#x}), "
                           "which torch.save never writes")
        # zipfile asks the file for as many bytes as the record claims before finding out there
        # are fewer: a claim beyond the archive would reserve gigabytes for nothing
        if not 0 <= info.header_offset <= info.header_offset + info.compress_size <= self.archive_bytes:
            raise _Damaged(
                f"{record} claims {info.compress_size} bytes from byte {info.header_offset} of an "
                f"archive of {self.archive_bytes}")
        try:
            return self.zf.read(info)
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OverflowError,
                NotImplementedError) as e:
            raise _Damaged(f"{record} cannot be read ({type(e).__name__}: {e})") from None

    def read_byteorder(self) -> None:
        record = self.prefix + "byteorder"
        if record in self.zf.NameToInfo:
            self.byteorder = self.read(record).decode("latin1").strip()
            if self.byteorder not in ("little", "big"):
                raise _Damaged(f"unknown byte order {_show(self.byteorder)}")

    def storage(self, key: str, dtype: str, numel: int, location: str = "cpu") -> _Storage:
        if key not in self._storages:
            self._storages[key] = _Storage(self, key, dtype, numel, location)
        return self._storages[key]

    def storage_bytes(self, key: str, dtype: str, numel: int) -> np.ndarray:
        record = f"{self.prefix}data/{key}"
        raw = self.read(record)
        itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize  # (np.dtype: no bfloat16)
        if len(raw) < numel * itemsize:
            raise _Damaged(f"storage {record} holds {len(raw)} bytes, fewer than its "
                           f"{numel} elements of {dtype} need")
        order = "<" if self.byteorder == "little" else ">"
        if dtype == "bfloat16":  # ml_dtypes' bfloat16, read through its bits
            out = np.frombuffer(raw, dtype=order + "u2", count=numel).astype(np.uint16).view(ml_dtypes.bfloat16)
        elif dtype == "bool":
            out = np.frombuffer(raw, dtype=np.uint8, count=numel).astype(np.bool_)
        else:
            out = np.frombuffer(raw, dtype=order + np.dtype(dtype).str[1:], count=numel).astype(dtype)
        self.stored_bytes += out.nbytes
        return out

    def tensor(self, ref: _TensorRef):
        if ref.array.dtype == _BFLOAT16:  # from_numpy takes NumPy's own dtypes (as torch's): its bits
            t = from_numpy(ref.array.view(np.int16)).view(bfloat16)
        else:
            t = from_numpy(ref.array)
        if self.map_location is None and ref.location != "cpu":
            # as torch.load: back on the device it was saved from, unless map_location says
            try:
                return self._on(t, ref, ref.location)
            except BackendUnavailableError as e:
                raise BackendUnavailableError(
                    f"{self.name}: a tensor was saved on '{ref.location}', which cannot be used "
                    f"here ({e}). On a machine without it, load the file with "
                    "plugtorch.load(..., map_location='cpu')") from None
        return self._on(t, ref, self.map_location)

    def _on(self, t, ref: _TensorRef, device):
        if device is not None and str(device) not in ("cpu", t.backend):
            self.copied_bytes += ref.array.nbytes
            if self.copied_bytes > _DEVICE_COPY_FACTOR * self.stored_bytes + _DEVICE_COPY_SLACK:
                raise UnsafeCheckpointError(
                    f"moving its tensors to {device} would copy {self.copied_bytes} "
                    f"bytes or more out of {self.stored_bytes} bytes of storage: its tensors "
                    "overlap (stride 0, or many views of one storage), and each one moved is a "
                    "copy. Load it with map_location='cpu', where views stay views, and move "
                    "the tensors you need")
            t = t.to(device=device)
        if ref.parameter:
            from ..nn.parameter import Parameter
            return Parameter(t, requires_grad=ref.requires_grad)
        if ref.requires_grad and t.is_floating_point():
            t.requires_grad_(True)
        return t


_MUTABLE = (list, dict, collections.OrderedDict, set)


def _finish(root, reader: _Reader):
    """Replace placeholders with plugtorch objects; refuse anything a state dict cannot hold
    unless a global the user allowed (add_safe_globals) built it, or is it.

    No recursion through lists, dicts and sets: their nesting is not bounded (a pickle can fill
    a list after nesting it), so each gets an empty twin at once and is filled from a work list.
    Tuples and frozensets nest only as deep as pickle_scan allowed, and are built children first.
    """
    done: dict[int, object] = {}  # id(placeholder) -> what it became; ``root`` keeps ids unique
    to_fill: list = []
    trusted = list(reader.user_globals.values())
    trusted_types = tuple(g for g in trusted if isinstance(g, type))

    def single(obj):
        """What ``obj`` becomes, for anything but a tuple or frozenset."""
        if obj is None or isinstance(obj, (bool, int, float, complex, bytes)):
            return obj
        if isinstance(obj, _DType):
            name = _DTYPE_ALIASES.get(obj, str(obj))
            if name not in _DTYPES:
                raise UnsafeCheckpointError(f"torch.{obj}: plugtorch has no such dtype")
            return dtype_from_name(name)
        if type(obj) is str:
            return obj
        if id(obj) in done:
            return done[id(obj)]
        if isinstance(obj, _TensorRef):
            out = reader.tensor(obj)
        elif type(obj) in _MUTABLE:
            out = type(obj)()
            to_fill.append((obj, out))
        elif isinstance(obj, trusted_types) or any(obj is g for g in trusted):
            out = obj  # the user's own object: tensors among its attributes are converted in place
            attrs = getattr(obj, "__dict__", None)
            if type(attrs) is dict and not isinstance(obj, type):
                to_fill.append((dict(attrs), attrs))
        else:
            raise UnsafeCheckpointError(f"it holds a {type(obj).__name__}, which a weights-only "
                                        "checkpoint cannot contain")
        done[id(obj)] = out
        return out

    def convert(obj):
        if type(obj) not in (tuple, frozenset):
            return single(obj)
        todo = [obj]
        while todo:
            top = todo[-1]
            if id(top) in done:
                todo.pop()
                continue
            inner = [v for v in top if type(v) in (tuple, frozenset) and id(v) not in done]
            if inner:
                todo.extend(inner)
                continue
            todo.pop()
            done[id(top)] = type(top)(done[id(v)] if type(v) in (tuple, frozenset) else single(v)
                                      for v in top)
        return done[id(obj)]

    out = convert(root)
    while to_fill:
        source, target = to_fill.pop()
        if type(target) is list:
            target.extend(convert(v) for v in source)
        elif type(target) is set:
            target.update(convert(v) for v in source)
        else:
            for k, v in source.items():
                target[convert(k)] = convert(v)
    return out


class _FullUnpickler(pickle.Unpickler):
    """``weights_only=False``: any global, as ``torch.load`` would import it, with torch's names
    mapped onto plugtorch's (see :func:`resolve_torch_global`) and tensors built at once."""

    def __init__(self, fh, reader: _Reader):
        super().__init__(fh)
        self.reader = reader
        self._restricted = _Unpickler(io.BytesIO(b""), reader)

    def find_class(self, module, name):
        key = (module, name)
        if key in _TENSOR_BUILDERS:
            return functools.partial(_TENSOR_BUILDERS[key], self.reader)
        found = ALLOWED.get(key)
        if isinstance(found, _DType):
            return dtype_from_name(_DTYPE_ALIASES.get(found, str(found)))
        if isinstance(found, _StorageType):  # what persistent_load expects
            return found
        if module == "torch" or module.startswith("torch."):
            return resolve_torch_global(module, name)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self._restricted.persistent_load(pid)


def resolve_torch_global(module: str, name: str):
    """``torch.<m>.<name>`` in a pickle -> ``plugtorch.<m>.<name>``: plugtorch keeps torch's
    module layout for what it implements, so a model pickled by ``torch.save(model)`` loads as
    plugtorch's classes of the same names. What plugtorch lacks is an error naming it."""
    import importlib
    ours = "plugtorch" + module[len("torch"):]
    try:
        obj = importlib.import_module(ours)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise pickle.UnpicklingError(
            f"the file refers to {module}.{name}, and plugtorch has no {ours}.{name} to load it "
            "as. plugtorch.load maps torch's classes onto plugtorch's of the same module and "
            "name; load the file with torch and save its state_dict() instead") from None
    return obj


class _Builders:
    """torch's tensor rebuild functions for the full unpickler: plugtorch tensors at once."""

    @staticmethod
    def tensor_v2(reader, *args):
        return reader.tensor(_rebuild_tensor_v2(*args))

    @staticmethod
    def parameter(reader, data, requires_grad, backward_hooks=None, state=None):
        from ..nn.parameter import Parameter
        return Parameter(data, requires_grad=bool(requires_grad))

    @staticmethod
    def from_type_v2(reader, func, new_type, args, state):
        t = func(*args)  # func is the bound _rebuild_tensor_v2 builder
        from ..core.tensor import Tensor
        from ..nn.parameter import Parameter
        if new_type is Parameter:
            t = Parameter(t, requires_grad=t.requires_grad)
        elif new_type is not type(t) and isinstance(new_type, type) and issubclass(new_type, Tensor):
            t = t._as_subclass(new_type)
        if state:
            for k, v in (state.items() if isinstance(state, dict) else ()):
                setattr(t, k, v)
        return t


_TENSOR_BUILDERS = {
    ("torch._utils", "_rebuild_tensor_v2"): _Builders.tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _Builders.parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _Builders.parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _Builders.from_type_v2,
}


def load_torch_zip(zf: zipfile.ZipFile, name: str, map_location=None, weights_only: bool = True):
    """The object in a ``torch.save`` zip archive, read without running any of its code.

    Whatever the archive holds, this returns or raises :class:`UnsafeCheckpointError`: a damaged
    or hostile file is refused with what was wrong, never a bare zipfile, pickle or memory error.
    With ``weights_only=False`` the pickle is trusted and unpickled as ``torch.load`` would
    (:class:`_FullUnpickler`); only a damaged archive is still an UnsafeCheckpointError.
    """
    names = zf.namelist()
    pkls = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
    if any(n.endswith("constants.pkl") or "/code/" in n for n in names):
        raise UnsafeCheckpointError(
            f"{name} is a TorchScript archive (torch.jit.save), which holds code; plugtorch.load "
            "reads tensors only. Save the model's state_dict() with torch.save instead.")
    if len(pkls) != 1:
        raise UnsafeCheckpointError(f"{name}: expected one data.pkl in the archive, found "
                                    f"{_show(pkls)}")
    reader = _Reader(zf, name, pkls[0], map_location)
    if not weights_only:
        try:
            reader.read_byteorder()
            return _FullUnpickler(io.BytesIO(reader.read(pkls[0])), reader).load()
        except _Damaged as e:
            raise UnsafeCheckpointError(f"{name}: not a readable PyTorch checkpoint: {e}. The file "
                                        "is damaged, or was not written by torch.save") from None
    try:
        reader.read_byteorder()
        data = reader.read(pkls[0])
        try:
            scan(data)
        except ValueError as e:
            raise UnsafeCheckpointError(f"its pickle cannot be read safely: {e}") from None
        raw = _Unpickler(io.BytesIO(data), reader).load()
        out = _finish(raw, reader)
    except _Damaged as e:
        raise UnsafeCheckpointError(f"{name}: not a readable PyTorch checkpoint: {e}. The file is "
                                    "damaged, or was not written by torch.save") from None
    except UnsafeCheckpointError as e:
        advice = "" if "weights_only=False" in str(e) else (
            " If you trust the file, load it with torch.load and re-save its state_dict().")
        raise UnsafeCheckpointError(f"{name}: refused: {e}.{advice}") from None
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, IndexError, KeyError,
            AttributeError) as e:
        raise UnsafeCheckpointError(f"{name}: not a readable PyTorch checkpoint "
                                    f"({type(e).__name__}: {e})") from None
    return out
