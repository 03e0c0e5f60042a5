"""Zero-copy exchange with NumPy, PyTorch, CuPy and any other DLPack producer or consumer.

Exporting is the tensor's: ``Tensor.__dlpack__`` / ``__dlpack_device__`` hand over the
backend's native array's own DLPack export, so ``torch.from_dlpack(t)`` and
``numpy.from_dlpack(t)`` share memory with ``t``. Importing (``plugtorch.from_dlpack``)
asks the producer which device its memory is on, then lets the array module of each
backend living there (``Backend.array_module.from_dlpack``: NumPy for host memory, CuPy for
CUDA) take it; the first that succeeds owns the tensor. No backend is named here: a new
backend whose array module speaks DLPack takes part by declaring ``array_module``.
"""
from __future__ import annotations

import warnings

import numpy as np

from .device import get_backend
from .dispatch import wrap
from .dtypes import ALL_DTYPES
from .plugins import get_registry
from .tensor import Tensor

__all__ = ["check_numpy", "from_dlpack"]

_KDL_CPU, _KDL_CUDA_HOST = 1, 3  # DLPack device types whose memory the host can read
_TORCH_ORDER = ("float64", "float32", "float16", "complex64", "complex128", "int64", "int32", "int16", "int8",
                "uint8", "bool")
_SUPPORTED = [n for n in _TORCH_ORDER if n in {d.name for d in ALL_DTYPES}]


def check_numpy(ndarray) -> None:
    """What ``from_numpy`` refuses, with torch's messages (and its warning for read-only arrays)."""
    if not isinstance(ndarray, np.ndarray):
        kind = type(ndarray)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
        raise TypeError(f"expected np.ndarray (got {name})")
    if not ndarray.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order. "
                         "Conversion between byte orders is currently not supported.")
    if ndarray.dtype.name not in _SUPPORTED:
        raise TypeError(f"can't convert np.ndarray of type numpy.{ndarray.dtype.type.__name__}. The "
                        f"only supported types are: {', '.join(_SUPPORTED[:-1])}, and {_SUPPORTED[-1]}.")
    if not ndarray.flags.writeable:
        warnings.warn("The given NumPy array is not writable, and plugtorch does not support "
                      "non-writable tensors: writing to this tensor will raise an error. You may want "
                      "to copy the array to protect its data or make it writable before converting "
                      "it to a tensor.", UserWarning, stacklevel=3)


class _Capsule:
    """A bare DLPack capsule (``torch.utils.dlpack.to_dlpack``); it cannot say where its memory
    is, so it is taken as host memory, the only kind a capsule is still commonly made for."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (_KDL_CPU, 0)


def _candidates(device_type: int):
    reg = get_registry()
    host = device_type in (_KDL_CPU, _KDL_CUDA_HOST)
    cpu = reg.resolve_name("cpu")
    found = [b for b in reg.backends.values() if b.available and b.host_memory == host]
    return sorted(found, key=lambda b: b.name != cpu), host


def from_dlpack(ext_tensor, *, device=None, copy=None) -> Tensor:
    """``plugtorch.from_dlpack``: see the module docstring; ``device`` (a plugtorch device) moves
    the result there afterwards, ``copy=True`` asks for a copy, ``copy=False`` forbids one."""
    if device is not None:
        t = from_dlpack(ext_tensor, copy=copy)
        if get_backend(device).name == t.backend:
            return t
        if copy is False:
            raise ValueError(f"from_dlpack: cannot move a tensor from {t.backend} to {device} "
                             "without copying. Set copy=None or copy=True.")
        return t.to(device=device)
    if isinstance(ext_tensor, Tensor):
        t = ext_tensor.detach()
        return t.clone() if copy else t
    if not hasattr(ext_tensor, "__dlpack__"):
        if type(ext_tensor).__name__ != "PyCapsule":
            raise TypeError("from_dlpack: expected an object with __dlpack__ (a NumPy array, a "
                            f"PyTorch or CuPy tensor, ...) or a DLPack capsule, got {type(ext_tensor)}")
        if copy is not None:
            raise ValueError("from_dlpack: copy is not supported when ext_tensor is already a "
                             "DLPack capsule")
        ext_tensor = _Capsule(ext_tensor)
    device_type = int(ext_tensor.__dlpack_device__()[0])
    backends, host = _candidates(device_type)
    errors = []
    for b in backends:
        consume = getattr(b.array_module, "from_dlpack", None)
        if consume is None:
            errors.append(f"{b.name}: its array module offers no from_dlpack")
            continue
        try:
            arr = consume(ext_tensor) if copy is None else consume(ext_tensor, copy=copy)
        except (BufferError, TypeError, ValueError, RuntimeError, NotImplementedError) as e:
            errors.append(f"{b.name}: {e}")
            continue
        if not b.is_native(arr):
            errors.append(f"{b.name}: its from_dlpack gave a {type(arr).__name__}, not its own array")
            continue
        try:
            b.dtype_of(arr)
        except KeyError:
            raise TypeError(f"from_dlpack: plugtorch has no dtype for {getattr(arr, 'dtype', '?')}; "
                            f"supported: {', '.join(_SUPPORTED)}") from None
        return wrap(arr, b)
    where = "host" if host else "device"
    raise BufferError(
        f"from_dlpack: no backend could take a {type(ext_tensor).__name__} in DLPack device type "
        f"{device_type} ({where} memory): "
        + ("; ".join(errors) if errors else f"no available backend keeps its arrays in {where} memory"))
