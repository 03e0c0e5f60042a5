"""The matrix product for the shapes NumPy's OpenBLAS runs slowly (``gemm.c``, the ``_gemm`` extension).

NumPy's OpenBLAS reaches about 40 % of an AVX-512 core's peak on products with few rows: an LSTM
step's (20 x 256) @ (256 x 1024) takes 0.19 ms there, 0.075 ms in PyTorch; a small convolution's
per-image (16 x 144) @ (144 x 1024) 82 us, 29 us in PyTorch. The C kernel takes them in 0.11 ms
and 50 us (one thread; docs/native_gemm.md). :func:`matmul` is
``np.matmul`` with that kernel where :func:`wins` says it does, computing B^T @ A^T where that
product is the kernel's (many rows, few columns), and NumPy's elsewhere: other dtypes, vectors,
more than two batch dims, operands with neither rows nor columns adjacent in memory, and
wherever the native kernels' pool does not follow OpenBLAS's thread count (``blas_threads``). With
several threads the kernel splits a product over that pool, by batch items and runs of column
panels, as OpenBLAS would split it (the LSTM's (20 x 256) @ (256 x 1024) on two threads: 68 us,
OpenBLAS 93 us); the split changes no bit.

Its values may differ from NumPy's in the last bits (another summation order) but are
deterministic, and each element depends only on its row of A and column of B: the same product
computed whole, per image, inside a batch or transposed gives the same bits, so the NumPy
backend's matmul primitive and the native convolution (both calling this) keep agreeing exactly,
as do eager and compiled code. The kernel is off where the extension was not built, the CPU has
no AVX-512, the native kernels are off (``PLUGTORCH_NATIVE_KERNELS=0``) or
``PLUGTORCH_NATIVE_GEMM=0`` is set; :data:`STATUS` says which, and :data:`ON` is the switch.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import FLOATS, enabled

# Where the kernel beat NumPy's OpenBLAS 0.3.29 (one thread, float32, AVX-512; timings in
# docs/native_gemm.md): an inner dimension of 8 to 1024 (deeper sums, a convolution's weight
# gradient over the whole batch, stay faster in BLAS), at least 32 columns (a block's width: fewer
# waste lanes), and few rows: up to 32, up to 128 with 128 columns or more, up to 1024 with 512
# columns or more where the sum is at most 64 deep (a convolution's input gradient, W^T @ grad),
# and any number of rows with 1024 columns or more where the sum is at most 256 deep (a layer's
# input projection or decoder: the word-language-model LSTM's (700 x 256) @ (256 x 1024) 3.50 ms
# against 3.92, its (700 x 256) @ (256 x 2000) 6.81 against 7.19; from 160 to 4096 rows and 96 to
# 256 deep the kernel took 0.76-0.91x OpenBLAS's time on one thread, 0.74-1.0x on two).
MIN_INNER, MAX_INNER = 8, 1024
MIN_COLS = 32
FEW_ROWS, MAX_ROWS, WIDE = 32, 128, 128
SHORT_INNER, MAX_SHORT_ROWS, SHORT_WIDE = 64, 1024, 512
BROAD_INNER, BROAD_WIDE = 256, 1024
# A two-dim product of fewer multiply-adds than this stays in NumPy whatever its shape: the kernel's
# fixed cost per call (packing, the pool) loses there to OpenBLAS's small-matrix path, e.g. an MLP's
# weight gradients (10 x 64) @ (64 x 128) 3.5 us against 2.3, (64 x 10) @ (10 x 128) 3.0 against 2.5;
# every shape the rule admits below ~0.8M lost, (32 x 64) @ (64 x 784) (1.6M) is 25 us against 39
# (one thread, the kernel called directly, on the loaded 2-core development machine).
MIN_MACS = 1 << 20
SMALL_BATCH_ROWS, SMALL_BATCH_INNER = 256, 256  # a batch of small products (_small_batch)
# A product (not a convolution) of up to 1024 rows, at most 128 deep, into 256 columns or more,
# which wins' rule sends to the kernel transposed: a transformer's projections from d = 128
# (minGPT's (1024 x 128) @ (128 x 384) and (128 x 512)) (_projection). As given, the kernel took
# 0.81-0.92x the time on one thread (caches cold) and spares the transpose back; on two threads,
# split by runs of rows (gemm.c's gemm_split), 0.65-0.86x. The kernel computes either way, so
# the bits are the same.
PROJ_INNER, PROJ_WIDE = 128, 256


def _load():
    if not enabled():
        return None, "off: the native kernels are off"
    if os.environ.get("PLUGTORCH_NATIVE_GEMM", "1") == "0":
        return None, "off: PLUGTORCH_NATIVE_GEMM=0"
    try:
        from . import _gemm
    except ImportError as exc:  # built without a C compiler, or by a setup.py older than gemm.c
        return None, f"off: not built ({exc})"
    if not hasattr(_gemm, "api"):  # built from older sources: an editable install not rebuilt
        return None, "off: the built extension is stale; rebuild it with pip install -e ."
    if _gemm.isa() != "avx512":
        return None, "off: this CPU has no AVX-512 (NumPy's BLAS runs every product)"
    return _gemm, "on (AVX-512)"


_gemm, STATUS = _load()
ON = _gemm is not None  # the switch: False sends every product to NumPy (tests turn it off)


def _pool_follows_blas() -> bool:
    """Whether the native kernels' pool splits work into as many jobs as OpenBLAS is told to use
    threads (``blas_threads``), so that a kernel on it runs as parallel as BLAS would."""
    # the modules are looked up once: an import statement per product costs about a microsecond
    global _kernels, _blas_threads
    if _blas_threads is None:
        from . import _kernels, blas_threads
        _blas_threads = blas_threads
    return _blas_threads.FOLLOWED is not None and _kernels is not None


_kernels: Any = None
_blas_threads: Any = None


def wins(m: int, k: int, n: int) -> bool:
    """Whether the kernel beats NumPy's BLAS on one (m x k) @ (k x n) product (measured on one thread;
    on two, split over the pool, it beat OpenBLAS's two threads on the same shapes)."""
    if not (MIN_INNER <= k <= MAX_INNER and n >= MIN_COLS):
        return False
    return (m <= FEW_ROWS or (m <= MAX_ROWS and n >= WIDE)
            or (k <= SHORT_INNER and m <= MAX_SHORT_ROWS and n >= SHORT_WIDE)
            or (k <= BROAD_INNER and n >= BROAD_WIDE))


def _small_batch(b, m: int, k: int, n: int) -> bool:
    """Whether a batch of small products (attention's per head, written out: q @ k^T, weights @ v and
    their gradients) goes to the kernel as given: 32 to 64 columns of float32 (16 to 32 of float64),
    which it computes reading A in place (``gemm.c``'s gemm_small), and at most 256 rows and 256 deep.
    Where B's columns are adjacent NumPy's OpenBLAS was as fast on one thread (0.9-1.2x the kernel's
    time), unless the rule would send the product transposed (2x slower there); where B is
    transposed (k^T) OpenBLAS took 1.5-1.8x the kernel's time. minGPT's heads, (64 x 64) @ (64 x 32)
    and (64 x 32) @ (32 x 64) over 64 heads of views: 0.18 ms a call against 0.25-0.38."""
    return (128 <= n * b.itemsize <= 256 and m <= SMALL_BATCH_ROWS and k <= SMALL_BATCH_INNER
            and (b.strides[-1] != b.itemsize or wins(n, k, m)))


def _projection(m: int, k: int, n: int) -> bool:
    """Whether a product (m x k) @ (k x n) is a short projection the kernel takes as given rather
    than transposed (see PROJ_INNER)."""
    return MIN_INNER <= k <= PROJ_INNER and m <= MAX_SHORT_ROWS and n >= PROJ_WIDE and wins(n, k, m)


def _native(a, b, out):
    """The product through the kernel, or None where the rule sends it to NumPy."""
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype not in FLOATS:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != k:
        return None  # NumPy raises its own error
    if a.ndim == b.ndim == 2 and m * k * n < MIN_MACS:
        return None  # too small for the kernel's fixed cost (MIN_MACS); a batch shares it
    # where the transposed product (B^T @ A^T: few rows, many columns) is the kernel's, that is computed
    as_given = wins(m, k, n) or _projection(m, k, n) or (a.ndim > 2 and _small_batch(b, m, k, n))
    transposed = not as_given and wins(n, k, m) and _panels(a.swapaxes(-1, -2))
    if not transposed and not (as_given and _panels(b)):
        return None
    if a.ndim == b.ndim == 2:
        lead = ()  # the common case, without broadcast_shapes' Python-level work
    else:
        try:
            lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            return None
    if len(lead) > 2 or not _pool_follows_blas():
        return None
    if out is not None and (out.shape != lead + (m, n) or out.dtype != a.dtype
                            or np.may_share_memory(out, a) or np.may_share_memory(out, b)):
        return None  # NumPy's matmul buffers an overlapping out itself
    four = (1,) * (2 - len(lead)) + lead
    if transposed:
        a, b, m, n = b.swapaxes(-1, -2), a.swapaxes(-1, -2), n, m
    direct = out is not None and not transposed and (out.strides[-1] == out.itemsize or n == 1)
    got = out if direct else np.empty(lead + (m, n), a.dtype)
    try:
        _gemm.gemm(_four(a, lead, four), _four(b, lead, four), got.reshape(four + (m, n)))
    except ValueError:  # strides that are not whole elements (an unaligned view of a byte buffer)
        return None
    if transposed:
        if not lead and (out is None or out.flags.c_contiguous):
            # back to C order in the kernel's 16 x 16 tiles: NumPy's copy of the transposed view
            # (~1.4 ns an element) cost more than the transposed product saved
            result = np.empty((n, m), a.dtype) if out is None else out
            _gemm.transpose(got, result)
            return result
        got = got.swapaxes(-1, -2)
    if out is None:
        return np.ascontiguousarray(got)  # NumPy's products are C-ordered, and callers may count on it
    if got is not out:
        out[...] = got
    return out


def _four(x, lead, four):
    """x as the kernel's four-dimensional operand: unit dims put in front by a reshape (a view, never
    a copy) where x already has the batch dims; broadcast_to (far slower per call) only where it does not."""
    if x.shape[:-2] == lead:
        return x.reshape(four + x.shape[-2:])
    return np.broadcast_to(x, four + x.shape[-2:])


def _panels(b) -> bool:
    """Whether B's rows copy into the kernel's panels quickly: its columns adjacent in memory (rows
    copied whole) or its rows (a transposed B, copied in 16 x 16 tiles)."""
    return b.strides[-1] == b.itemsize or b.strides[-2] == b.itemsize or b.shape[-1] == 1


def takes(m: int, k: int, n: int) -> bool:
    """Whether :func:`matmul` computes a 2-d float (m x k) @ (k x n) product, B's columns adjacent and
    ``out`` given apart from both, in the kernel as given: a C loop (the LSTM's, ``rnn.c``) that calls
    the kernel itself (``_gemm.api``) then gets the bits this module's products have."""
    return ON and m * k * n >= MIN_MACS and wins(m, k, n) and _pool_follows_blas()


def transposed(x):
    """``x.T`` of a 2-d array, C-contiguous: through the kernel's 16 x 16 tiles where it runs (a
    float array with its columns adjacent), NumPy's copy of the transposed view elsewhere (an LSTM's
    (1024 x 256) weight: ~0.35 ms in NumPy, the time of three of its steps)."""
    if ON and x.dtype in FLOATS and x.ndim == 2 and x.strides[1] == x.itemsize and x.size:
        out = np.empty(x.shape[::-1], x.dtype)
        _gemm.transpose(x, out)
        return out
    return np.ascontiguousarray(x.T)


def matmul(a, b, out=None):
    """``np.matmul(a, b, out=out)``, through the C kernel where it wins."""
    if ON:
        got = _native(a, b, out)
        if got is not None:
            return got
    return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)


def conv2d(input, weight, out, kernel, stride, padding, dilation) -> bool:
    """out (N, O, P) = weight (O, K) @ each image's (K, P) patches (a convolution, groups 1), in the
    kernel without the im2col copy: the patches are packed panel by panel from the input. Only where
    the rule gives (O x K) @ (K x P) to the kernel, so the values are bit for bit that product on
    im2col's patches (the op's decomposition); False, with nothing written, elsewhere."""
    if not ON or input.dtype != weight.dtype or input.dtype not in FLOATS:
        return False
    if not wins(weight.shape[0], weight.shape[1], out.shape[-1]) or not _pool_follows_blas():
        return False
    _gemm.conv2d(input, weight, out, *kernel, *stride, *padding, *dilation)
    return True


# The direct weight gradient (``conv2d_weight_grad``) keeps a lane-wise sum for every weight, so it
# won up to 64 -> 64 channels at 3x3 (O x C*kh*kw of 36,864 weights; 0.9x the products' time at
# 16x16, 0.7x at 56x56) and lost past it (128 -> 128 at 8x8: 1.9x); it reads W output columns
# at a time, so it needs rows of at least 7/8 of W (14 float32, 7 float64): at 8 columns of
# float32 it lost (64 -> 64: 1.6x), at 14 it won (the MNIST CNN's 16 -> 32, batch 64: 0.6x).
# Strided, it won too: ResNet's 16 -> 32 3x3 at stride 2 0.6x, its 1x1 projection 0.75x.
WGRAD_MAX_WEIGHTS = 64 * 64 * 9


def conv2d_weight_grad(grad_output, input, weight_shape, stride, padding, dilation):
    """The weight gradient (``weight_shape``, groups 1) of a convolution in the kernel that reads
    every patch row from the image, copied once into a zero border (its columns dealt into
    ``stride`` planes), instead of forming the patches and multiplying (ResNet's 16 -> 16 3x3 at
    32x32, batch 32: 4.3 -> 1.7 ms, one thread, caches cold); None where its rule says the
    products win. Its sums run in another order than the products': the values agree to
    rounding, not bit for bit."""
    if not ON or input.dtype != grad_output.dtype or input.dtype not in FLOATS:
        return None
    lanes = 64 // input.dtype.itemsize
    o, cg, kh, kw = weight_shape
    if grad_output.shape[3] < lanes - lanes // 8 or o * cg * kh * kw > WGRAD_MAX_WEIGHTS or not _pool_follows_blas():
        return None
    if grad_output.strides[3] != grad_output.itemsize:
        grad_output = np.ascontiguousarray(grad_output)  # the kernel reads W of a row's columns at once
    out = np.empty((o, cg * kh * kw), dtype=input.dtype)
    _gemm.conv2d_weight_grad(input, grad_output, out, kh, kw, *stride, *padding, *dilation)
    return out.reshape(weight_shape)


def wrap(fallback):
    """The matmul primitive ``fallback(x, y)`` with the kernel in front (``fallback`` itself where
    the kernel is off at import)."""
    if not ON:
        return fallback

    def matmul(x, y):
        # a small 2-D product (most of a step's backward) goes to NumPy before _native's other tests
        if ON and not (x.ndim == 2 == y.ndim and x.shape[0] * x.shape[1] * y.shape[-1] < MIN_MACS):
            got = _native(x, y, None)
            if got is not None:
                return got
        return fallback(x, y)
    return matmul
