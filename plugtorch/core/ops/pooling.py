"""Pooling on the N-d window view: max_pool{2,3}d (with their registered backward ops),
avg_pool{2,3}d, adaptive_avg_pool{1,2,3}d, and the 1-D max/avg pools as 2-D pools of height 1.

Each op's ``bind`` checks and normalises torch's arguments (one int per spatial dim, a batch
dim), so kernels and decompositions see batched input and the resolved geometry. One set
of helpers serves every rank; each rank is an op of its own, as in torch.
"""
from __future__ import annotations

import itertools
import math

from ..dispatch import call_op
from ..dtypes import get_default_dtype
from ..geometry import window_count
from ..optable import Done, op
from ..tensor import Tensor
from . import elementwise as ew
from .conv import as_2d_attrs, batched, ntuple, unbatched_call
from .creation import arange, ones
from .movement import pad
from .shape import cat, stack
from .window import fold, windows

_F = ("nn.functional",)
_BOTH = ("plugtorch",) + _F


def _geometry(op_name, x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    """The normalised attrs of a pooling call, checked against torch's rules."""
    k = ntuple(kernel_size, nd, "kernel_size")
    s = ntuple(stride if stride not in (None, (), []) else k, nd, "stride")
    p = ntuple(padding, nd, "padding")
    d = ntuple(dilation, nd, "dilation")
    if min(k + s + d) <= 0 or min(p) < 0:
        raise RuntimeError(f"{op_name}: kernel_size, stride and dilation must be greater than zero and "
                           f"padding non-negative, got kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise RuntimeError(f"{op_name}: pad should be at most half of effective kernel size, but got "
                           f"pad={max(p)}, kernel_size={max(k)}")
    size = x.shape[x.ndim - nd:]
    out = [window_count(*t, ceil_mode) for t in zip(size, k, s, p, d)]
    if min(out) <= 0:
        c = x.shape[x.ndim - nd - 1]
        raise RuntimeError(f"{op_name}: Given input size: ({'x'.join(map(str, (c,) + tuple(size)))}). "
                           f"Calculated output size: ({'x'.join(map(str, [c] + out))}). Output size is "
                           "too small")
    return {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": ceil_mode}


def _padded(x, kernel_size, stride, padding, dilation, value):
    """``x`` padded on both sides, plus at the end where ceil_mode's last window overhangs."""
    nd = len(kernel_size)
    widths = []
    for size, k, s, p, d in zip(x.shape[x.ndim - nd:], kernel_size, stride, padding, dilation):
        n = (size + 2 * p - d * (k - 1) - 1 + s - 1) // s + 1
        widths.append((p, p + max(0, (n - 1) * s + d * (k - 1) + 1 - (size + 2 * p))))
    flat = tuple(w for pair in reversed(widths) for w in pair)
    return pad(x, flat, value=value) if any(flat) else x  # pad() would copy even for none


def _pool_windows(x, value, *, kernel_size, stride, padding, dilation, ceil_mode):
    """The (N, C, *out, *kernel) windows of a pooling call (ceil_mode's extra one included)."""
    nd = len(kernel_size)
    w = windows(_padded(x, kernel_size, stride, padding, dilation, value), kernel_size, stride, dilation)
    out = tuple(window_count(*t, ceil_mode) for t in zip(x.shape[2:], kernel_size, stride, padding, dilation))
    if tuple(w.shape[2:2 + nd]) == out:
        return w
    return w[(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]


def _lowest(dtype):
    """The padding value no element can lose a max to: -inf, or the integer dtype's minimum."""
    if dtype.is_floating_point:
        return float("-inf")
    if dtype.name == "bool":
        return False
    import numpy as np
    return int(np.iinfo(dtype.name).min)


def _check_input(op_name, input, integers=True):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point and (not integers or input.dtype.name == "bool"):
        raise RuntimeError(f"{op_name}: expected a floating point input, got {input.dtype.name}")


# -- max pooling -------------------------------------------------------------------------

def _max_pool(input, **geometry):
    """A running maximum over the window offsets (NaN-propagating, like torch)."""
    w = _pool_windows(input, _lowest(input.dtype), **geometry)
    offsets = list(itertools.product(*(range(k) for k in geometry["kernel_size"])))
    out = w[(Ellipsis,) + offsets[0]]
    for o in offsets[1:]:
        out = ew.maximum(out, w[(Ellipsis,) + o])
    return out.contiguous() if len(offsets) == 1 else out


def _max_pool_rule(backward_op):
    def rule(ctx, g):
        return call_op(backward_op, (g, ctx.saved[0], ctx.output), ctx.attrs)
    return rule


def _max_pool_args(op_name, nd):
    """torch's checks and normalisation for max_pool{nd}d: the bind of each rank's op."""
    integers = nd > 1  # torch has no integer max_pool1d

    def bind(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        _check_input(op_name, input, integers)
        x, unbatched = batched(op_name, input, nd + 2)
        geometry = _geometry(op_name, x, nd, kernel_size, stride, padding, dilation, ceil_mode)
        if return_indices:  # the values with their indices: built from other ops, not this one
            out = _max_pool_with_indices(x, geometry)
            return Done(tuple(o.squeeze(0) for o in out) if unbatched else out)
        if unbatched:
            return unbatched_call(op_name, (x,), geometry)
        return (x,), geometry
    return bind


@op(bind=_max_pool_args("max_pool2d", 2), derivative=_max_pool_rule("max_pool2d_backward"),
    save=("inputs", "output"), exposed=_BOTH)
def max_pool2d(input, *, kernel_size, stride, padding, dilation, ceil_mode):
    """Max over sliding windows; the gradient goes to each window's first maximum (last NaN, if NaN).

    A backend kernel receives a 4-D input and kernel_size, stride, padding, dilation (pairs)
    and ceil_mode by name.
    """
    return _max_pool(input, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                     ceil_mode=ceil_mode)


@op(bind=_max_pool_args("max_pool3d", 3), derivative=_max_pool_rule("max_pool3d_backward"),
    save=("inputs", "output"), exposed=_BOTH)
def max_pool3d(input, *, kernel_size, stride, padding, dilation, ceil_mode):
    """Max over sliding 3-D windows of (N, C, D, H, W); the gradient goes to each window's first maximum
    (last NaN, if NaN).

    A backend kernel receives a 5-D input and kernel_size, stride, padding, dilation (triples)
    and ceil_mode by name.
    """
    return _max_pool(input, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                     ceil_mode=ceil_mode)


@op(bind=_max_pool_args("max_pool1d", 1), exposed=_BOTH)
def max_pool1d(input, *, kernel_size, stride, padding, dilation, ceil_mode):
    """Max over sliding windows of (N, C, L): max_pool2d on a height-1 image.

    A backend kernel receives a 3-D input and kernel_size, stride, padding, dilation
    (1-tuples) and ceil_mode by name.
    """
    attrs = as_2d_attrs({"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation})
    return call_op("max_pool2d", (input.unsqueeze(2),), {**attrs, "ceil_mode": ceil_mode}).squeeze(2)


def _last_nans(taps, out):
    """Per window tap, the windows whose maximum is NaN and whose last NaN (row-major) the tap
    holds: torch's kernels move a window's index to every NaN they meet (``val > max ||
    isnan(val)``), so its gradient and its index are the last NaN's."""
    left = ew.isnan(out)
    hits = [None] * len(taps)
    for i in reversed(range(len(taps))):
        hits[i] = ew.logical_and(ew.isnan(taps[i]), left)
        left = ew.logical_and(left, ew.logical_not(hits[i]))
    return hits


def _max_pool_backward(grad_output, input, output, **geometry):
    """Each window's gradient goes to its first maximum (row-major), and where the maximum is
    NaN to its last NaN, as in torch.

    Built from comparisons and multiplies rather than argmax/scatter: on CPUs those
    branch on every element and run several times slower on real activations.
    """
    x, out = input.detach(), output.detach()
    k, s, p, d = (geometry[a] for a in ("kernel_size", "stride", "padding", "dilation"))
    nd = len(k)
    w = _pool_windows(x, _lowest(x.dtype), **geometry)
    taps = [w[(Ellipsis,) + offset] for offset in itertools.product(*(range(ki) for ki in k))]
    # (no value equals a NaN maximum, so those windows are claimed by no tap below)
    nans = _last_nans(taps, out) if x.dtype.is_floating_point else None
    claimed, parts = None, []
    for i, tap in enumerate(taps):
        hit = ew.eq(tap, out)
        if claimed is None:
            claimed = hit
        else:
            hit = ew.logical_and(hit, ew.logical_not(claimed))
            claimed = ew.logical_or(claimed, hit)
        if nans is not None:
            hit = ew.logical_or(hit, nans[i])
        parts.append(grad_output * hit.to(grad_output.dtype))
    # stacked on a new leading axis (contiguous writes), then viewed as (..., *kernel)
    cols = stack(parts, 0).reshape(*k, *out.shape).permute(nd, nd + 1, *range(nd + 2, 2 * nd + 2),
                                                          *range(nd))
    # folded onto exactly the span the windows cover (so fold's own derivative sees the same
    # windows), then cut (padding) or extended with zeros (an uncovered end) to the input's extent
    span = [(o - 1) * si + di * (ki - 1) + 1 for o, si, di, ki in zip(out.shape[2:], s, d, k)]
    dx = fold(cols, tuple(out.shape[:2]) + tuple(span), k, s, d)
    widths = tuple(w for pi, size, t in reversed(list(zip(p, x.shape[2:], span))) for w in (-pi, pi + size - t))
    return pad(dx, widths).contiguous() if any(widths) else dx   # (a cut is a view; torch's is contiguous)


def _backward_op(name):
    """max_pool{2,3}d's gradient op: checked by ``bind``, computed by ``_max_pool_backward``."""
    def bind(grad_output, input, output, kernel_size, stride, padding, dilation, ceil_mode):
        nd = len(kernel_size)
        if input.ndim != nd + 2 or output.ndim != nd + 2 or grad_output.shape != output.shape or \
                input.shape[:2] != output.shape[:2]:
            raise RuntimeError(f"{name}: expected input (N, C, {nd} spatial dims) and grad_output and output of "
                               f"one shape (N, C, {nd} spatial dims); got input {list(input.shape)}, grad_output "
                               f"{list(grad_output.shape)}, output {list(output.shape)}")
        return (grad_output, input, output), {"kernel_size": tuple(kernel_size), "stride": tuple(stride),
                                              "padding": tuple(padding), "dilation": tuple(dilation),
                                              "ceil_mode": ceil_mode}

    def backward(grad_output, input, output, *, kernel_size, stride, padding, dilation, ceil_mode):
        return _max_pool_backward(grad_output, input, output, kernel_size=kernel_size, stride=stride,
                                  padding=padding, dilation=dilation, ceil_mode=ceil_mode)
    backward.__doc__ = (f"The gradient of {name[:-9]}: ``grad_output`` routed to each window's first "
                        "maximum (its last NaN where the maximum is NaN).")
    return op(name, bind=bind)(backward)


max_pool2d_backward = _backward_op("max_pool2d_backward")
max_pool3d_backward = _backward_op("max_pool3d_backward")


def _max_pool_with_indices(x, geometry):
    w = _pool_windows(x, _lowest(x.dtype), **geometry)
    nd = len(geometry["kernel_size"])
    out_size = w.shape[2:2 + nd]
    flat = w.reshape(*w.shape[:2 + nd], -1)
    idx = flat.argmax(-1, keepdim=True)      # the first maximum gets the gradient, as in torch
    if x.dtype.is_floating_point:            # ... and in a NaN window the last NaN (_last_nans)
        nan = flat.isnan()
        last = (flat.shape[-1] - 1) - nan.flip(-1).to(x.dtype).argmax(-1, keepdim=True)
        idx = ew.where(nan.any(-1, keepdim=True), last, idx)
    out = flat.gather(-1, idx).squeeze(-1)
    return out, _flat_indices(idx.squeeze(-1), x, geometry, out_size)


def _flat_indices(win_idx, x, geometry, out_size):
    """Window-relative argmax -> index into the flattened input plane/volume (torch's convention)."""
    k, s, p, d = (geometry[a] for a in ("kernel_size", "stride", "padding", "dilation"))
    nd, dev = len(k), x._backend.name
    size = x.shape[2:]
    flat, rest = None, win_idx
    for i in reversed(range(nd)):
        r = rest % k[i]
        rest = rest // k[i]
        shape = (out_size[i],) + (1,) * (nd - 1 - i)
        pos = arange(out_size[i], device=dev).reshape(shape) * s[i] - p[i] + r * d[i]
        term = pos * math.prod(size[i + 1:])
        flat = term if flat is None else flat + term
    return flat


# -- average pooling ---------------------------------------------------------------------

def _avg_pool(input, *, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    nd = len(kernel_size)
    dims = tuple(range(-nd, 0))
    geometry = {"kernel_size": kernel_size, "stride": stride, "padding": padding,
                "dilation": (1,) * nd, "ceil_mode": ceil_mode}
    total = _pool_windows(input, 0.0, **geometry).sum(dims)
    if divisor_override:
        return total / divisor_override
    size = input.shape[2:]
    overhang = tuple(_padded(input[:1, :1], kernel_size, stride, padding, (1,) * nd, 0.0).shape[2:]) != tuple(
        s + 2 * p for s, p in zip(size, padding))
    if count_include_pad and not overhang:
        return total / math.prod(kernel_size)
    # Divide each window by how many of its cells are real (or real + padding) input.
    mask = ones(1, 1, *size, dtype=input.dtype, device=input._backend.name)
    if count_include_pad:  # padding counts, the ceil_mode overhang does not
        mask = pad(mask, tuple(w for p in reversed(padding) for w in (p, p)), value=1.0)
        counts = _pool_windows(mask, 0.0, **{**geometry, "padding": (0,) * nd}).sum(dims)
        # ceil_mode's rule drops a last window that starts in the right padding; over the padded
        # mask (padding 0) that window starts inside, so keep the output's count of windows
        counts = counts[(Ellipsis,) + tuple(slice(0, o) for o in total.shape[-nd:])]
    else:
        counts = _pool_windows(mask, 0.0, **geometry).sum(dims)
    return total / counts


def _avg_pool_args(op_name, nd):
    """torch's checks and normalisation for avg_pool{nd}d: the bind of each rank's op."""
    def bind(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
        if not isinstance(input, Tensor):
            raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        x, unbatched = batched(op_name, input, nd + 2)
        g = _geometry(op_name, x, nd, kernel_size, stride, padding, 1, ceil_mode)
        if divisor_override is not None and divisor_override == 0:
            raise RuntimeError(f"{op_name}: divisor must be not zero")
        x = x if x.dtype.is_floating_point else x.to(get_default_dtype())
        attrs = {"kernel_size": g["kernel_size"], "stride": g["stride"], "padding": g["padding"],
                 "ceil_mode": ceil_mode, "count_include_pad": count_include_pad}
        if nd > 1:
            attrs["divisor_override"] = divisor_override
        if unbatched:
            return unbatched_call(op_name, (x,), attrs)
        return (x,), attrs
    return bind


@op(bind=_avg_pool_args("avg_pool2d", 2), exposed=_BOTH)
def avg_pool2d(input, *, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Mean over sliding windows (padding, ceil_mode, count_include_pad, divisor_override)."""
    return _avg_pool(input, kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, divisor_override=divisor_override)


@op(bind=_avg_pool_args("avg_pool3d", 3), exposed=_F)
def avg_pool3d(input, *, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Mean over sliding 3-D windows of (N, C, D, H, W)."""
    return _avg_pool(input, kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, divisor_override=divisor_override)


_avg_pool1d_checks = _avg_pool_args("avg_pool1d", 1)


def _avg_pool1d_args(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    # torch's avg_pool1d takes no divisor_override; the checks are the other ranks'
    return _avg_pool1d_checks(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


@op(bind=_avg_pool1d_args, exposed=_BOTH)
def avg_pool1d(input, *, kernel_size, stride, padding, ceil_mode, count_include_pad):
    """Mean over sliding windows of (N, C, L): avg_pool2d on a height-1 image."""
    attrs = {"kernel_size": (1,) + kernel_size, "stride": (1,) + stride, "padding": (0,) + padding,
             "ceil_mode": ceil_mode, "count_include_pad": count_include_pad, "divisor_override": None}
    return call_op("avg_pool2d", (input.unsqueeze(2),), attrs).squeeze(2)


# -- adaptive average pooling ----------------------------------------------------------------

def _adaptive_avg_pool(input, *, output_size):
    """Means over torch's adaptive windows, one spatial axis at a time (the windows are boxes,
    so the mean over a box is the mean of the per-axis means)."""
    nd = len(output_size)
    x = input
    for i, out in enumerate(output_size):
        axis = x.ndim - nd + i
        size = x.shape[axis]
        if size % out == 0:  # equal windows: one reshape and mean
            k = size // out
            x = x.reshape(*x.shape[:axis], out, k, *x.shape[axis + 1:]).mean(axis + 1)
            continue
        # torch's adaptive windows: start = floor(i*size/out), end = ceil((i+1)*size/out)
        parts = []
        for j in range(out):
            lo, hi = (j * size) // out, -(-((j + 1) * size) // out)
            parts.append(x.narrow(axis, lo, hi - lo).mean(axis, keepdim=True))
        x = cat(parts, axis)
    return x


def _adaptive_args(op_name, nd):
    """torch's checks and normalisation for adaptive_avg_pool{nd}d: the bind of each rank's op."""
    def bind(input, output_size):
        if not isinstance(input, Tensor):
            raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        x, unbatched = batched(op_name, input, nd + 2)
        if output_size is None or isinstance(output_size, int):
            sizes = (output_size,) * nd
        else:
            sizes = tuple(output_size)
            sizes = sizes * nd if len(sizes) == 1 else sizes
        if len(sizes) != nd or not all(v is None or isinstance(v, int) for v in sizes):
            raise ValueError(f"{op_name}: output_size must be an int or {nd} ints (None keeps a size), "
                             f"got {output_size!r}")
        size = tuple(x.shape[2 + i] if v is None else v for i, v in enumerate(sizes))
        if any(s == 0 for s in x.shape[2:]) or min(size, default=1) < 0:
            raise RuntimeError(f"{op_name}(): Expected input to have non-zero size for non-batch dimensions, "
                               f"but input has sizes {list(input.shape)}")
        if unbatched:
            return unbatched_call(op_name, (x,), {"output_size": size})
        return (x,), {"output_size": size}
    return bind


@op(bind=_adaptive_args("adaptive_avg_pool1d", 1), exposed=_BOTH)
def adaptive_avg_pool1d(input, *, output_size):
    """Mean over torch's adaptive windows of (N, C, L) for a given output length."""
    return _adaptive_avg_pool(input, output_size=output_size)


@op(bind=_adaptive_args("adaptive_avg_pool2d", 2), exposed=_BOTH)
def adaptive_avg_pool2d(input, *, output_size):
    """Mean over torch's adaptive windows for a given output size (None keeps that size)."""
    return _adaptive_avg_pool(input, output_size=output_size)


@op(bind=_adaptive_args("adaptive_avg_pool3d", 3), exposed=_F)
def adaptive_avg_pool3d(input, *, output_size):
    """Mean over torch's adaptive windows of (N, C, D, H, W) (None keeps that size)."""
    return _adaptive_avg_pool(input, output_size=output_size)
