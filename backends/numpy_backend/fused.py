"""Fused NumPy kernels for composite ops and the registered ops their derivatives use.

Each computes in one or two passes what the decomposition does in several ops,
and is numerically at least as careful.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .native import gemm
from .xp_table import numpy_erf

# ufuncs given out=... return arrays, 0-d ones included (the contract's); typed Any, as NumPy's
# stubs do not list the Ellipsis
_AN_ARRAY: Any = ...


def relu(x):
    out = np.maximum(x, 0, out=_AN_ARRAY)
    if x.dtype.kind not in "biu":
        # torch's x < 0 ? 0 : x keeps -0, where NumPy's maximum gives +0: x's zeros copied back
        # (a where() select instead is ~10x slower on a strided input)
        np.copyto(out, x, where=x == 0)
    return out


_SAME_WIDTH_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def threshold_backward(grad_output, input, *, threshold):
    """0 where input <= threshold, else grad_output, bit for bit as the op's select: the gradient's
    bits ANDed with a mask of all ones or all zeros. A multiply by the mask would give -0 and nan
    where the select gives +0; NumPy's where() branches per element and is ~5x slower."""
    itype = _SAME_WIDTH_INT.get(grad_output.dtype.itemsize)
    if itype is None or grad_output.dtype.kind == "c":  # bytes and complex: no same-width mask
        return np.where(np.less_equal(input, threshold), grad_output.dtype.type(0), grad_output)
    mask = np.subtract(np.less_equal(input, threshold), 1, dtype=itype)  # 0 at or below, else -1
    out = np.empty(grad_output.shape, grad_output.dtype)
    # a view as the same-width integer is legal for any strides (no itemsize change)
    np.bitwise_and(grad_output.view(itype), mask, out=out.view(itype))
    return out


def sigmoid(x):
    # exp(-|x|) never overflows; pick the algebraically matching form per sign.
    e = np.exp(-np.abs(x))
    p = 1.0 / (1.0 + e)
    return np.where(x >= 0, p, e * p).astype(x.dtype, copy=False)


def tanh_backward(grad_output, output):
    """grad * (1 - y * y) in three in-place passes over one temporary (the decomposition: three
    ops, three temporaries); the operands share one shape and dtype (the op sees to it)."""
    t = np.multiply(output, output, out=np.empty_like(output))  # an array, even 0-d
    np.subtract(1, t, out=t)
    return np.multiply(grad_output, t, out=t)


def sigmoid_backward(grad_output, output):
    """grad * (1 - y) * y, the same way."""
    t = np.subtract(1, output, out=np.empty_like(output))
    np.multiply(grad_output, t, out=t)
    return np.multiply(t, output, out=t)


_SQRT_HALF, _INV_SQRT_2PI = 0.7071067811865476, 0.3989422804014327
_SQRT_2_OVER_PI, _GELU_C = 0.7978845608028654, 0.044715


def gelu(x, *, approximate):
    """torch's gelu, exact (x * Phi(x), through the backend's erf) or its tanh form, in NumPy
    passes in x's dtype (the op's decomposition dispatches each of them)."""
    if approximate == "tanh":
        inner = (x + x * x * x * x.dtype.type(_GELU_C)) * x.dtype.type(_SQRT_2_OVER_PI)
        return np.asarray(x * x.dtype.type(0.5) * (np.tanh(inner) + 1))  # (a 0-d array stays one)
    return np.asarray(x * x.dtype.type(0.5) * (numpy_erf(x * x.dtype.type(_SQRT_HALF)) + 1))


def gelu_backward(grad_output, x, *, approximate):
    """grad_output * gelu'(x), the op's formula in NumPy passes."""
    t = x.dtype.type
    if approximate == "tanh":
        x2 = x * x
        th = np.tanh((x + x2 * x * t(_GELU_C)) * t(_SQRT_2_OVER_PI))
        dinner = (x2 * t(3 * _GELU_C) + 1) * t(_SQRT_2_OVER_PI)
        return np.asarray(grad_output * ((th + 1) * t(0.5) + x * t(0.5) * (1 - th * th) * dinner))
    cdf = (numpy_erf(x * t(_SQRT_HALF)) + 1) * t(0.5)
    pdf = np.exp(x * x * t(-0.5)) * t(_INV_SQRT_2PI)
    return np.asarray(grad_output * (cdf + x * pdf))


def _norm_axes(x, normalized_shape):
    return tuple(range(x.ndim - len(normalized_shape), x.ndim))


def _standardized(x, axes, eps):
    mean = x.mean(axes, keepdims=True)
    xc = x - mean
    rstd = 1 / np.sqrt((xc * xc).mean(axes, keepdims=True) + x.dtype.type(eps))
    return xc, rstd


def layer_norm(input, weight, bias, *, normalized_shape, eps):
    """layer_norm in NumPy passes (the C serves float32/64 where it is built)."""
    xc, rstd = _standardized(input, _norm_axes(input, normalized_shape), eps)
    out = xc * rstd
    if weight is not None:
        out *= weight
    if bias is not None:
        out += bias
    return np.asarray(out)


def layer_norm_backward(grad_output, input, weight, *, normalized_shape, eps):
    """layer_norm's input gradient: rstd * gy - xc * rstd^3 * mean(gy * xc) - rstd * mean(gy)."""
    axes = _norm_axes(input, normalized_shape)
    xc, rstd = _standardized(input, axes, eps)
    gy = grad_output if weight is None else grad_output * weight
    b = (gy * xc).mean(axes, keepdims=True) * (rstd * rstd * rstd)
    return np.asarray(gy * rstd - xc * b - gy.mean(axes, keepdims=True) * rstd)


def layer_norm_weight_grad(grad_output, input, *, normalized_shape, eps):
    """layer_norm's weight gradient: the sum over the leading dims of grad_output * xhat."""
    axes = _norm_axes(input, normalized_shape)
    xc, rstd = _standardized(input, axes, eps)
    lead = tuple(range(input.ndim - len(normalized_shape)))
    out = (grad_output * (xc * rstd)).sum(lead) if lead else grad_output * (xc * rstd)
    return np.asarray(out, dtype=input.dtype)


def layer_norm_gradients(grad_output, input, weight, *, normalized_shape, eps):
    """layer_norm's input, weight and bias gradients, flattened and joined (the op's layout)."""
    lead = tuple(range(input.ndim - len(normalized_shape)))
    parts = (layer_norm_backward(grad_output, input, weight, normalized_shape=normalized_shape, eps=eps),
             layer_norm_weight_grad(grad_output, input, normalized_shape=normalized_shape, eps=eps),
             grad_output.sum(lead) if lead else grad_output)
    return np.concatenate([np.asarray(p, dtype=input.dtype).reshape(-1) for p in parts])


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2), (0,) + tuple(range(2, x.ndim))


def batch_norm(input, running_mean, running_var, weight, bias, *, training, momentum, eps):
    """batch_norm in NumPy passes; in training the running statistics move in place."""
    shape, axes = _channel_shape(input)
    t = input.dtype.type
    if training:
        mean = input.mean(axes, keepdims=True)
        xc = input - mean
        var = (xc * xc).mean(axes, keepdims=True)
        n = input.size // input.shape[1]
        if running_mean is not None:
            running_mean *= running_mean.dtype.type(1 - momentum)
            running_mean += (mean.reshape(-1) * momentum).astype(running_mean.dtype)
        if running_var is not None:
            running_var *= running_var.dtype.type(1 - momentum)
            running_var += (var.reshape(-1) * (momentum * n / (n - 1))).astype(running_var.dtype)
    else:
        xc = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    scale = 1 / np.sqrt(var + t(eps))
    if weight is not None:
        scale = scale * weight.reshape(shape)
    out = xc * scale
    if bias is not None:
        out += bias.reshape(shape)
    return np.asarray(out)


def batch_norm_backward(grad_output, input, weight, running_mean, running_var, *, training, eps):
    """batch_norm's input gradient in NumPy passes."""
    shape, axes = _channel_shape(input)
    t = input.dtype.type
    if not training:
        a = 1 / np.sqrt(running_var.reshape(shape) + t(eps))
        return np.asarray(grad_output * (a if weight is None else a * weight.reshape(shape)))
    xc = input - input.mean(axes, keepdims=True)
    rstd = 1 / np.sqrt((xc * xc).mean(axes, keepdims=True) + t(eps))
    a = rstd if weight is None else rstd * weight.reshape(shape)
    b = (grad_output * xc).mean(axes, keepdims=True) * (a * rstd * rstd)
    return np.asarray(grad_output * a - xc * b - grad_output.mean(axes, keepdims=True) * a)


def batch_norm_weight_grad(grad_output, input, running_mean, running_var, *, training, eps):
    """batch_norm's weight gradient in NumPy passes: sum of grad_output * xhat per channel."""
    shape, axes = _channel_shape(input)
    t = input.dtype.type
    if training:
        xc = input - input.mean(axes, keepdims=True)
        var = (xc * xc).mean(axes, keepdims=True)
    else:
        xc, var = input - running_mean.reshape(shape), running_var.reshape(shape)
    return np.asarray((grad_output * xc).sum(axes) * (1 / np.sqrt(var + t(eps))).reshape(-1), dtype=input.dtype)


def softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e


def softmax_backward(grad_output, output, *, dim):
    """y * (g - sum(g * y)) in three passes and one temporary besides the reduction."""
    out = np.multiply(grad_output, output, out=np.empty(output.shape, output.dtype))  # an array, even 0-d
    row = out.sum(axis=dim if out.ndim else None, keepdims=True)
    np.subtract(grad_output, row, out=out)
    return np.multiply(out, output, out=out)


def log_softmax(x, dim):
    z = x - x.max(axis=dim, keepdims=True)
    with np.errstate(divide="ignore"):
        z -= np.log(np.exp(z).sum(axis=dim, keepdims=True))
    return z


def log_softmax_backward(grad_output, output, *, dim):
    """g - exp(y) * sum(g) in three passes into one new array besides the reduction."""
    out = np.exp(output, out=np.empty(output.shape, output.dtype))  # an array, even 0-d
    row = grad_output.sum(axis=dim if out.ndim else None, keepdims=True)
    np.multiply(out, row, out=out)
    return np.subtract(grad_output, out, out=out)


# -- cross-entropy: log-softmax, pick, weigh and reduce in NumPy, forward and backward ----------
# (the decomposition takes ~20 dispatched ops each way; the formulas are the same, see
# plugtorch/core/ops/classification.py for what each term is)

def _per_class(weight, ndim):
    return weight.reshape((1, weight.shape[0]) + (1,) * (ndim - 2))


def _index_terms(target, weight, ignore_index, dtype):
    """Per-target weight (0 where ignored), the valid mask as floats, in-range indices (N, 1, *d)."""
    valid = target != ignore_index
    safe = np.where(valid, target, 0)[:, None]
    v = valid.astype(dtype)
    wt = v if weight is None else np.take(weight, safe[:, 0]) * v
    return wt, v, safe


def _smoothed(target, weight, ls):
    if ls:
        target = target * (1 - ls) + ls / target.shape[1]
    return target if weight is None else target * _per_class(weight, target.ndim)


def _quiet(kernel):
    """An empty batch's 'mean' is 0/0 = nan, as in torch: without NumPy's warning about it."""
    def run(*args, **kwargs):
        with np.errstate(divide="ignore", invalid="ignore"):
            return kernel(*args, **kwargs)
    run.__name__ = run.__qualname__ = kernel.__name__
    return run


def _reduced(loss, reduction):
    if reduction == "mean":  # what ndarray.mean computes, minus its warning on an empty batch
        return np.asarray(loss.sum() / loss.size, dtype=loss.dtype)
    return np.asarray(loss.sum(), dtype=loss.dtype) if reduction == "sum" else loss


@_quiet
def cross_entropy(input, target, weight=None, *, ignore_index, reduction, label_smoothing):
    logp = log_softmax(input, 1)
    ls, c = label_smoothing, input.shape[1]
    if target.dtype.kind == "f":  # class probabilities
        return _reduced(-(logp * _smoothed(target, weight, ls)).sum(axis=1), reduction)
    wt, v, safe = _index_terms(target, weight, ignore_index, input.dtype)
    loss = np.take_along_axis(logp, safe, axis=1)[:, 0]
    loss *= wt
    np.negative(loss, out=loss)
    if ls:
        lw = logp if weight is None else logp * _per_class(weight, input.ndim)
        loss = loss * (1 - ls) - lw.sum(axis=1) * v * (ls / c)
    if reduction == "mean":  # torch divides by the summed weights of the targets
        return np.asarray(loss.sum() / wt.sum(), dtype=input.dtype)
    return _reduced(loss, reduction)


@_quiet
def cross_entropy_backward(grad_output, input, target, weight=None, *, ignore_index, reduction, label_smoothing):
    c, ls = input.shape[1], label_smoothing
    p = softmax(input, 1)
    per_sample = grad_output[:, None] if reduction == "none" else grad_output
    if target.dtype.kind == "f":  # p * sum_c tw_c - tw
        tw = _smoothed(target, weight, ls)
        scale = per_sample / (input.size // c) if reduction == "mean" else per_sample
        dx = p * tw.sum(axis=1, keepdims=True)
        dx -= tw
        dx *= scale
        return dx
    wt, v, safe = _index_terms(target, weight, ignore_index, input.dtype)
    if ls:  # the smoothing term's gradient, from p before p becomes dx below
        if weight is None:
            uniform = p * c - 1
        else:
            uniform = p * weight.sum() - _per_class(weight, input.ndim)
    dx = p                                                                          # in place from here
    np.put_along_axis(dx, safe, np.take_along_axis(dx, safe, axis=1) - 1, axis=1)  # p - one_hot
    dx *= wt[:, None]
    if ls:
        dx = dx * (1 - ls) + uniform * (v[:, None] * (ls / c))
    # an ignored target's row scaled by exactly 0, whatever the upstream gradient (mean over no
    # targets: 1/0), as torch's masked gradient (the decomposition's _kept_upstream)
    dx *= np.where(v != 0, grad_output / wt.sum() if reduction == "mean" else grad_output, 0)[:, None]
    return dx


# -- max_pool2d's backward: one strided slice per kernel offset, no window copies -------------

def pool_padded(input, out, kernel_size, stride, padding, dilation):
    """(N, C, H, W) ``input`` padded with its dtype's lowest value (-inf for floats) to cover
    the ``out`` windows of a 2-D pool, ceil_mode's overhang included; ``input`` itself where
    no window reaches outside it."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    n, c, h, w = input.shape
    height = max(h + 2 * ph, (out[0] - 1) * sh + dh * (kh - 1) + 1)  # ceil_mode windows may overhang
    width = max(w + 2 * pw, (out[1] - 1) * sw + dw * (kw - 1) + 1)
    if (height, width) == (h, w):
        return input
    lowest = -np.inf if input.dtype.kind == "f" else np.iinfo(input.dtype).min
    padded = np.full((n, c, height, width), lowest, dtype=input.dtype)
    padded[:, :, ph:ph + h, pw:pw + w] = input
    return padded


def offset_window(i, j, out, stride, dilation):
    """The index of kernel offset (i, j)'s element of every window, as a strided (N, C, *out)
    slice of the padded input."""
    (sh, sw), (dh, dw) = stride, dilation
    return (slice(None), slice(None), slice(i * dh, i * dh + sh * (out[0] - 1) + 1, sh),
            slice(j * dw, j * dw + sw * (out[1] - 1) + 1, sw))


def _last_nans(padded, output, offsets: Sequence[tuple[int, int]], out, stride, dilation):
    """Per offset, the windows whose maximum is NaN and whose last NaN (row-major) it holds,
    as the decomposition's ``_last_nans``; None where no window's maximum is NaN (the usual
    case: one isnan pass over the pooled output)."""
    if output.dtype.kind != "f":
        return None
    left = np.isnan(output)
    if not left.any():
        return None
    hits: list[np.ndarray | None] = [None] * len(offsets)
    for k in reversed(range(len(offsets))):
        hit = np.isnan(padded[offset_window(*offsets[k], out, stride, dilation)]) & left
        left &= ~hit
        hits[k] = hit
    return hits


def max_pool2d_backward(grad_output, input, output, *, kernel_size, stride, padding, dilation, ceil_mode):
    """Each window's gradient to its first maximum (row-major), or its last NaN where the maximum is
    NaN, as the decomposition does.

    The decomposition stacks a masked copy of grad_output per kernel offset and folds the
    stack back (a permute copy and an (N, C, kh, kw, oh, ow) scatter); here each offset adds
    its masked share straight into the strided positions it came from.
    """
    if input.strides[1] > input.strides[0]:
        # (C, N, H, W) memory seen as NCHW (x.transpose(0, 1) of a contiguous tensor): every plane
        # is pooled alike, so work in that order; torch's gradient is contiguous all the same
        return np.ascontiguousarray(max_pool2d_backward(
            grad_output.swapaxes(0, 1), input.swapaxes(0, 1), output.swapaxes(0, 1), kernel_size=kernel_size,
            stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode).swapaxes(0, 1))
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    n, c, h, w = input.shape
    oh, ow = output.shape[2:]
    # the pooled-size arrays in the input's order (a quarter of its size for 2x2): read k*k times
    grad_output, output = np.ascontiguousarray(grad_output), np.ascontiguousarray(output)
    padded = pool_padded(input, (oh, ow), kernel_size, stride, padding, dilation)
    height, width = padded.shape[2:]
    dx = np.zeros((n, c, height, width), dtype=grad_output.dtype)
    # no two windows share a position (per dimension: stride past the dilated kernel's rows)
    disjoint = all(s_ == k_ * d_ or (d_ == 1 and s_ >= k_) for k_, s_, d_ in ((kh, sh, dh), (kw, sw, dw)))
    claimed = None  # windows whose maximum an earlier offset took (ties go to the first, row-major)
    hit = np.empty(output.shape, dtype=bool)
    share = np.empty(output.shape, dtype=grad_output.dtype)
    offsets = [(i, j) for i in range(kh) for j in range(kw)]
    nans = _last_nans(padded, output, offsets, (oh, ow), stride, dilation)
    for k, (i, j) in enumerate(offsets):
        at = offset_window(i, j, (oh, ow), stride, dilation)
        np.equal(padded[at], output, out=hit)
        if claimed is None:
            claimed = hit.copy()
        else:
            np.greater(hit, claimed, out=hit)  # hit and not claimed, in one pass over bools
            if k < len(offsets) - 1:
                claimed |= hit
        if nans is not None:  # (no value equals a NaN maximum: these windows are no one's above)
            hit |= nans[k]
        if disjoint:  # no two windows share a position: write, do not accumulate
            np.multiply(grad_output, hit, out=dx[at])
        else:
            np.multiply(grad_output, hit, out=share)
            dx[at] += share
    return dx if (height, width) == (h, w) else np.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])


# -- add_at: an embedding's gradient, rows summed by group ------------------------------------------

def whole_rows(out, index, values):
    """The integer array of ``add_at(out, index, values)`` where it picks whole rows of a C-contiguous
    ``out`` and ``values`` holds one row of out's dtype for each entry (an embedding's gradient), else
    None."""
    idx = index[0] if len(index) == 1 else None
    if (idx is None or getattr(idx, "dtype", None) is None or idx.dtype.kind not in "iu" or out.ndim < 1
            or values.shape != idx.shape + out.shape[1:] or values.dtype != out.dtype or not out.flags.c_contiguous):
        return None
    return idx


def add_at(out, index, values):
    """``np.add.at(out, index, values)``, repeated indices accumulating: where ``index`` is one
    integer array picking whole rows of a C-contiguous ``out`` (an embedding's gradient: (batch,
    seq) indices into a (vocab, d) table), each row's values are grouped by a stable sort and
    summed in index order with ``add.reduceat``, then added once per row; add.at, which has no
    fast path for rows, took 4 ms on minGPT's 1024 lookups of 128 floats. Elsewhere add.at."""
    idx = whole_rows(out, index, values)
    if idx is None or not idx.size:
        np.add.at(out, index, values)
        return
    n = out.shape[0]
    flat = idx.reshape(-1)
    if flat.min() < -n or flat.max() >= n:
        np.add.at(out, index, values)  # NumPy's IndexError, in its words
        return
    flat = np.where(flat < 0, flat + n, flat)  # -1 and n - 1 are one row
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sums = np.add.reduceat(values.reshape(flat.size, -1)[order], starts, axis=0)
    rows = out.reshape(n, -1)
    rows[ordered[starts]] += sums  # each row once: no repeats left


# -- linear: one matmul, the bias added in place ---------------------------------------------------

def linear(input, weight, bias):
    # the product as the matmul primitive computes it: in the native kernel where it wins
    # (native/gemm.py), so the op and its decomposition agree bit for bit
    if input.ndim == 2:  # already (rows, in): the reshapes would cost more than a small product's ~2 us
        out = gemm.matmul(input, weight.T)
    else:
        # (..., in) as one (rows, in) GEMM: NumPy runs a small GEMM per leading index otherwise
        # (2.8x slower on the word-language-model LSTM's decoder, 1.45x on minGPT's projections)
        lead = input.shape[:-1]
        out = gemm.matmul(input.reshape(math.prod(lead), input.shape[-1]), weight.T).reshape(*lead, weight.shape[0])
    if bias is not None:
        out += bias
    return out


# -- fold (col2im): each kernel offset's patches added in place ---------------------------------

def fold(cols, *, shape, window, strides, dilation):
    """The adjoint of ``windows``, as the op's lowering computes it (offset by offset, in the
    same order, so bit for bit), but adding each offset's patches straight into their strided
    positions: the lowering's add-then-setitem makes a temporary and a second pass per offset."""
    n = len(window)
    counts = cols.shape[cols.ndim - 2 * n:cols.ndim - n]
    acc = np.zeros(shape, dtype=cols.dtype)
    lead = (slice(None),) * n
    for offset in itertools.product(*(range(k) for k in window)):
        view = acc[(Ellipsis,) + tuple(slice(o * d, o * d + s * (c - 1) + 1, s)
                                       for o, d, s, c in zip(offset, dilation, strides, counts))]
        np.add(view, cols[(Ellipsis,) + lead + offset], out=view)
    return acc


FUSED_KERNELS = {"fold": fold, "linear": linear, "relu": relu, "threshold_backward": threshold_backward,
                 "sigmoid": sigmoid, "gelu": gelu,
                 "gelu_backward": gelu_backward, "layer_norm": layer_norm, "layer_norm_backward": layer_norm_backward,
                 "layer_norm_weight_grad": layer_norm_weight_grad, "layer_norm_gradients": layer_norm_gradients,
                 "batch_norm": batch_norm,
                 "batch_norm_backward": batch_norm_backward, "batch_norm_weight_grad": batch_norm_weight_grad,
                 "tanh_backward": tanh_backward, "sigmoid_backward": sigmoid_backward, "softmax": softmax,
                 "softmax_backward": softmax_backward,
                 "log_softmax": log_softmax, "log_softmax_backward": log_softmax_backward,
                 "cross_entropy": cross_entropy,
                 "cross_entropy_backward": cross_entropy_backward, "max_pool2d_backward": max_pool2d_backward}
