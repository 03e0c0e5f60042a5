"""The backend contract: the closed set of forward primitives a backend provides.

Every primitive is a pure function on the backend's *native* arrays (the one
exception, ``setitem``, is documented as mutating). The core guarantees the
preconditions listed here (dtypes already promoted, axes normalised to
non-negative ints, shapes already checked), so a backend can be a thin table
over its array library. Results must be native arrays — never host scalars —
whose dtype is the one stated.

A backend that lacks a primitive still loads; calling an op that needs it
raises an error naming the op, the backend and the loaded plugins.

Notation: ``x``, ``y``, ``cond`` are native arrays; ``s`` may be a native array
of the same dtype as ``x`` *or* a Python scalar, in which case the result keeps
``x``'s dtype (NumPy 2 / array-API "weak scalar" rules); ``dtype`` is a
:class:`plugtorch.dtype`; ``gen`` is a native random generator made by
``generator``.
"""
from __future__ import annotations

__all__ = ["PRIMITIVES", "PRIMITIVE_NAMES"]

# name -> "signature: meaning". The keys are the contract; the text is the doc.
PRIMITIVES: dict[str, str] = {
    # elementwise unary: same dtype out (floating ops only receive floating input)
    "neg": "neg(x): -x",
    "exp": "exp(x): e**x",
    "log": "log(x): natural log; log(0) = -inf, log(<0) = nan, no warnings",
    "log1p": "log1p(x): log(1 + x)",
    "expm1": "expm1(x): e**x - 1",
    "sqrt": "sqrt(x): square root; sqrt(<0) = nan, no warnings",
    "abs": "abs(x): |x|",
    "sign": "sign(x): -1, 0 or 1 in x's dtype (0 at NaN, as torch's)",
    "sin": "sin(x)",
    "cos": "cos(x)",
    "tanh": "tanh(x)",
    # erf has no cheap exact composition from the others (gelu needs it)
    "erf": "erf(x): the error function, 2/sqrt(pi) * integral of exp(-t**2) from 0 to x",
    # torch.special's functions: none composes from the others to double precision at a reasonable cost
    "special": ("special(name, x, y, n): the special function name over floating x, in x's dtype: 'lgamma', "
                "'digamma', 'polygamma' (of order n, an int >= 0), 'erfc', 'erfcx', 'erfinv', 'ndtri', 'ndtr', "
                "'log_ndtr', 'i0', 'i0e', 'i1', 'i1e', 'j0', 'j1' (y is None), and of two arguments 'zeta' "
                "(Hurwitz, zeta(x, y)), 'gammainc' and 'gammaincc' (regularised, a = x); y has x's shape and "
                "dtype. Values and domains as scipy.special's functions of those names (gammaln, psi, ...), "
                "digamma(0) = -inf as torch"),
    "floor": "floor(x)",
    "ceil": "ceil(x)",
    "round": "round(x): round half to even",
    "isnan": "isnan(x) -> bool",
    "isinf": "isinf(x) -> bool",
    "logical_not": "logical_not(x) -> bool",
    # inverse and further trigonometric functions, bitwise ops, strides and dtype views: none can be
    # composed from the others exactly (or at all), and PyTorch has them all
    "tan": "tan(x)",
    "asin": "asin(x): nan outside [-1, 1], no warnings",
    "acos": "acos(x): nan outside [-1, 1], no warnings",
    "atan": "atan(x)",
    "asinh": "asinh(x)",
    "acosh": "acosh(x): nan below 1, no warnings",
    "atanh": "atanh(x): +-inf at +-1, nan outside [-1, 1], no warnings",
    "bitwise_not": "bitwise_not(x): ~x for integer x; logical not for bool x",
    # elementwise binary (broadcasting)
    "add": "add(x, s)", "sub": "sub(x, s)", "mul": "mul(x, s)",
    "div": "div(x, s): true division of floating x; x/0 = ±inf or nan, no warnings",
    "pow": "pow(x, s): x**s; 0**negative = inf, no warnings",
    "maximum": "maximum(x, s): elementwise max, nan-propagating",
    "minimum": "minimum(x, s): elementwise min, nan-propagating",
    "remainder": "remainder(x, s): Python-style modulus (sign of divisor)",
    "floor_divide": "floor_divide(x, s)",
    "eq": "eq(x, s) -> bool", "ne": "ne(x, s) -> bool", "lt": "lt(x, s) -> bool",
    "le": "le(x, s) -> bool", "gt": "gt(x, s) -> bool", "ge": "ge(x, s) -> bool",
    "logical_and": "logical_and(x, y) -> bool", "logical_or": "logical_or(x, y) -> bool",
    "atan2": "atan2(x, s): the angle of the point (s, x), in (-pi, pi]",
    "fmod": "fmod(x, s): C's fmod, the remainder with the sign of x (x - trunc(x / s) * s, exactly)",
    "copysign": "copysign(x, s): |x| with the sign bit of s (-0.0 and -nan count as negative)",
    "bitwise_and": "bitwise_and(x, s): integer or bool x (bool: logical)",
    "bitwise_or": "bitwise_or(x, s)", "bitwise_xor": "bitwise_xor(x, s)",
    "left_shift": "left_shift(x, s): integer x; shifts of the bit width or more (or negative) give 0",
    "right_shift": ("right_shift(x, s): integer x, arithmetic for signed x; shifts of the bit width "
                    "or more (or negative) give 0, or -1 for negative x"),
    # Euclid's loop in the other primitives would read back to the host at every step
    "gcd": "gcd(x, y): the non-negative greatest common divisor of integer x and y (gcd(0, 0) = 0)",
    "where": "where(cond, x, y): cond is bool; x and y arrays of one dtype (or Python scalars)",
    # reductions; axes is a tuple of non-negative ints or None for all
    "sum": "sum(x, axes, keepdims, dtype): dtype is the result dtype",
    "prod": "prod(x, axes, keepdims, dtype)",
    "max": "max(x, axes, keepdims): values only; x is non-empty along axes",
    "min": "min(x, axes, keepdims)",
    "argmax": "argmax(x, axis, keepdims) -> int64; axis an int or None (flattened); first occurrence",
    "argmin": "argmin(x, axis, keepdims) -> int64",
    # sorting cannot be composed from the others at any reasonable cost
    "argsort": ("argsort(x, axis, descending) -> int64: a STABLE sort order along axis (ties keep "
                "their order); nan sorts as the largest value"),
    "cumsum": "cumsum(x, axis, dtype)",
    # linear algebra
    "matmul": "matmul(x, y): x and y have ndim >= 2 and broadcastable batch dims",
    # matrix factorisations (LAPACK's): none composes from the others at O(n**3) with LAPACK's
    # accuracy. x is a batch (..., m, n) of float32/float64/complex64/complex128 matrices, no
    # entry of which need be finite; a tuple result is a tuple of native arrays
    "cholesky": ("cholesky(x) -> L: the lower factor of x = L L^H (square x; only its lower triangle is "
                 "read). Where the leading minor of order k is the first not positive-definite, L's "
                 "diagonal is nan from entry k - 1 on (its other entries are then unspecified)"),
    "qr": ("qr(x, complete) -> (Q, R): Q (..., m, k) with orthonormal columns, R (..., k, n) upper "
           "triangular, k = min(m, n), or k = m when complete"),
    "svd": ("svd(x, full_matrices, compute_uv) -> (U, S, Vh), or S alone when compute_uv is False: S "
            "(..., min(m, n)) real and descending; U (..., m, m or k), Vh (..., n or k, n)"),
    "eigh": ("eigh(x, upper, compute_v) -> (w, V), or w alone when compute_v is False: the eigenvalues "
             "(real, ascending) and eigenvectors of Hermitian x, reading its upper or lower triangle"),
    "eig": ("eig(x, compute_v) -> (w, V), or w alone: the eigenvalues and unit eigenvectors of square x, "
            "complex (complex64 for float32 or complex64 x, else complex128)"),
    "lu_factor": ("lu_factor(x) -> (LU, pivots): getrf's partial pivoting; LU holds L's strict lower part "
                  "(unit diagonal implied) and U; pivots (..., min(m, n)) int32, 1-based: row i was "
                  "swapped with row pivots[i] - 1. A zero pivot is left in U (no error)"),
    "solve_triangular": ("solve_triangular(a, b, upper, unitriangular) -> X with a X = b: a (..., n, n) "
                         "triangular (the other triangle is not read; unitriangular: nor the diagonal, "
                         "taken as ones), b (..., n, k), batch dims broadcast; a zero pivot gives inf/nan"),
    # discrete Fourier transforms: no composition from the others is O(n log n)
    "fft": ("fft(x, axes, kind, norm, last_size): numpy.fft's n-dimensional transforms over axes (distinct "
            "non-negative ints, each of size >= 1): kind 'c2c' is fftn of complex x, 'ic2c' ifftn, 'r2c' rfftn "
            "of real x (the last of axes keeps size // 2 + 1), 'c2r' irfftn of complex x (the last of axes "
            "becomes last_size, x holding last_size // 2 + 1 there; last_size is None for the other kinds); "
            "norm 'backward', 'ortho' or 'forward' as numpy's. The result is complex64 for float32 or "
            "complex64 x and complex128 for float64 or complex128 x ('c2r': float32 and float64)"),
    # movement and indexing
    "reshape": "reshape(x, shape): shape fully known (no -1)",
    "permute": "permute(x, axes)",
    "broadcast_to": "broadcast_to(x, shape): may return a read-only view",
    "getitem": ("getitem(x, index): index is a tuple of int, slice, None, Ellipsis, native int64 "
                "arrays and native bool arrays, NumPy semantics"),
    "setitem": "setitem(x, index, s): writes s into x[index] IN PLACE and returns None",
    "index_add": ("index_add(x, index, values): a new array equal to x with values added at "
                  "x[index]; repeated indices accumulate"),
    "gather": "gather(x, axis, index): take_along_axis; index is int64 of x's ndim",
    "scatter_add": "scatter_add(x, axis, index, src): new array, x with src added at index along axis",
    "concatenate": "concatenate(xs, axis): xs a sequence of arrays of one dtype",
    "pad": "pad(x, widths, value): widths is ((before, after), ...) per axis, constant padding",
    "windows": ("windows(x, window, strides, dilation): sliding-window VIEW over the last "
                "len(window) axes, shape (*lead, *n_windows, *window); n = (size - d*(w-1) - 1)//s + 1"),
    # torch's as_strided: a view no composition of the others can express
    "as_strided": ("as_strided(x, shape, strides, offset): a VIEW of contiguous x's memory whose entry "
                   "(i0, i1, ...) is x's row-major element offset + sum(i_k * strides_k) (strides in elements, "
                   ">= 0; the core checks every position is in x); a backend without views returns a copy "
                   "gathered from those positions (as its windows), or leaves it out"),
    "copy": "copy(x): a contiguous copy that owns its memory",
    "contiguous": "contiguous(x): x itself if already contiguous, else a contiguous copy",
    "strides": ("strides(x) -> tuple of ints: the distance in elements between neighbours along each "
                "axis of x in its memory (0 along a broadcast axis); a backend without views answers "
                "the row-major strides of x's shape"),
    "bitcast": ("bitcast(x, dtype): a VIEW of x's memory as dtype. Same itemsize: same shape; otherwise "
                "the last axis (contiguous, its byte size divisible by the new itemsize) scales by the "
                "ratio of the itemsizes"),
    # dtype, creation, host transfer
    "cast": "cast(x, dtype)",
    "zeros": "zeros(shape, dtype)",
    "full": "full(shape, value, dtype)",
    "arange": "arange(start, stop, step, dtype)",
    "eye": "eye(n, m, dtype)",
    "from_host": ("from_host(obj, dtype): obj is a NumPy array, a nested list or a number; dtype "
                  "a plugtorch dtype or None to keep obj's dtype"),
    "to_host": "to_host(x) -> numpy.ndarray (a host copy or view; the caller treats it read-only)",
    # random numbers (explicit generator state, so results are reproducible)
    "generator": "generator(seed) -> a native random generator",
    "generator_get_state": "generator_get_state(gen) -> a JSON-serialisable state",
    "generator_set_state": "generator_set_state(gen, state)",
    "uniform": "uniform(gen, shape, low, high, dtype)",
    "normal": "normal(gen, shape, mean, std, dtype)",
    "randint": "randint(gen, low, high, shape, dtype): integers in [low, high)",
    "permutation": "permutation(gen, n) -> int64 permutation of range(n)",
}

PRIMITIVE_NAMES = frozenset(PRIMITIVES)
