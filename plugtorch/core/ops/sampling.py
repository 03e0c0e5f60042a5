"""Resampling: ``F.interpolate`` (nearest, nearest-exact, linear/bilinear/trilinear, bicubic,
area, and the antialiased bilinear/bicubic/lanczos filters), ``pixel_shuffle`` and
``pixel_unshuffle``.

Every interpolation mode is separable: along each spatial axis, output position ``i``
is a weighted sum of a few input positions (its *taps*). The taps and weights depend
only on the sizes, so they are computed on the host with NumPy — in float32 for float32
input, as torch's CPU kernels do, so the chosen neighbours agree to the last rounding —
and applied as one ``index_select`` per tap: no host round-trip of tensor values, and
the gradient is index_select's (each input position receives its weighted copies).

uint8 images take torch's integer path: nearest modes gather as for floats; bilinear,
bicubic and lanczos weights are held in fixed point, as torch's CPU kernels (and PIL) do,
so that results agree pixel for pixel (``_resample_uint8``).
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import int32, uint8
from ..optable import op, public
from ..tensor import Tensor
from . import elementwise as ew
from .creation import tensor as _tensor
from .index import index_select
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

_F = ("nn.functional",)


# -- taps along one axis: (indices (out, K), weights (out, K)) ----------------------------------

def _scale(in_size, out_size, align_corners, scale):
    """torch's area_pixel_compute_scale: the input step per output step."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _nearest_taps(in_size, out_size, scale, exact):
    if out_size == in_size:
        return np.arange(out_size)[:, None], np.ones((out_size, 1))
    # torch computes the scale and the product in float32 (floorf), for every dtype
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size) / np.float32(out_size)
    dst = np.arange(out_size, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0))
    src = np.minimum(np.floor(dst * s).astype(np.int64), in_size - 1)
    return src[:, None], np.ones((out_size, 1))


def _linear_taps(in_size, out_size, align_corners, scale, real):
    if out_size == in_size:
        return np.arange(out_size)[:, None], np.ones((out_size, 1))
    s = real(_scale(in_size, out_size, align_corners, scale))
    dst = np.arange(out_size, dtype=real)
    src = s * dst if align_corners else np.maximum(s * (dst + real(0.5)) - real(0.5), real(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0, 0, 1)
    i1 = i0 + (i0 < in_size - 1)
    return np.stack([i0, i1], 1), np.stack([1 - lam, lam], 1)


def _cubic(x, a):
    """Keys' cubic convolution kernel with parameter ``a`` at |x| (torch's cubic_convolution1/2)."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0))


def _bicubic_taps(in_size, out_size, align_corners, scale, real):
    s = real(_scale(in_size, out_size, align_corners, scale))
    dst = np.arange(out_size, dtype=real)
    src = s * dst if align_corners else s * (dst + real(0.5)) - real(0.5)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    t = np.clip(src - i0, 0, 1)
    offsets = np.arange(-1, 3)
    idx = np.clip(i0[:, None] + offsets, 0, in_size - 1)
    return idx, _cubic(t[:, None] - offsets, real(-0.75))


def _triangle(x):
    return np.maximum(1 - np.abs(x), 0)


def _lanczos3(x):
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0)


# antialiased filters: (filter, support at scale 1)
_AA = {"bilinear": (_triangle, 1.0), "bicubic": (lambda x: _cubic(x, -0.5), 2.0), "lanczos": (_lanczos3, 3.0)}


def _aa_taps(in_size, out_size, align_corners, scale, real, mode):
    """torch's antialiased taps: the filter stretched by the downscale factor, renormalised."""
    flt, base = _AA[mode]
    s = real(_scale(in_size, out_size, align_corners, scale))
    support = base * s if s >= 1 else real(base)
    inv = 1 / s if s >= 1 else real(1)
    center = s * (np.arange(out_size, dtype=real) + real(0.5))
    lo = np.maximum((center - support + real(0.5)).astype(np.int64), 0)
    hi = np.minimum((center + support + real(0.5)).astype(np.int64), in_size)
    k = max(int(math.ceil(support)) * 2 + 1, 1)
    j = np.arange(k)
    idx = lo[:, None] + j
    w = flt((idx - center[:, None] + real(0.5)) * inv).astype(real)
    w = np.where(idx < hi[:, None], w, 0)
    total = w.sum(1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w)
    return np.minimum(idx, in_size - 1), w


def _resample(x, taps):
    """Apply per-axis taps (one (indices, weights) pair per trailing spatial axis)."""
    nd = len(taps)
    dev = x._backend.name
    for k, (idx, w) in enumerate(taps):
        axis = x.ndim - nd + k
        if idx.shape[1] == 1 and np.all(w == 1):
            x = index_select(x, axis, _tensor(idx[:, 0], device=dev))
            continue
        shape = (-1,) + (1,) * (nd - 1 - k)
        out = None
        for t in range(idx.shape[1]):
            if not np.any(w[:, t]):
                continue
            term = index_select(x, axis, _tensor(idx[:, t], device=dev))
            term = term * _tensor(w[:, t], dtype=x.dtype, device=dev).reshape(shape)
            out = term if out is None else out + term
        x = out if out is not None else index_select(x, axis, _tensor(idx[:, 0], device=dev)) * 0
    return x


def _real(x):
    return np.float64 if x.dtype.name == "float64" else np.float32


def _scales(scales, nd):
    return (None,) * nd if scales is None else tuple(scales)


def _tuple_or_none(scales):
    return None if scales is None else tuple(scales)


# -- the ops ---------------------------------------------------------------------------------

def _interpolate_nearest_args(input, output_size, scales=None, exact=False):
    return (input,), {"output_size": tuple(output_size), "scales": _tuple_or_none(scales), "exact": bool(exact)}


@op(bind=_interpolate_nearest_args)
def interpolate_nearest(input, *, output_size, scales, exact):
    """``F.interpolate``'s 'nearest' and ('exact') 'nearest-exact' modes over the trailing axes.

    ``scales`` (given scale factors) set the source positions as in torch, else the size
    ratio does.

    A backend kernel receives the input and output_size, scales (a tuple or None) and exact by name.
    """
    sizes = input.shape[input.ndim - len(output_size):]
    return _resample(input, [_nearest_taps(i, o, s, exact)
                             for i, o, s in zip(sizes, output_size, _scales(scales, len(output_size)))])


def _interpolate_linear_args(input, output_size, align_corners=False, scales=None, antialias=False):
    return (input,), {"output_size": tuple(output_size), "align_corners": bool(align_corners),
                      "scales": _tuple_or_none(scales), "antialias": bool(antialias)}


@op(bind=_interpolate_linear_args)
def interpolate_linear(input, *, output_size, align_corners, scales, antialias):
    """``F.interpolate``'s 'linear', 'bilinear' and 'trilinear' modes over the trailing axes.

    With ``antialias``, torch's triangle filter widened by the downscale factor.

    A backend kernel receives the input and output_size, align_corners, scales (a tuple or
    None) and antialias by name.
    """
    nd = len(output_size)
    sizes = input.shape[input.ndim - nd:]
    real = _real(input)
    if antialias:
        return _resample(input, [_aa_taps(i, o, align_corners, s, real, "bilinear")
                                 for i, o, s in zip(sizes, output_size, _scales(scales, nd))])
    return _resample(input, [_linear_taps(i, o, align_corners, s, real)
                             for i, o, s in zip(sizes, output_size, _scales(scales, nd))])


def _interpolate_filtered_args(input, output_size, align_corners=False, scales=None, mode="bicubic"):
    if mode not in ("bicubic", "bicubic_aa", "lanczos_aa"):
        raise ValueError(f"interpolate_filtered(): unknown mode {mode!r}")
    return (input,), {"output_size": tuple(output_size), "align_corners": bool(align_corners),
                      "scales": _tuple_or_none(scales), "mode": mode}


@op(bind=_interpolate_filtered_args)
def interpolate_filtered(input, *, output_size, align_corners, scales, mode):
    """``F.interpolate``'s 'bicubic' (and antialiased 'bicubic' and 'lanczos') modes.

    mode: 'bicubic' (Keys' cubic, a = -0.75, edge taps clamped), 'bicubic_aa' or
    'lanczos_aa' (torch's antialiased filters).

    A backend kernel receives the input and output_size, align_corners, scales (a tuple or
    None) and mode by name.
    """
    nd = len(output_size)
    sizes = input.shape[input.ndim - nd:]
    real = _real(input)
    if mode == "bicubic":
        taps = [_bicubic_taps(i, o, align_corners, s, real) for i, o, s in zip(sizes, output_size, _scales(scales, nd))]
    else:
        taps = [_aa_taps(i, o, align_corners, s, real, mode.split("_")[0])
                for i, o, s in zip(sizes, output_size, _scales(scales, nd))]
    return _resample(input, taps)


# -- uint8 images: torch's fixed-point separable resampling --------------------------------------

def _fixed_point(idx, w, in_size):
    """Taps as torch's uint8 kernels hold them: the weights of one source position summed
    (clamped edge taps merge), then scaled by 2**precision and rounded half away from zero to
    int16, precision as high as the largest weight allows. (indices, int weights, precision)."""
    rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    dense = np.zeros((idx.shape[0], in_size))
    np.add.at(dense, (rows, idx.reshape(-1)), w.reshape(-1).astype(np.float64))
    w_max = dense.max()
    precision = 0
    while precision < 22 and int(0.5 + w_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    k = max(int(np.count_nonzero(dense, axis=1).max()), 1)
    cols = np.argsort(dense == 0, axis=1, kind="stable")[:, :k]  # each row's taps first, in order
    v = np.take_along_axis(dense, cols, 1) * (1 << precision)
    return cols, np.trunc(v + np.where(v < 0, -0.5, 0.5)).astype(np.int32), precision


def _resample_uint8(x, taps_of, output_size):
    """``F.interpolate`` of a uint8 (N, C, H, W) image as torch computes it on the CPU: one pass
    along W, then one along H (a dim whose size is kept is skipped), each a sum of int16
    weights times pixels, rounded ((sum + 2**(p-1)) >> p) and clamped to 0..255, so that the
    second pass reads uint8 pixels; ``taps_of(axis, in_size, out_size)`` gives float taps."""
    dev = x._backend.name
    for axis in (3, 2):
        in_size, out_size = x.shape[axis], output_size[axis - 2]
        if in_size == out_size:
            continue
        idx, weights = taps_of(axis, in_size, out_size)
        cols, w, precision = _fixed_point(idx, weights, in_size)
        shape = (-1,) + (1,) * (3 - axis)
        wide = x.to(int32)
        acc = None
        for t in range(cols.shape[1]):
            weight = _tensor(w[:, t], device=dev).reshape(shape)
            term = index_select(wide, axis, _tensor(cols[:, t], device=dev)) * weight
            acc = term if acc is None else acc + term
        x = ew.clamp(ew.floor_divide(acc + (1 << (precision - 1)), 1 << precision), 0, 255).to(uint8)
    return x


def _interpolate_uint8(input, output_size, mode, align_corners, scales, antialias):
    """torch's uint8 modes other than nearest: (N, C, H, W) bilinear, bicubic and lanczos."""
    if input.ndim != 4 or mode not in ("bilinear", "bicubic", "lanczos"):
        raise NotImplementedError(f"interpolate(): mode '{mode}' is not implemented for uint8 "
                                  f"{input.ndim}D input (torch takes uint8 in the nearest modes and "
                                  "in 4-D bilinear, bicubic and lanczos); convert it with .float()")
    scales = _scales(scales, 2)

    def taps_of(axis, in_size, out_size):
        s = scales[axis - 2]
        if antialias:
            return _aa_taps(in_size, out_size, align_corners, s, np.float64, mode)
        if mode == "bilinear":
            return _linear_taps(in_size, out_size, align_corners, s, np.float64)
        return _bicubic_taps(in_size, out_size, align_corners, s, np.float64)
    return _resample_uint8(input, taps_of, output_size)


# -- F.interpolate ---------------------------------------------------------------------------

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_RANK = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4, "lanczos": 4}


def _sizes(input, size, scale_factor, dim):
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got input with "
                    f"spatial dimensions of {list(input.shape[2:])} and output size of {size}. Please provide "
                    "input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
            return tuple(int(s) for s in size), None
        return (int(size),) * dim, None
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                f"spatial dimensions of {list(input.shape[2:])} and scale_factor of shape {scale_factor}. "
                "Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in "
                "(s1, s2, ...,sK) format.")
        scales = tuple(float(s) for s in scale_factor)
    else:
        scales = (float(scale_factor),) * dim
    return tuple(math.floor(s * f) for s, f in zip(input.shape[2:], scales)), scales


@public("nn.functional")
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resample (N, C, *spatial) to ``size`` or by ``scale_factor`` (torch's modes and rules).

    With a ``scale_factor`` (and ``recompute_scale_factor`` not True), the factor itself
    places the source positions, as in torch; otherwise the size ratio does.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): argument 'input' must be Tensor, not {type(input).__name__}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.ndim - 2
    if input.ndim not in (3, 4, 5) or mode not in _MODES.split(" | "):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  f"{input.ndim}D) for the modes: {_MODES} (got {mode})")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    output_size, scales = _sizes(input, size, scale_factor, dim)
    if mode == "area" or recompute_scale_factor:
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and "
                         "requires a 4-D tensor as input")
    if mode in _RANK and _RANK[mode] != input.ndim:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_RANK[mode]}D input")
    if any(s <= 0 for s in input.shape[2:]) or any(o <= 0 for o in output_size):
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"{tuple(input.shape[2:])} and output {output_size}")
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if input.dtype is uint8 and mode not in ("nearest", "nearest-exact"):
        return _interpolate_uint8(input, output_size, mode, align_corners, scales, antialias)
    if not input.dtype.is_floating_point and input.dtype is not uint8:
        raise NotImplementedError(f"interpolate(): mode '{mode}' is not implemented for "
                                  f"{input.dtype.name} input; convert it with .float()")
    if mode in ("nearest", "nearest-exact"):
        return interpolate_nearest(input, output_size, scales, mode == "nearest-exact")
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dim - 1](input, output_size)
    if mode == "lanczos":
        return interpolate_filtered(input, output_size, False, scales, "lanczos_aa")
    if mode == "bicubic":
        return interpolate_filtered(input, output_size, align_corners, scales,
                                    "bicubic_aa" if antialias else "bicubic")
    return interpolate_linear(input, output_size, align_corners, scales, antialias)


@public("nn.functional")
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated spelling of :func:`interpolate` (torch warns likewise)."""
    import warnings
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


@public("nn.functional")
def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode='nearest')``."""
    import warnings
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


@public("nn.functional")
def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode='bilinear', align_corners=True)``."""
    import warnings
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# -- pixel shuffle ---------------------------------------------------------------------------

def _check_shuffle(name, input, factor):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if not isinstance(factor, int) or factor <= 0:
        what = "upscale_factor" if name == "pixel_shuffle" else "downscale_factor"
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")


@op(exposed=("plugtorch",) + _F)
def pixel_shuffle(input, upscale_factor):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r): channel blocks become r x r pixel blocks."""
    _check_shuffle("pixel_shuffle", input, upscale_factor)
    r = upscale_factor
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by "
                           f"the square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


@op(exposed=("plugtorch",) + _F)
def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W): the inverse of pixel_shuffle."""
    _check_shuffle("pixel_unshuffle", input, downscale_factor)
    r = downscale_factor
    *lead, c, h, w = input.shape
    for what, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by downscale_factor, but "
                               f"input.size({d})={size} is not divisible by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)
