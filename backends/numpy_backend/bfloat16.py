"""bfloat16 on the NumPy backend, through ``ml_dtypes`` (NumPy has no bfloat16 of its own).

``ml_dtypes`` gives NumPy a bfloat16 dtype whose ufuncs compute each element in float32 and
round the result, as torch's CPU kernels do, so elementwise ops on two tensors need nothing
here (add and mul agree with torch bit for bit); a Python number beside a bfloat16 array is
taken as torch takes it (:func:`keeps_bfloat16`; the table's own binary wrapper does the same
inline). What would go wrong is where a result accumulates: NumPy
reduces a bfloat16 array in bfloat16 (each partial sum rounded) and multiplies bfloat16
matrices in a slow generic loop. Torch accumulates in float32 and rounds once; so do the
primitives :func:`widened` wraps. The backend's fused kernels, written for float32/float64
(they test ``dtype.kind == "f"``, call C for those dtypes), get the same treatment: a
bfloat16 operand is widened, the kernel runs in float32 and its float32 results are rounded
back (:func:`through_float32`). The in-place optimizer kernels are left as they are: they
must write the caller's arrays, and compute elementwise, which the ufuncs do right.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
SCALAR: Callable[[object], np.generic] = ml_dtypes.bfloat16  # a number as a bfloat16 scalar
_F32 = np.dtype(np.float32)

# primitives whose result accumulates many products or sums: computed in float32, rounded once
ACCUMULATING = ("matmul", "sum", "prod", "cumsum")

# kernels that update an operand in place (running statistics): the widened copy is written
# back so the update reaches the caller's array
_UPDATES_OPERANDS = frozenset({"batch_norm"})


@functools.cache
def _float32():
    from plugtorch.backend_api import dtype_from_name
    return dtype_from_name("float32")


def _narrow(out):
    if isinstance(out, np.ndarray) and out.dtype == _F32:
        return out.astype(BFLOAT16)
    if isinstance(out, tuple):
        return tuple(_narrow(o) for o in out)
    if isinstance(out, list):
        return [_narrow(o) for o in out]
    return out


def widened(name: str, fn: Callable) -> Callable:
    """The primitive ``fn`` computing a bfloat16 operand in float32 (torch's accumulation type)
    and rounding the result to bfloat16. ``sum``/``prod``/``cumsum`` asked for a bfloat16 result
    accumulate in float32 too; other dtypes pass straight through."""
    if name == "matmul":
        def matmul(x, y):
            if x.dtype is BFLOAT16:
                return fn(x.astype(_F32), y.astype(_F32)).astype(BFLOAT16)
            return fn(x, y)
        return matmul

    if name in ("sum", "prod"):  # the hot ones, with their own signature: no argument packing
        @functools.wraps(fn)
        def reduce_axes(x, axes, keepdims, dtype):
            if dtype.name == "bfloat16":
                wide = x.astype(_F32) if x.dtype == BFLOAT16 else x
                return fn(wide, axes, keepdims, _float32()).astype(BFLOAT16)
            return fn(x, axes, keepdims, dtype)
        return reduce_axes

    @functools.wraps(fn)
    def reduce(x, *args, dtype, **kwargs):
        if dtype.name == "bfloat16":
            wide = x.astype(_F32) if x.dtype == BFLOAT16 else x
            return fn(wide, *args, dtype=_float32(), **kwargs).astype(BFLOAT16)
        return fn(x, *args, dtype=dtype, **kwargs)
    return reduce


# binary primitives torch computes with a Python number in float32 (its opmath scalar paths);
# the others take the number converted to the tensor's dtype first
_FLOAT32_NUMBER = frozenset({"mul", "div", "floor_divide"})


def keeps_bfloat16(name: str, fn: Callable) -> Callable:
    """The binary primitive ``name`` (``fn``) with a Python float beside a bfloat16 array as
    torch computes it: the number converted to bfloat16, or for mul and div kept in float32
    and the result rounded. ml_dtypes' bfloat16 takes no part in NumPy's weak-scalar rule, so
    NumPy alone would compute the pair in float32 and return float32."""
    if name in _FLOAT32_NUMBER:
        def rounded(x, y):
            out = fn(x, y)
            return out.astype(BFLOAT16) if x.dtype is BFLOAT16 and out.dtype is not x.dtype else out
        return rounded

    def call(x, y):
        if type(y) is float and x.dtype is BFLOAT16:
            y = SCALAR(y)
        return fn(x, y)
    return call


def through_float32(name: str, kernel: Callable) -> Callable:
    """``kernel`` (arrays positionally, attrs by keyword) run in float32 when its first operand is
    bfloat16 (the one a kernel's dtype follows): its bfloat16 operands widened (exactly), its
    float32 results rounded to bfloat16. Other calls pay one attribute test."""
    writes_back = name in _UPDATES_OPERANDS

    def widen(a):
        if isinstance(a, np.ndarray) and a.dtype is BFLOAT16:
            return a.astype(_F32)
        if isinstance(a, (list, tuple)):
            return type(a)(widen(v) for v in a)
        return a

    @functools.wraps(kernel)
    def call(*arrays, **attrs):
        if not arrays or getattr(arrays[0], "dtype", None) is not BFLOAT16:
            return kernel(*arrays, **attrs)
        wide_arrays = [widen(a) for a in arrays]
        wide_attrs = {k: widen(v) for k, v in attrs.items()}
        out = _narrow(kernel(*wide_arrays, **wide_attrs))
        if writes_back:
            for orig, wide in zip((*arrays, *attrs.values()), (*wide_arrays, *wide_attrs.values())):
                if wide is not orig and isinstance(orig, np.ndarray) and orig.dtype is BFLOAT16:
                    orig[...] = wide
        return out
    return call
