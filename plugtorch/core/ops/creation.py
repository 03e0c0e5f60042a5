"""Tensor creation: from host data, constants, ranges and random numbers."""
from __future__ import annotations

import builtins

from ..device import default_backend, get_backend
from ..dispatch import wrap
from ..dtypes import bool_, float64, get_default_dtype, int64
from ..dtypes import dtype as _dtype
from ..optable import public
from ..plugins import get_registry
from ..random import default_generator
from ..tensor import Tensor


def _backend_for(device, data=None):
    if device is not None:
        return get_backend(device)
    if data is not None and not isinstance(data, (list, tuple, builtins.int, builtins.float, builtins.bool)):
        for b in get_registry().backends.values():
            if b.is_native(data) and b.available:  # the cheap test first: availability may probe
                return b
    return default_backend()


def _check_dtype(dtype):
    if dtype is not None and not isinstance(dtype, _dtype):
        raise TypeError(f"dtype must be a plugtorch dtype such as plugtorch.float32, got {dtype!r}")


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, builtins.int) or isinstance(s, builtins.bool):
            raise TypeError(f"size must be a tuple of ints, but got an element of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(s)
    return tuple(out)


@public("plugtorch")
def tensor(data, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, NumPy or native arrays)."""
    _check_dtype(dtype)
    if isinstance(data, Tensor):
        t = data.detach().to(device=device, dtype=dtype, copy=True)
        return _finish(t, requires_grad)
    b = _backend_for(device, data)
    from_python = not hasattr(data, "dtype")
    if isinstance(data, (list, tuple)):
        _check_nested(data)
    arr = b.primitives["from_host"](data, dtype)
    arr = b.primitives["copy"](arr)
    t = wrap(arr, b)
    if dtype is None and from_python and t.dtype is float64:
        t = wrap(b.primitives["cast"](arr, get_default_dtype()), b)
    return _finish(t, requires_grad)


def _check_nested(data) -> None:
    """Ragged nested lists get torch's message, not the backend's (checked level by level)."""
    level, dim = [data], 0
    while level:
        seqs = [x for x in level if isinstance(x, (list, tuple))]
        if not seqs:
            return
        if len(seqs) != len(level):
            raise ValueError(f"expected a sequence at dim {dim} but found a number: nested lists "
                             "must be rectangular")
        n = len(seqs[0])
        for x in seqs:
            if len(x) != n:
                raise ValueError(f"expected sequence of length {n} at dim {dim} (got {len(x)})")
        level = [y for x in seqs for y in x]
        dim += 1


@public("plugtorch")
def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like ``tensor`` but shares memory with ``data`` when backend and dtype allow."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    _check_dtype(dtype)
    b = _backend_for(device, data)
    from_python = not hasattr(data, "dtype")
    t = wrap(b.primitives["from_host"](data, dtype), b)
    if dtype is None and from_python and t.dtype is float64:
        t = t.to(get_default_dtype())
    return t


@public("plugtorch")
def from_numpy(ndarray) -> Tensor:
    """A tensor on the host backend ("cpu") sharing memory with a NumPy array, as torch's:
    writes through either are seen by the other; arrays of other types are refused."""
    from ..dlpack import check_numpy
    check_numpy(ndarray)
    b = get_backend("cpu")
    return wrap(b.primitives["from_host"](ndarray, None), b)


@public("plugtorch")
def from_dlpack(ext_tensor, *, device=None, copy=None) -> Tensor:
    """A tensor from any DLPack producer (NumPy, PyTorch, CuPy, ...) or capsule, sharing its
    memory where the producer allows (torch.from_dlpack's arguments; see core/dlpack.py)."""
    from ..dlpack import from_dlpack as impl
    return impl(ext_tensor, device=device, copy=copy)


def _const(size, value, dtype, device, requires_grad):
    _check_dtype(dtype)
    b = _backend_for(device)
    size = _size(size)
    if value == 0:
        arr = b.primitives["zeros"](size, dtype)
    else:
        arr = b.primitives["full"](size, value, dtype)
    return _finish(wrap(arr, b), requires_grad)


@public("plugtorch")
def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _const(size, 0, dtype or get_default_dtype(), device, requires_grad)


@public("plugtorch")
def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _const(size, 1, dtype or get_default_dtype(), device, requires_grad)


@public("plugtorch")
def empty(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    # Zero-filled: uninitialised memory buys nothing measurable here and hides bugs.
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def _dtype_of_scalar(v):
    if isinstance(v, builtins.bool):
        return bool_
    if isinstance(v, builtins.int):
        return int64
    return get_default_dtype()


@public("plugtorch")
def full(size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _const((size,) if isinstance(size, builtins.int) else (tuple(size),), fill_value,
                  dtype or _dtype_of_scalar(fill_value), device, requires_grad)


def _like(input, dtype, device):
    return (dtype or input.dtype), (device if device is not None else input._backend.name)


def _const_like(input, value, dtype, device, requires_grad):
    """``_const`` at ``input``'s shape, dtype and backend unless told otherwise. Without a device,
    the backend is ``input``'s own object, not looked up by name (backward's seed gradient runs
    this once a step)."""
    if device is not None:
        dt, dev = _like(input, dtype, device)
        return _const((input.shape,), value, dt, dev, requires_grad)
    _check_dtype(dtype)
    b = input._backend
    dt = dtype or input.dtype
    shape = input._data.shape
    arr = b.primitives["zeros"](shape, dt) if value == 0 else b.primitives["full"](shape, value, dt)
    return _finish(wrap(arr, b), requires_grad)


@public("plugtorch")
def zeros_like(input, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _const_like(input, 0, dtype, device, requires_grad)


@public("plugtorch")
def ones_like(input, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _const_like(input, 1, dtype, device, requires_grad)


@public("plugtorch")
def empty_like(input, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return zeros_like(input, dtype=dtype, device=device, requires_grad=requires_grad)


@public("plugtorch")
def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _const_like(input, fill_value, dtype, device, requires_grad)


@public("plugtorch")
def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            f"arange(): upper bound and larger bound inconsistent with step sign "
            f"(start={start}, end={end}, step={step})"
        )
    _check_dtype(dtype)
    if dtype is None:
        floats = any(isinstance(v, builtins.float) for v in (start, end, step))
        dtype = get_default_dtype() if floats else int64
    b = _backend_for(device)
    return _finish(wrap(b.primitives["arange"](start, end, step, dtype), b), requires_grad)


@public("plugtorch")
def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if steps < 0:
        raise RuntimeError("linspace(): number of steps must be non-negative")
    dtype = dtype or get_default_dtype()
    if dtype is bool_:
        raise NotImplementedError('"linspace" not implemented for bool: evenly spaced values need '
                                  "a numeric dtype")
    if steps == 1:
        return full((1,), start, dtype=dtype, device=device, requires_grad=requires_grad)
    idx = arange(steps, dtype=float64, device=device)
    t = (idx * ((end - start) / (steps - 1)) + start).to(dtype)
    return _finish(t, requires_grad)


@public("plugtorch")
def eye(n, m=None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    _check_dtype(dtype)
    b = _backend_for(device)
    arr = b.primitives["eye"](n, n if m is None else m, dtype or get_default_dtype())
    return _finish(wrap(arr, b), requires_grad)


# -- random -------------------------------------------------------------------------

def _random(kind, size, generator, dtype, device, requires_grad, *args):
    _check_dtype(dtype)
    b = _backend_for(device)
    gen = (generator or default_generator).native(b)
    dtype = dtype or get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{kind}(): expected a floating point dtype, got {dtype.name}")
    arr = b.primitives[kind](gen, _size(size), *args, dtype)
    return _finish(wrap(arr, b), requires_grad)


@public("plugtorch")
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _random("uniform", size, generator, dtype, device, requires_grad, 0.0, 1.0)


@public("plugtorch")
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal samples."""
    return _random("normal", size, generator, dtype, device, requires_grad, 0.0, 1.0)


@public("plugtorch")
def rand_like(input, *, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return rand(input.shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


@public("plugtorch")
def randn_like(input, *, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    dt, dev = _like(input, dtype, device)
    return randn(input.shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


@public("plugtorch")
def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False) -> Tensor:
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size): low is 0
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    b = _backend_for(device)
    gen = (generator or default_generator).native(b)
    arr = b.primitives["randint"](gen, low, high, _size((size,)), dtype or int64)
    return _finish(wrap(arr, b), requires_grad)


@public("plugtorch")
def randperm(n, *, generator=None, dtype=None, device=None) -> Tensor:
    b = _backend_for(device)
    gen = (generator or default_generator).native(b)
    t = wrap(b.primitives["permutation"](gen, int(n)), b)
    return t if dtype is None or dtype is t.dtype else t.to(dtype)


# -- Tensor.new_*: the same device, and the same dtype unless given ---------------------------

@public("Tensor")
def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=dtype or self.dtype, device=device or self._backend.name,
                  requires_grad=requires_grad)


@public("Tensor")
def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    return zeros(*size, dtype=dtype or self.dtype, device=device or self._backend.name,
                 requires_grad=requires_grad)


@public("Tensor")
def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    return ones(*size, dtype=dtype or self.dtype, device=device or self._backend.name,
                requires_grad=requires_grad)


@public("Tensor")
def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    return empty(*size, dtype=dtype or self.dtype, device=device or self._backend.name,
                 requires_grad=requires_grad)


@public("Tensor")
def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or self.dtype, device=device or self._backend.name,
                requires_grad=requires_grad)
