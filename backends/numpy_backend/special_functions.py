"""The ``special`` primitive (torch.special's functions NumPy has no ufunc for) on NumPy arrays.

Where the native extension is built (``native/special.c``, the default install) it computes
float32 and float64 in C, in double precision, rounded to the input's dtype. Without it, SciPy's
functions of the same names serve, where SciPy is installed; else the primitive raises, saying
what to install: never a per-element Python call. ``from_scipy`` adapts a SciPy-like module
(``cupyx.scipy.special`` for the CuPy backend) to the primitive.
"""
from __future__ import annotations

import functools
import importlib
import os

import numpy

# primitive function name -> SciPy's name for it
SCIPY_NAMES = {"lgamma": "gammaln", "digamma": "psi", "polygamma": "polygamma", "erfc": "erfc", "erfcx": "erfcx",
               "erfinv": "erfinv", "ndtri": "ndtri", "ndtr": "ndtr", "log_ndtr": "log_ndtr", "i0": "i0",
               "i0e": "i0e", "i1": "i1", "i1e": "i1e", "j0": "j0", "j1": "j1", "zeta": "zeta",
               "gammainc": "gammainc", "gammaincc": "gammaincc"}
FUNCTIONS = frozenset(SCIPY_NAMES)


@functools.cache
def _native():
    if os.environ.get("PLUGTORCH_NATIVE_KERNELS", "1") == "0":
        return None
    try:
        return importlib.import_module(".native._special", __package__)
    except ImportError:  # built without a C compiler (setup.py's optional extension)
        return None


def native_special(name, x, y, n):
    """``name`` over ``x`` (and ``y``, or polygamma's order ``n``) in C: float64 buffers, rounded back."""
    flat = numpy.ascontiguousarray(x, dtype=numpy.float64).reshape(-1)
    other = None if y is None else numpy.ascontiguousarray(numpy.broadcast_to(y, x.shape),
                                                           dtype=numpy.float64).reshape(-1)
    out = numpy.empty(flat.shape, numpy.float64)
    _native().apply(name, flat, other, n, out)
    with numpy.errstate(over="ignore"):  # beyond float32's range is inf, quietly
        return out.reshape(x.shape).astype(x.dtype, copy=False)


def from_scipy(module):
    """The primitive over a SciPy-like module of special functions (``scipy.special``, ``cupyx.scipy.special``)."""
    def special(name, x, y, n):
        fn = getattr(module, SCIPY_NAMES[name])
        if name == "polygamma":
            out = fn(n, x)
        elif y is None:
            out = fn(x)
        else:
            out = fn(x, y)
        return out.astype(x.dtype, copy=False)
    return special


@functools.cache
def _scipy():
    try:
        import scipy.special
    except ImportError:
        return None
    return scipy.special


def numpy_special(name, x, y, n):
    """The primitive on NumPy arrays: C where built, else SciPy, else a clear error."""
    if name not in FUNCTIONS:
        raise ValueError(f"special: unknown function {name!r}; the primitive computes {sorted(FUNCTIONS)}")
    if _native() is not None:
        return native_special(name, x, y, n)
    scipy_special = _scipy()
    if scipy_special is None:
        raise RuntimeError(f"special function {name}: the NumPy backend computes it with its native extension "
                           "(not built here) or SciPy (not installed); rebuild with a C compiler "
                           "(pip install -e .) or pip install scipy")
    with numpy.errstate(all="ignore"):
        out = from_scipy(scipy_special)(name, x, y, n)
    # torch's values (and the C's) where SciPy's differ: lgamma(-inf) is inf, erfinv(-0) is -0
    if name == "lgamma":
        return numpy.where(numpy.isneginf(x), x.dtype.type(numpy.inf), out)
    if name == "erfinv":
        return numpy.where(x == 0, x, out)
    return out
