"""The primitive table over an array namespace ``xp`` (NumPy, or anything NumPy-like such as CuPy).

``make_table(xp, ...)`` returns ``{primitive name: function}`` for
:data:`plugtorch.backend_api.PRIMITIVES`. Each function is a thin call into ``xp``; the
core has already promoted dtypes and normalised axes. ``out=...`` on ufuncs makes
them return arrays (not scalars) for 0-d inputs, as the contract requires.
"""
from __future__ import annotations

import functools
import math

import numpy

from . import special
from .bfloat16 import ACCUMULATING, BFLOAT16, keeps_bfloat16, widened
from .bfloat16 import SCALAR as BF16_SCALAR
from .linalg import make_linalg
from .native import out_ufunc
from .special_functions import numpy_special


def make_dtype_maps(xp):
    from plugtorch.backend_api import dtype_from_name
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64",
             "complex128"]
    to_native = _NativeDtypes({dtype_from_name(n): xp.dtype(n) for n in names})
    if xp is numpy:  # ml_dtypes' bfloat16 (bfloat16.py); CuPy-like namespaces refuse it
        to_native[dtype_from_name("bfloat16")] = BFLOAT16
    from_native = {v: k for k, v in to_native.items()}
    return to_native, from_native


class _NativeDtypes(dict):
    """plugtorch dtype -> native dtype; a dtype the backend lacks is refused by name."""

    def __missing__(self, dtype):
        if getattr(dtype, "name", None) == "bfloat16":
            raise TypeError("plugtorch.bfloat16 is not supported by the CuPy backend: CuPy's bfloat16 "
                            "(experimental, CuPy 14 with ml_dtypes) reaches neither cupyx nor this backend's "
                            "CUDA kernels; use plugtorch.float16 (autocast's default on cuda) or float32")
        raise TypeError(f"{dtype!r} is not supported by this backend")


@functools.cache  # one import attempt, not one per call
def _scipy_erf():
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return lambda x: numpy.asarray(erf(x), dtype=x.dtype)


def numpy_erf(x: numpy.ndarray) -> numpy.ndarray:
    """erf of a NumPy array: NumPy has no erf ufunc, so SciPy's where it is installed, else the
    NumPy operations of ``special.erf`` (the backend's native kernels, where built, serve floats
    before either: ``native.primitives()``)."""
    fast = _scipy_erf()
    if fast is not None:
        return fast(x)
    return special.erf(x)


# primitive name -> the ufunc of that name in the array namespace: one array in, one array out,
# elementwise, so it can also write into a buffer of the result's shape (``make_out_variants``)
UNARY_UFUNCS = {
    "neg": "negative", "exp": "exp", "log": "log", "log1p": "log1p", "expm1": "expm1", "sqrt": "sqrt",
    "abs": "abs", "sign": "sign", "sin": "sin", "cos": "cos", "tanh": "tanh", "floor": "floor",
    "ceil": "ceil", "round": "rint", "isnan": "isnan", "isinf": "isinf", "logical_not": "logical_not",
    "tan": "tan", "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "bitwise_not": "invert",
}
BINARY_UFUNCS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "pow": "power",
    "maximum": "maximum", "minimum": "minimum", "remainder": "remainder", "floor_divide": "floor_divide",
    "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
    "ge": "greater_equal", "logical_and": "logical_and", "logical_or": "logical_or", "atan2": "arctan2",
    "fmod": "fmod", "copysign": "copysign", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "left_shift": "left_shift", "right_shift": "right_shift",
    "gcd": "gcd",
}
# NumPy warns on these for domain errors and division by zero, which torch returns quietly as nan/inf
_QUIET = frozenset({"sin", "cos", "tan", "exp", "log", "log1p", "expm1", "sqrt", "asin", "acos", "acosh", "atanh",
                    "div", "pow", "remainder", "floor_divide", "fmod"})


def _fp_error_state():
    """NumPy's context variable for its floating-point error state, and the value that ignores
    every error (what ``numpy.errstate(all="ignore")`` sets); None where NumPy keeps no such
    variable (before NumPy 2)."""
    try:
        # NumPy's private name, which its stubs do not declare
        from numpy._core._ufunc_config import _extobj_contextvar as var  # type: ignore[attr-defined]
    except ImportError:
        return None
    with numpy.errstate(all="ignore"):
        return var, var.get()


_FP_STATE = _fp_error_state()


def ignoring_fp_errors(fn, **bound):
    """``fn`` (given ``bound`` and the caller's keywords) run as under
    ``numpy.errstate(all="ignore")``: no warning for log(-1) or 1/0, which torch returns quietly
    as nan/inf. Entering an errstate builds its state anew, about 1.1 us a call, three times a
    small ufunc's; NumPy 2 keeps the state in a context variable, so the ignoring state is built
    once here and set around each call (about 0.2 us). The caller's own state is back in place
    when ``fn`` returns or raises."""
    if _FP_STATE is None:
        def call(*args, **kwargs):
            with numpy.errstate(all="ignore"):
                return fn(*args, **bound, **kwargs)
    else:
        var, ignoring = _FP_STATE
        set_state, reset_state = var.set, var.reset

        def call(*args, **kwargs):
            token = set_state(ignoring)
            try:
                return fn(*args, **bound, **kwargs)
            finally:
                reset_state(token)
    return call


def numpy_broadcast_to(x, shape):
    """``numpy.broadcast_to(x, shape)``: the same read-only view of ``x``'s memory, built with
    the ndarray constructor where ``x`` exports its memory as one block (C or Fortran order).
    NumPy's function makes an nditer in Python, about 2.7 us, for every sum's and mean's
    gradient; this takes about 1. Anything else (strided views, shapes that do not broadcast,
    which then get NumPy's error) goes to NumPy's function."""
    shape = tuple(shape)
    lead = len(shape) - x.ndim
    if lead >= 0 and (x.flags.c_contiguous or x.flags.f_contiguous):
        strides = [0] * lead
        for n, target, stride in zip(x.shape, shape[lead:], x.strides):
            if n == target:
                strides.append(stride)
            elif n == 1:
                strides.append(0)
            else:
                break
        else:
            try:
                view = numpy.ndarray(shape, x.dtype, x, 0, tuple(strides))
            except (TypeError, ValueError):  # memory it will not export (object dtypes): NumPy's way
                return numpy.broadcast_to(x, shape)
            view.flags.writeable = False
            return view
    return numpy.broadcast_to(x, shape)


def torch_sign(xp, fn):
    """``fn`` (the namespace's sign ufunc, or a call of it) giving torch's 0 at NaN: NumPy 2's sign
    gives NaN there, and the primitive's contract is -1, 0 or 1. Extra keywords (``out=``) pass
    through, so the same wrapper serves the table and the out variants."""
    def sign(x, **kwargs):
        out = fn(x, **kwargs)
        if out.dtype.kind not in "biu":  # only floats hold NaN (complex input is refused by the core)
            if xp is numpy:  # a boolean index costs about half of copyto(where=) on the host
                out[numpy.isnan(out)] = 0
            else:  # a device's boolean index would read its count back to the host
                xp.copyto(out, 0, where=out != out)
        return out
    return sign


def torch_remainder(xp, fn):
    """``fn`` (the namespace's remainder, or a call of it) giving a zero result torch's sign.
    NumPy's remainder is Python's: a zero takes the divisor's sign; torch's takes fmod's result
    and adds the divisor where the signs differ, so a zero keeps the dividend's (remainder(3, -3)
    is +0.0, remainder(-0.0, 2) is -0.0). Non-zero results are the same."""
    def remainder(x, y, **kwargs):
        out = fn(x, y, **kwargs)
        if out.dtype.kind not in "biu":  # complex input is refused by the core
            xp.copyto(out, xp.copysign(out, x), where=out == 0)
        return out
    return remainder


def refusing_integer_zero(xp, name, fn):
    """``fn``, the integer division ``name`` (remainder, fmod, floor_divide), refusing a zero
    divisor in integer dtypes as torch does (NumPy quietly gives 0 there); floats give inf or
    nan as usual, and only integer operands pay the test."""
    def divide(x, y, **kwargs):
        if getattr(x, "dtype", None) is not None and x.dtype.kind in "iu":
            if (not y) if type(y) is int else not xp.all(y):
                raise RuntimeError(f"ZeroDivisionError: {name} of an integer tensor ({x.dtype}) by zero; "
                                   "divide floating point tensors (.float()) to get inf or nan")
        return fn(x, y, **kwargs)
    return divide


def _torch_integer_division(xp, table):
    """The division primitives of ``table`` (kernels or out variants) made torch's in place.
    Only host memory refuses an integer zero divisor: finding one reads the divisor, which on
    a device is a synchronisation per division (torch's CUDA kernels do not check either)."""
    table["remainder"] = torch_remainder(xp, table["remainder"])
    if xp is numpy:
        for name in ("remainder", "fmod", "floor_divide"):
            table[name] = refusing_integer_zero(xp, name, table[name])


def make_out_variants(xp, *, quiet: bool = True) -> dict:
    """primitive name -> ``fn(*arrays, out=buffer)``, the elementwise primitives writing into a
    buffer of their result's shape and dtype (``Backend.out_variants``): plugtorch.compile
    runs a chain of them in one dead temporary instead of allocating each result.
    quiet: run the warning ones ignoring floating-point errors (NumPy; CuPy does not warn)."""
    def plain(fn):
        return fn  # a ufunc takes out= itself; a wrapper would cost a Python call per write

    variants = {name: (ignoring_fp_errors if quiet and name in _QUIET else plain)(getattr(xp, ufunc))
                for name, ufunc in (UNARY_UFUNCS | BINARY_UFUNCS).items()}
    variants["sign"] = torch_sign(xp, variants["sign"])
    _torch_integer_division(xp, variants)
    return variants


def make_table(xp, to_host, from_host_array, *, ufunc_out=True, add_at=None, as_strided=None, erf=None,
               special=None):
    """The primitive table for array namespace ``xp``.

    to_host(x) -> numpy.ndarray; from_host_array(numpy_array) -> native array. Where the
    libraries differ, the caller says how:

    ufunc_out:  whether ufuncs take ``out=...`` to return arrays for 0-d inputs (NumPy); a
                library whose ufuncs always return arrays (CuPy) passes False.
    add_at:     ``add_at(array, index, values)`` accumulating repeated indices (default
                ``xp.add.at``; CuPy has ``cupyx.scatter_add``).
    as_strided: ``as_strided(x, shape, strides)`` giving a view (default NumPy's, read-only).
    erf:        the error function on native arrays (default: SciPy's or libm's, on the host).
    special:    the ``special`` primitive on native arrays (default: the NumPy backend's, on the host).
    """
    to_native, _ = make_dtype_maps(xp)
    asarray = xp.asarray

    def nd(x):
        # Reductions over every axis return scalars in NumPy; the contract wants arrays.
        return x if type(x) is xp.ndarray else asarray(x)

    def getitem(x, index):
        out = x[index]
        if type(out) is xp.ndarray:
            return out
        # an int on every axis gives NumPy a scalar, a copy; torch's x[i] is a 0-d view, and so
        # is NumPy's result for the same index with an Ellipsis after it
        return x[(*index, Ellipsis) if type(index) is tuple else (index, Ellipsis)]

    def quiet(fn):
        if not ufunc_out:
            return fn  # a library without NumPy's floating-point warnings needs no errstate
        return ignoring_fp_errors(fn, out=...)

    def binary(fn):
        if not ufunc_out:
            return fn
        if xp is not numpy:
            return lambda x, y: fn(x, y, out=...)

        # bfloat16 needs care only beside a Python float (ml_dtypes would promote the pair to
        # float32; two arrays keep their dtype): the Python functions below take those calls, and
        # out_ufunc sends every other call (two arrays, the commonest) to the ufunc from C
        if fn.__name__ == "multiply":  # torch multiplies by the number in float32 (keeps_bfloat16)
            def mul(x, y):
                if type(y) is float and x.dtype is BFLOAT16:
                    return fn(x, y, out=...).astype(BFLOAT16)
                return fn(x, y, out=...)
            return out_ufunc(fn, 2, mul, float_slow=BFLOAT16)

        def call(x, y):
            if type(y) is float and x.dtype is BFLOAT16:  # as torch, the number in the tensor's dtype
                y = BF16_SCALAR(y)                       # (ml_dtypes would promote to float32)
            return fn(x, y, out=...)
        return out_ufunc(fn, 2, call, float_slow=BFLOAT16)

    def unary(fn):
        if not ufunc_out:
            return fn
        call = lambda x: fn(x, out=...)  # also out_ufunc's slow path
        return out_ufunc(fn, 1, call) if xp is numpy else call

    def cast(x, dtype):
        return x.astype(to_native[dtype], copy=False)

    def from_host(obj, dtype):
        if isinstance(obj, xp.ndarray):
            return obj if dtype is None else obj.astype(to_native[dtype], copy=False)
        host = numpy.asarray(obj, dtype=None if dtype is None else to_native[dtype])
        return from_host_array(host)

    def gather(x, axis, index):
        return xp.take_along_axis(x, index, axis=axis)

    def scatter_add(x, axis, index, src):
        out = x.copy()
        # Full index grids (open, broadcasting) so repeated indices accumulate (add.at semantics).
        ndim = index.ndim
        grids = [xp.arange(n).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1)) for d, n in enumerate(index.shape)]
        grids[axis] = index
        _add_at(out, tuple(grids), src)
        return out

    _add_at = add_at if add_at is not None else (lambda out, index, values: xp.add.at(out, index, values))
    _as_strided = as_strided if as_strided is not None else (
        lambda x, shape, strides: numpy.lib.stride_tricks.as_strided(x, shape=shape, strides=strides,
                                                                      writeable=False))

    def index_add(x, index, values):
        out = x.copy()
        if all(not hasattr(k, "dtype") for k in index):
            out[index] += values  # basic index: no repeats possible, a plain view update
        else:
            _add_at(out, index, values)
        return out

    def setitem(x, index, value):
        x[index] = value

    def host_erf(x):
        # through the host, for a library without an erf of its own (CuPy passes cupyx's)
        return numpy_erf(x) if xp is numpy else from_host_array(numpy_erf(to_host(x)))

    def host_special(name, x, y, n):
        if xp is numpy:
            return numpy_special(name, x, y, n)
        return from_host_array(numpy_special(name, to_host(x), None if y is None else to_host(y), n))

    def windows(x, window, strides, dilation):
        n = len(window)
        lead = x.shape[:-n]
        spatial = x.shape[-n:]
        counts = tuple((s - d * (w - 1) - 1) // st + 1
                       for s, w, st, d in zip(spatial, window, strides, dilation))
        shape = lead + counts + tuple(window)
        xs = x.strides
        new_strides = (xs[:-n] + tuple(xs[-n + i] * strides[i] for i in range(n))
                       + tuple(xs[-n + i] * dilation[i] for i in range(n)))
        return _as_strided(x, shape, new_strides)

    def strided_view(x, shape, strides, offset):
        # x is contiguous and the positions in bounds (the core checks both): a view of its memory
        flat = x.reshape(-1)[offset:]
        strides = tuple(s * x.itemsize for s in strides)
        if as_strided is None:  # NumPy's, writeable: torch's as_strided writes through to its input
            return numpy.lib.stride_tricks.as_strided(flat, shape=shape, strides=strides, writeable=True)
        return as_strided(flat, shape, strides)

    def pad(x, widths, value):
        # a filled array and one assignment: xp.pad's general machinery costs ~40 % more on a
        # convolution's input (it runs per step, per conv, forward and weight gradient)
        shape = tuple(n + a + b for n, (a, b) in zip(x.shape, widths))
        out = xp.full(shape, value, dtype=x.dtype)
        out[tuple(slice(a, a + n) for n, (a, _) in zip(x.shape, widths))] = x
        return out

    def contiguous(x):
        return x if x.flags.c_contiguous else xp.ascontiguousarray(x)

    if ufunc_out:
        # NumPy's sum/prod/max/min are Python functions around these reductions, and cost
        # 1.5 us more on a small tensor; out=... returns an array for a full reduction
        add_reduce, mul_reduce = xp.add.reduce, xp.multiply.reduce
        max_reduce, min_reduce = xp.maximum.reduce, xp.minimum.reduce

        def sum_(x, axes, keepdims, dtype):
            return add_reduce(x, axis=axes, dtype=to_native[dtype], keepdims=keepdims, out=...)

        def prod(x, axes, keepdims, dtype):
            return mul_reduce(x, axis=axes, dtype=to_native[dtype], keepdims=keepdims, out=...)

        def max_(x, axes, keepdims):
            return max_reduce(x, axis=axes, keepdims=keepdims, out=...)

        def min_(x, axes, keepdims):
            return min_reduce(x, axis=axes, keepdims=keepdims, out=...)
    else:
        def sum_(x, axes, keepdims, dtype):
            return nd(xp.sum(x, axis=axes, keepdims=keepdims, dtype=to_native[dtype]))

        def prod(x, axes, keepdims, dtype):
            return nd(xp.prod(x, axis=axes, keepdims=keepdims, dtype=to_native[dtype]))

        def max_(x, axes, keepdims):
            return nd(xp.max(x, axis=axes, keepdims=keepdims))

        def min_(x, axes, keepdims):
            return nd(xp.min(x, axis=axes, keepdims=keepdims))

    fft_kinds = {"c2c": "fftn", "ic2c": "ifftn", "r2c": "rfftn"}
    real_of = {xp.dtype("complex64"): xp.dtype("float32"), xp.dtype("complex128"): xp.dtype("float64")}
    complex_of = {xp.dtype("float32"): xp.dtype("complex64"), xp.dtype("float64"): xp.dtype("complex128")}

    def fft(x, axes, kind, norm, last_size):
        # the libraries compute float32 in float64 or return complex128 (NumPy before 2): the dtype
        # is set back to the input's precision afterwards
        if kind == "c2r":
            sizes = [x.shape[a] for a in axes[:-1]] + [last_size]
            return xp.fft.irfftn(x, s=sizes, axes=axes, norm=norm).astype(real_of[x.dtype], copy=False)
        out = getattr(xp.fft, fft_kinds[kind])(x, axes=axes, norm=norm)
        return out.astype(complex_of.get(x.dtype, x.dtype), copy=False)

    def argmax(x, axis, keepdims):
        return nd(xp.argmax(x, axis=axis, keepdims=keepdims)).astype(xp.int64, copy=False)

    def argmin(x, axis, keepdims):
        return nd(xp.argmin(x, axis=axis, keepdims=keepdims)).astype(xp.int64, copy=False)

    def argsort(x, axis, descending):
        if descending:
            if x.dtype.kind in "biu":
                key = -x.astype(xp.int64)
            else:  # nan first, as the largest value; -x alone would leave it last
                key = xp.where(xp.isnan(x), -xp.inf, -x)
        else:
            key = x
        return xp.argsort(key, axis=axis, kind="stable").astype(xp.int64, copy=False)

    def cumsum(x, axis, dtype):
        return xp.cumsum(x, axis=axis, dtype=to_native[dtype])

    def arange(start, stop, step, dtype):
        return xp.arange(start, stop, step, dtype=to_native[dtype])

    def where(cond, x, y):
        return nd(xp.where(cond, x, y))

    if xp is numpy:
        def where(cond, x, y):  # NumPy's: a Python float beside a bfloat16 array would give float64
            if getattr(x, "dtype", None) is BFLOAT16 and not hasattr(y, "dtype"):
                y = BF16_SCALAR(y)
            elif getattr(y, "dtype", None) is BFLOAT16 and not hasattr(x, "dtype"):
                x = BF16_SCALAR(x)
            return nd(xp.where(cond, x, y))

    def strides(x):
        size = x.itemsize
        return tuple(s // size for s in x.strides)

    def bitcast(x, dtype):
        return x.view(to_native[dtype])

    stacked_matmul = binary(xp.matmul)
    if xp is numpy:  # few-row products in the native kernel, where it beats BLAS (native/gemm.py)
        from .native import gemm
        stacked_matmul = gemm.wrap(stacked_matmul)

    def matmul(x, y):
        # (..., m, k) @ (k, n) as one (prod(...) * m, k) @ (k, n) GEMM: the libraries run one
        # small GEMM per leading index, 2.8x slower at (35, 20, 2000) @ (2000, 256) on OpenBLAS
        if x.ndim > 2 and y.ndim == 2:
            lead = x.shape[:-1]
            return stacked_matmul(x.reshape(math.prod(lead), x.shape[-1]), y).reshape(*lead, y.shape[1])
        return stacked_matmul(x, y)

    table = {name: (quiet if name in _QUIET else unary)(getattr(xp, ufunc)) for name, ufunc in UNARY_UFUNCS.items()}
    table["sign"] = torch_sign(xp, table["sign"])
    table.update({name: (quiet if name in _QUIET else binary)(getattr(xp, ufunc))
                  for name, ufunc in BINARY_UFUNCS.items()})
    _torch_integer_division(xp, table)
    table["erf"] = erf or host_erf
    table["special"] = special or host_special
    table = table | {
        "where": where,
        "sum": sum_, "prod": prod, "max": max_, "min": min_, "argmax": argmax, "argmin": argmin,
        "argsort": argsort,
        "cumsum": cumsum,
        "matmul": matmul, "fft": ignoring_fp_errors(fft) if ufunc_out else fft,  # inf in: nan out, quietly
        "reshape": lambda x, shape: x.reshape(shape),
        "permute": lambda x, axes: x.transpose(axes),
        "broadcast_to": numpy_broadcast_to if xp is numpy else xp.broadcast_to,
        "getitem": getitem,
        "setitem": setitem, "index_add": index_add, "gather": gather, "scatter_add": scatter_add,
        "concatenate": lambda xs, axis: xp.concatenate(xs, axis=axis),
        "pad": pad, "windows": windows,
        "as_strided": strided_view,
        "copy": lambda x: x.copy(), "contiguous": contiguous, "strides": strides, "bitcast": bitcast,
        "cast": cast,
        "zeros": lambda shape, dtype: xp.zeros(shape, dtype=to_native[dtype]),
        "full": lambda shape, value, dtype: xp.full(shape, value, dtype=to_native[dtype]),
        "arange": arange,
        "eye": lambda n, m, dtype: xp.eye(n, m, dtype=to_native[dtype]),
        "from_host": from_host,
        "to_host": to_host,
    }
    table.update(make_linalg(xp))
    if xp is numpy:  # bfloat16 accumulates in float32, as torch's CPU kernels do
        table.update({name: widened(name, table[name]) for name in ACCUMULATING})
        table.update({name: keeps_bfloat16(name, table[name]) for name in BINARY_UFUNCS if name in _QUIET})
    return table
