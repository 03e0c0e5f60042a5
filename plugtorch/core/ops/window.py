"""The sliding-window view and its adjoint, the two ops convolution and pooling are built on.

``windows(x)`` views every (kh, kw) patch of the last two axes without copying
(im2col without the copy); ``fold`` sums patch values back into place (col2im), with
one slice-add per kernel offset. Each is the other's derivative, so double backward
through anything built on them works.
"""
from __future__ import annotations

from ..dispatch import call_op
from ..optable import op


def _windows_rule(ctx, g):
    a = ctx.attrs
    return fold(g, ctx.meta[0][0], a["window"], a["strides"], a["dilation"])


@op(primitive="windows", derivative=_windows_rule, view=True)
def windows(x, window, strides, dilation=(1, 1)):
    """A view of shape (..., OH, OW, kh, kw) over the last two axes of ``x``."""
    window, strides, dilation = tuple(window), tuple(strides), tuple(dilation)
    n = len(window)
    if not (len(strides) == len(dilation) == n) or min(strides + dilation, default=1) <= 0:
        raise RuntimeError(f"windows: window {window}, strides {strides} and dilation {dilation} "
                           "must have one positive entry per windowed axis")
    if x.ndim < n:
        raise RuntimeError(f"windows: a {n}-D window needs an input with at least {n} dims, got "
                           f"shape {list(x.shape)}")
    spatial = x.shape[x.ndim - n:]
    if any(s < d * (w - 1) + 1 for s, w, d in zip(spatial, window, dilation)):
        raise RuntimeError(f"windows: window {window} with dilation {dilation} does not fit in the "
                           f"last dims {list(spatial)} of input shape {list(x.shape)}")
    return call_op("windows", (x,), {"window": window, "strides": strides, "dilation": dilation})


def _fold_rule(ctx, g):
    a = ctx.attrs
    return windows(g, a["window"], a["strides"], a["dilation"])


def _lower_fold(backend, cols, *, shape, window, strides, dilation):
    """Accumulate each kernel offset's patch values with one strided slice-add."""
    p = backend.primitives
    (kh, kw), (sh, sw), (dh, dw) = window, strides, dilation
    oh, ow = cols.shape[-4], cols.shape[-3]
    acc = p["zeros"](shape, backend.dtype_of(cols))
    for i in range(kh):
        rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
        for j in range(kw):
            idx = (Ellipsis, rows, slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))
            patch = p["getitem"](cols, (Ellipsis, slice(None), slice(None), i, j))
            p["setitem"](acc, idx, p["add"](p["getitem"](acc, idx), patch))
    return acc


@op(lower=_lower_fold, derivative=_fold_rule)
def fold(cols, shape, window, strides, dilation=(1, 1)):
    """The adjoint of ``windows``: sum each patch of ``cols`` back into an array of ``shape``."""
    return call_op("fold", (cols,), {"shape": tuple(shape), "window": tuple(window),
                                     "strides": tuple(strides), "dilation": tuple(dilation)})
