"""The primitive table (``plugtorch.backend_api.PRIMITIVES``) over an array API namespace ``xp``.

Most primitives are one call into the standard. Where the standard has no function
for one, it is built from standard functions, and a comment says so: ``erf``
(special.py), random numbers (philox.py), NumPy-style advanced indexing, in-place
writes at integer indices, accumulating scatters, constant padding, sliding windows and
as_strided (indexing.py), and here C's fmod, shifts past the bit width, gcd, strides and
bitcast.

NumPy shows through in four places only, three of them through DLPack (which the
standard defines, and which shares memory on the CPU): ``to_host`` (the contract asks
for a NumPy array), ``strides`` (the standard has no layout API; a DLPack export
carries the strides) and ``bitcast`` (the standard cannot reinterpret bytes); and
``numpy.errstate``: array_api_strict computes with NumPy, which warns on log(0) or x/0,
where the contract asks for quiet IEEE results.
"""
from __future__ import annotations

import math

import numpy

from . import indexing, linalg, philox, special

# plugtorch dtype name -> the namespace's dtype attribute. The standard has no float16.
DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64", "complex64", "complex128")


def make_dtype_maps(xp):
    from plugtorch.backend_api import dtype_from_name
    to_native = {dtype_from_name(n): getattr(xp, n) for n in DTYPE_NAMES}
    return to_native, {v: k for k, v in to_native.items()}


def make_primitives(xp, backend_name: str = "arrayapi") -> dict:
    to_native, _ = make_dtype_maps(xp)

    def native(dtype):
        try:
            return to_native[dtype]
        except KeyError:
            raise TypeError(f"backend '{backend_name}' has no {dtype.name}: the array API standard "
                            f"(and {xp.__name__}) does not define it; use float32 or float64") from None

    def quiet(fn):
        def call(*args, **kwargs):
            with numpy.errstate(all="ignore"):
                return fn(*args, **kwargs)
        return call

    def fft(x, axes, kind, norm, last_size):
        # the standard's fft extension: its n-dimensional transforms keep the input's precision
        if kind == "c2r":
            sizes = [x.shape[a] for a in axes[:-1]] + [last_size]
            return xp.fft.irfftn(x, s=sizes, axes=axes, norm=norm)
        return getattr(xp.fft, {"c2c": "fftn", "ic2c": "ifftn", "r2c": "rfftn"}[kind])(x, axes=axes, norm=norm)

    def special_function(name, x, y, n):
        raise NotImplementedError(f"backend '{backend_name}' has no special function {name}: the array API "
                                  "standard defines none (lgamma, digamma, ...); compute it on the numpy backend")

    def boolean(x):
        # the standard's logical functions take bool only; the contract's take any dtype
        return x if x.dtype == xp.bool else xp.not_equal(x, 0)

    def shift(fn, right):
        # The standard leaves shifts by the bit width or more (and negative ones) unspecified;
        # the contract wants 0, or -1 for a right shift of a negative x: shift in range, then fix up.
        def call(x, s):
            bits = xp.iinfo(x.dtype).bits
            if right and xp.isdtype(x.dtype, "signed integer"):
                fill = xp.where(x < 0, xp.asarray(-1, dtype=x.dtype), xp.asarray(0, dtype=x.dtype))
            else:
                fill = xp.zeros_like(x)
            if not hasattr(s, "dtype"):  # a Python int
                return fn(x, s) if 0 <= s < bits else fill
            return xp.where((s < 0) | (s >= bits), fill, fn(x, xp.clip(s, 0, bits - 1)))
        return call

    def fmod(x, s):
        # C's fmod is not in the standard; for |x| and |s| the standard's remainder (sign of the
        # divisor) is the same exact remainder, and the result takes x's sign
        r = xp.remainder(xp.abs(x), xp.abs(s) if hasattr(s, "dtype") else abs(s))
        if xp.isdtype(x.dtype, "real floating"):
            return xp.copysign(r, x)
        return xp.where(x < 0, -r, r)

    def gcd(x, y):
        # The standard has no gcd: Euclid's loop, one remainder per step where the divisor is not 0
        a, b = xp.broadcast_arrays(xp.abs(x), xp.abs(y))
        while bool(xp.any(b != 0)):
            divides = b != 0
            step = xp.remainder(a, xp.where(divides, b, xp.ones_like(b)))
            a, b = xp.where(divides, b, a), xp.where(divides, step, xp.zeros_like(b))
        return a

    def strides(x):
        # The standard has no layout API, but DLPack, which it defines, carries the strides:
        # NumPy's DLPack import (no copy) reads them, in bytes.
        host = numpy.from_dlpack(x)
        return tuple(s // host.itemsize for s in host.strides)

    def row_major(shape):
        out, step = [], 1
        for n in reversed(shape):
            out.append(step)
            step *= n
        return tuple(reversed(out))

    def copy(x):
        # a fresh array is row-major; asarray(x, copy=True) would keep a transposed x's layout
        out = xp.zeros(tuple(x.shape), dtype=x.dtype)
        out[...] = x
        return out

    def contiguous(x):
        shape, steps = tuple(x.shape), strides(x)
        if math.prod(shape) == 0 or all(s == r for n, s, r in zip(shape, steps, row_major(shape)) if n > 1):
            return x
        return copy(x)

    def bitcast(x, dtype):
        # The standard has no bitcast. DLPack, which it does define, shares memory on the CPU,
        # so NumPy (the host library of to_host) reinterprets the bytes and DLPack hands the
        # view back: still x's memory, as the contract asks. A device library needs its own.
        native(dtype)  # refuses the dtypes the namespace lacks
        return xp.from_dlpack(numpy.from_dlpack(x).view(numpy.dtype(dtype.name)))

    def numeric(x):
        # the standard's sum, max, cumulative_sum, argsort refuse bool; plugtorch counts True as 1
        return xp.astype(x, xp.int8) if x.dtype == xp.bool else x

    def sum_(x, axes, keepdims, dtype):
        dt = native(dtype)
        return xp.sum(xp.astype(x, dt) if x.dtype == xp.bool else x, axis=axes, keepdims=keepdims, dtype=dt)

    def prod(x, axes, keepdims, dtype):
        dt = native(dtype)
        return xp.prod(xp.astype(x, dt) if x.dtype == xp.bool else x, axis=axes, keepdims=keepdims, dtype=dt)

    def max_(x, axes, keepdims):
        if x.dtype == xp.bool:
            return xp.any(x, axis=axes, keepdims=keepdims)
        return xp.max(x, axis=axes, keepdims=keepdims)

    def min_(x, axes, keepdims):
        if x.dtype == xp.bool:
            return xp.all(x, axis=axes, keepdims=keepdims)
        return xp.min(x, axis=axes, keepdims=keepdims)

    def argsort(x, axis, descending):
        # the standard's stable sort orders nan last ascending and first descending: as the contract
        return xp.argsort(numeric(x), axis=axis, descending=descending, stable=True)

    def cumsum(x, axis, dtype):
        return xp.cumulative_sum(numeric(x), axis=axis, dtype=native(dtype))

    def full(shape, value, dtype):
        dt = native(dtype)
        if xp.isdtype(dt, "integral") and isinstance(value, float):
            value = int(value)  # the standard refuses a float fill for an integer array
        return xp.full(tuple(shape), value, dtype=dt)

    def from_host(obj, dtype):
        if dtype is not None:
            native(dtype)  # refuses the dtypes the namespace lacks, saying so
        host = numpy.asarray(obj, dtype=None if dtype is None else numpy.dtype(dtype.name))
        if host.dtype.name not in DTYPE_NAMES:
            raise TypeError(f"backend '{backend_name}' has no {host.dtype.name}: the array API standard "
                            f"(and {xp.__name__}) does not define it; convert to float32 or float64 first")
        # a NumPy array supports the buffer protocol, which the standard's asarray accepts
        return xp.asarray(host, copy=True)

    def to_host(x):
        return numpy.from_dlpack(x)  # DLPack: the standard's way out, no copy on the CPU

    def where(cond, x, y):
        if not hasattr(x, "dtype") and not hasattr(y, "dtype"):  # two scalars: the standard wants an array
            x = xp.asarray(x, dtype=xp.float64 if isinstance(x, float) or isinstance(y, float) else None)
        return xp.where(cond, x, y)

    def cast(x, dtype):
        dt = native(dtype)
        if dt == xp.bool and x.dtype != xp.bool:
            return xp.not_equal(x, 0)  # the standard's astype to bool is only specified from bool
        return xp.astype(x, dt, copy=False)

    return {
        "neg": xp.negative, "exp": quiet(xp.exp), "log": quiet(xp.log), "log1p": quiet(xp.log1p),
        "expm1": quiet(xp.expm1), "sqrt": quiet(xp.sqrt), "abs": xp.abs, "sign": xp.sign,
        "sin": xp.sin, "cos": xp.cos, "tanh": xp.tanh, "erf": special.make_erf(xp),
        "floor": xp.floor, "ceil": xp.ceil, "round": xp.round,  # the standard's round is half to even
        "isnan": xp.isnan, "isinf": xp.isinf, "logical_not": lambda x: xp.logical_not(boolean(x)),
        "tan": xp.tan, "asin": quiet(xp.asin), "acos": quiet(xp.acos), "atan": xp.atan,
        "asinh": xp.asinh, "acosh": quiet(xp.acosh), "atanh": quiet(xp.atanh),
        "bitwise_not": xp.bitwise_invert,
        "add": xp.add, "sub": xp.subtract, "mul": xp.multiply, "div": quiet(xp.divide),
        "pow": quiet(xp.pow), "maximum": xp.maximum, "minimum": xp.minimum,
        "remainder": quiet(xp.remainder), "floor_divide": quiet(xp.floor_divide),
        "eq": xp.equal, "ne": xp.not_equal, "lt": xp.less, "le": xp.less_equal, "gt": xp.greater,
        "ge": xp.greater_equal,
        "logical_and": lambda x, y: xp.logical_and(boolean(x), boolean(y)),
        "logical_or": lambda x, y: xp.logical_or(boolean(x), boolean(y)),
        "atan2": xp.atan2, "fmod": quiet(fmod), "copysign": xp.copysign,
        "bitwise_and": xp.bitwise_and, "bitwise_or": xp.bitwise_or, "bitwise_xor": xp.bitwise_xor,
        "left_shift": shift(xp.bitwise_left_shift, False), "right_shift": shift(xp.bitwise_right_shift, True),
        "gcd": gcd,
        "where": where,
        "sum": sum_, "prod": prod, "max": max_, "min": min_,
        "argmax": lambda x, axis, keepdims: xp.argmax(numeric(x), axis=axis, keepdims=keepdims),
        "argmin": lambda x, axis, keepdims: xp.argmin(numeric(x), axis=axis, keepdims=keepdims),
        "argsort": argsort, "cumsum": cumsum,
        "matmul": xp.matmul, "fft": fft, "special": special_function,
        "reshape": lambda x, shape: xp.reshape(x, tuple(shape)),
        "permute": lambda x, axes: xp.permute_dims(x, tuple(axes)),
        "broadcast_to": lambda x, shape: xp.broadcast_to(x, tuple(shape)),
        "getitem": indexing.make_getitem(xp),
        "setitem": indexing.make_setitem(xp),
        "index_add": indexing.make_index_add(xp),
        "gather": lambda x, axis, index: xp.take_along_axis(x, index, axis=axis),
        "scatter_add": indexing.make_scatter_add(xp),
        "concatenate": lambda xs, axis: xp.concat(list(xs), axis=axis),
        "pad": indexing.make_pad(xp),
        "windows": indexing.make_windows(xp),
        "as_strided": indexing.make_as_strided(xp),
        "copy": copy, "contiguous": contiguous, "strides": strides, "bitcast": bitcast,
        "cast": quiet(cast),
        "zeros": lambda shape, dtype: xp.zeros(tuple(shape), dtype=native(dtype)),
        "full": full,
        "arange": lambda start, stop, step, dtype: xp.arange(start, stop, step, dtype=native(dtype)),
        "eye": lambda n, m, dtype: xp.eye(n, m, dtype=native(dtype)),
        "from_host": from_host,
        "to_host": to_host,
        **philox.make_random_primitives(xp, native),
        **{name: quiet(fn) for name, fn in linalg.make_linalg(xp).items()},
    }


__all__ = ["DTYPE_NAMES", "make_dtype_maps", "make_primitives"]
