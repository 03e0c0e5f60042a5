"""Tensor creation: from host data, constants, ranges and random numbers."""
from __future__ import annotations

import builtins
import warnings

from ..device import default_backend, get_backend
from ..dispatch import wrap
from ..dtypes import bool_, complex128, float64, get_default_dtype, int64, to_complex, to_real
from ..dtypes import dtype as _dtype
from ..optable import public
from ..plugins import get_registry
from ..random import VMAP_DRAW, Generator, default_generator
from ..tensor import Tensor


def _backend_for(device, data=None):
    if device is not None:
        return get_backend(device)
    if data is not None and not isinstance(data, (list, tuple, builtins.int, builtins.float, builtins.bool,
                                                  builtins.complex)):
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
    if dtype is None and from_python and t.dtype in (float64, complex128):
        # Python floats (complexes) take the default dtype (its complex twin), as in torch
        t = wrap(b.primitives["cast"](arr, to_complex(get_default_dtype()) if t.dtype is complex128
                                      else get_default_dtype()), b)
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
    if dtype is None and from_python and t.dtype in (float64, complex128):
        t = t.to(to_complex(get_default_dtype()) if t.dtype is complex128 else get_default_dtype())
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
def zeros(*sizes, size=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _const(_sizes("zeros", sizes, size), 0, dtype or get_default_dtype(), device, requires_grad)


@public("plugtorch")
def ones(*sizes, size=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _const(_sizes("ones", sizes, size), 1, dtype or get_default_dtype(), device, requires_grad)


@public("plugtorch")
def empty(*sizes, size=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    # Zero-filled: uninitialised memory buys nothing measurable here and hides bugs.
    return zeros(*_sizes("empty", sizes, size), dtype=dtype, device=device, requires_grad=requires_grad)


def _sizes(name, sizes, size):
    """The shape given positionally (``zeros(2, 3)``, ``zeros((2, 3))``) or as ``size=``, as torch takes it."""
    if size is None:
        return sizes
    if sizes:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    return (size,)


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
    # torch's CPU kernel: the ends in the dtype, the step in it (in float64 for integer dtypes),
    # the first half counted up from start and the second down from end, so both ends are exact
    exact = dtype.is_floating_point or dtype.is_complex
    calc = dtype if exact else float64

    def end_value(v):
        v = v.to(dtype) if isinstance(v, Tensor) else full((), v, dtype=dtype, device=device)
        return v.to(calc)
    first, last = end_value(start), end_value(end)
    step = (last - first) / (steps - 1)
    idx = arange(steps, dtype=calc, device=device)
    up, down = first + step * idx, last - step * ((steps - 1) - idx)
    from .elementwise import where  # elementwise builds on this module's constructors
    t = where(arange(steps, device=device) < steps // 2, up, down)
    t = t if exact else t.to(dtype)
    return _finish(t, requires_grad)


@public("plugtorch")
def eye(n, m=None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    _check_dtype(dtype)
    b = _backend_for(device)
    arr = b.primitives["eye"](n, n if m is None else m, dtype or get_default_dtype())
    return _finish(wrap(arr, b), requires_grad)


# -- random -------------------------------------------------------------------------

def _random(kind, size, generator, dtype, device, requires_grad, *args):
    if VMAP_DRAW[1] is not None:  # under plugtorch.func.vmap: its randomness= decides
        return VMAP_DRAW[1](_random, kind, size, generator, dtype, device, requires_grad, *args)
    _check_dtype(dtype)
    b = _backend_for(device)
    gen = (generator or default_generator).native(b)
    dtype = dtype or get_default_dtype()
    if dtype.is_complex and kind in ("uniform", "normal"):  # rand/randn: each part drawn as torch's
        return _finish(_complex_draw(kind, b, gen, _size(size), dtype), requires_grad)
    if not dtype.is_floating_point:
        raise RuntimeError(f"{kind}(): expected a floating point dtype, got {dtype.name}")
    arr = b.primitives[kind](gen, _size(size), *args, dtype)
    return _finish(wrap(arr, b), requires_grad)


def _complex_draw(kind, b, gen, size, dtype):
    """torch's complex rand/randn: the real and imaginary parts independent, uniform in [0, 1)
    (rand), or normal with variance 1/2 each, so that E|z|^2 = 1 (randn)."""
    from .complex import view_as_complex  # complex builds on this module's constructors
    scale = 0.5 ** 0.5 if kind == "normal" else 1.0
    low, high = (0.0, 1.0) if kind == "uniform" else (0.0, scale)
    parts = wrap(b.primitives[kind](gen, (*size, 2), low, high, to_real(dtype)), b)
    return view_as_complex(parts)


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


def _int_arg(name, pos, v):
    """torch's check of randint's ``low``/``high``: a Python int or an integral 0-d tensor."""
    if isinstance(v, Tensor) and v.ndim == 0 and not v.dtype.is_floating_point and v.dtype is not bool_:
        return v.item()
    if not isinstance(v, builtins.int) or isinstance(v, builtins.bool):
        raise TypeError(f"randint(): argument '{name}' (position {pos}) must be int, "
                        f"not {type(v).__name__}")
    return v


# What torch names each dtype in random_'s range errors; for floats, the mantissa digits
# past which not every integer is representable (torch warns there, see _check_random_range).
_C_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int",
            "int32": "int", "int64": "long int", "float16": "c10::Half", "float32": "float",
            "float64": "double"}
_DIGITS = {"float16": 11, "float32": 24, "float64": 53}
_BOUNDS = {"bool": (0, 1), "uint8": (0, 255), "int8": (-128, 127), "int16": (-2 ** 15, 2 ** 15 - 1),
           "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
           "float16": (-65504.0, 65504.0), "float32": (-3.4028234663852886e38, 3.4028234663852886e38),
           "float64": (-1.7976931348623157e308, 1.7976931348623157e308)}


def _check_random_range(low, high, dtype) -> None:
    """torch's checks of random_(from, to) on ``dtype``, in its order and words."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    name = dtype.name
    lo, hi = _BOUNDS[name]
    for what, v in (("from", low), ("to - 1", high - 1)):
        if not lo <= v <= hi:
            raise RuntimeError(f"{what} is out of bounds for {_C_NAMES[name]}")
    if dtype.is_floating_point:
        d = _DIGITS[name]
        for what, v in (("from", low), ("to - 1", high - 1)):
            if not -(2 ** d) <= v <= 2 ** d:
                warnings.warn(f"{what} is out of bounds [-(2^{d}), 2^{d}]. Due to precision "
                              f"limitations {_C_NAMES[name]} can support discrete uniform "
                              "distribution only within this range. This warning will become an "
                              "error in version 1.7 release, please fix the code in advance",
                              UserWarning, stacklevel=4)


def _randint(low, high, shape, generator, dtype, device, requires_grad):
    _check_dtype(dtype)
    dtype = dtype or int64
    _check_random_range(low, high, dtype)
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"randint(): argument 'generator' must be plugtorch.Generator, "
                        f"not {type(generator).__name__}")
    b = _backend_for(device)
    gen = (generator or default_generator).native(b)
    arr = b.primitives["randint"](gen, low, high, shape, dtype)
    return _finish(wrap(arr, b), requires_grad)


def _randint_size(size, pos):
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size' (position {pos}) must be tuple of ints, "
                        f"not {type(size).__name__}")
    return _size((size,))


@public("plugtorch")
def randint(*args, low=None, high=None, size=None, generator=None, out=None, dtype=None, layout=None,
            device=None, pin_memory=False, requires_grad=False) -> Tensor:
    """Integers drawn uniformly from [low, high): torch's two overloads, ``randint(high, size)``
    and ``randint(low, high, size)``, with any trailing arguments by keyword."""
    # Positional arguments fill the overload they fit; a lone number is ``high`` unless
    # ``high`` comes by keyword (``randint(low=1, size=s)`` names no high: an error, as torch's).
    if len(args) > 3:
        raise TypeError(f"randint() takes at most 3 positional arguments ({len(args)} given)")
    if len(args) == 2 and (isinstance(args[1], (tuple, list)) or size is None):
        args = (None, *args)  # randint(10, 3) is torch's randint(high, size) with a bad size
    elif len(args) == 1 and high is None:
        args = (None, *args)
    given = dict(zip(("low", "high", "size"), args))
    for name in given:
        if {"low": low, "high": high, "size": size}[name] is not None:
            raise TypeError(f"randint() got multiple values for argument '{name}'")
    low, high, size = given.get("low", low), given.get("high", high), given.get("size", size)
    if high is None or size is None:
        missing = [n for n, v in (("high", high), ("size", size)) if v is None]
        raise TypeError(f"randint() missing required argument(s) {', '.join(map(repr, missing))}: "
                        "call randint(high, size) or randint(low, high, size)")
    low = 0 if low is None else _int_arg("low", 1, low)
    high = _int_arg("high", 2 if "low" in given and given["low"] is not None else 1, high)
    size = _randint_size(size, 3 if len(args) == 3 and args[0] is not None else 2)
    t = _randint(low, high, size, generator, dtype, device, requires_grad)
    if out is not None:
        return out.copy_(t)
    return t


@public("plugtorch")
def randint_like(input, low=None, high=None, *, generator=None, memory_format=None, dtype=None,
                 layout=None, device=None, pin_memory=False, requires_grad=False) -> Tensor:
    """``randint`` at ``input``'s shape, dtype and device unless told otherwise:
    ``randint_like(x, high)`` or ``randint_like(x, low, high)``."""
    if high is None:
        low, high = None, low
    if high is None:
        raise TypeError("randint_like() missing required argument 'high': call "
                        "randint_like(input, high) or randint_like(input, low, high)")
    low = 0 if low is None else _int_arg("low", 2, low)
    high = _int_arg("high", 3 if low else 2, high)
    dt, dev = _like(input, dtype, device)
    return _randint(low, high, tuple(input.shape), generator, dt, dev, requires_grad)


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
