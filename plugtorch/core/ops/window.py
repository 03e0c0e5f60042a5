"""The sliding-window view and its adjoint, the two ops convolution and pooling are built on,
and torch's ``unfold``/``fold`` (im2col/col2im) written with them.

``windows(x)`` views every patch of the last ``len(window)`` axes without copying
(im2col without the copy); ``fold`` sums patch values back into place (col2im), with
one slice-add per kernel offset. Each is the other's derivative, so double backward
through anything built on them works. Both take any number of windowed axes: 1-D, 2-D
and 3-D convolution and pooling share them.
"""
from __future__ import annotations

import itertools
import math

from ..dispatch import call_op
from ..optable import Done, op, public
from ..tensor import Tensor
from ._jvp import linear
from .movement import pad


def _windows_rule(ctx, g):
    a = ctx.attrs
    return fold(g, ctx.meta[0][0], a["window"], a["strides"], a["dilation"])


def _windows_args(x, window, strides, dilation=(1, 1)):
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
    return (x,), {"window": window, "strides": strides, "dilation": dilation}


@op(primitive="windows", bind=_windows_args, derivative=_windows_rule, view=True, jvp=linear("windows"))
def windows(x, *, window, strides, dilation):
    """A view of shape (..., *n_windows, *window) over the last ``len(window)`` axes of ``x``."""


def _fold_rule(ctx, g):
    a = ctx.attrs
    return windows(g, a["window"], a["strides"], a["dilation"])


def _lower_fold(backend, cols, *, shape, window, strides, dilation):
    """Accumulate each kernel offset's patch values with one strided slice-add."""
    p = backend.primitives
    n = len(window)
    counts = cols.shape[cols.ndim - 2 * n:cols.ndim - n]
    acc = p["zeros"](shape, backend.dtype_of(cols))
    lead = (slice(None),) * n
    for offset in itertools.product(*(range(k) for k in window)):
        idx = (Ellipsis,) + tuple(slice(o * d, o * d + s * (c - 1) + 1, s)
                                  for o, d, s, c in zip(offset, dilation, strides, counts))
        patch = p["getitem"](cols, (Ellipsis,) + lead + offset)
        p["setitem"](acc, idx, p["add"](p["getitem"](acc, idx), patch))
    return acc


def _fits(cols, shape, window, strides, dilation):
    """Whether (..., *n_windows, *window) patches fold into ``shape`` (checked before any kernel)."""
    n = len(window)
    if len(cols) < 2 * n or len(shape) != len(cols) - n or not len(strides) == len(dilation) == n:
        return False
    lead, counts, kernel = cols[:len(cols) - 2 * n], cols[len(cols) - 2 * n:len(cols) - n], cols[len(cols) - n:]
    return lead == shape[:len(shape) - n] and kernel == window and all(
        c == 0 or (c - 1) * s + d * (k - 1) + 1 <= size
        for c, s, d, k, size in zip(counts, strides, dilation, window, shape[len(shape) - n:]))


def _fold_args(cols, shape, window, strides, dilation=(1, 1)):
    shape, window, strides, dilation = tuple(shape), tuple(window), tuple(strides), tuple(dilation)
    if not _fits(tuple(cols.shape), shape, window, strides, dilation):
        raise RuntimeError(f"fold: patches of shape {list(cols.shape)} ((..., *n_windows, *window) with window "
                           f"{window}, strides {strides}, dilation {dilation}) do not fit an array of shape "
                           f"{list(shape)}")
    return (cols,), {"shape": shape, "window": window, "strides": strides, "dilation": dilation}


@op(lower=_lower_fold, bind=_fold_args, derivative=_fold_rule, jvp=linear("fold"))
def fold(cols, *, shape, window, strides, dilation):
    """The adjoint of ``windows``: sum each patch of ``cols`` back into an array of ``shape``."""


# -- torch's unfold / fold: (N, C * kh * kw, L) blocks ----------------------------------------

def _pairs(op_name, **named):
    out = {}
    for what, v in named.items():
        v = (v, v) if isinstance(v, int) else tuple(v)
        if len(v) == 1:
            v = (v[0], v[0])
        if len(v) != 2 or not all(isinstance(i, int) for i in v):
            raise TypeError(f"{op_name}(): {what} must be an int or a pair of ints, got {v!r}")
        out[what] = v
    if min(out["kernel_size"] + out["dilation"] + out["stride"]) <= 0 or min(out["padding"]) < 0:
        raise RuntimeError(f"{op_name}(): kernel_size, dilation and stride must be positive and "
                           f"padding non-negative, got {out}")
    return out


def _blocks(size, k, d, p, s):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _im2col_rule(ctx, g):
    return call_op("col2im", (g,), {"output_size": tuple(ctx.meta[0][0][2:]), **ctx.attrs})


def _unfold_args(input, kernel_size, dilation=1, padding=0, stride=1):
    if not isinstance(input, Tensor):
        raise TypeError(f"unfold(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    geometry = _pairs("unfold", kernel_size=kernel_size, dilation=dilation, padding=padding, stride=stride)
    x = input if input.ndim == 4 else input.unsqueeze(0)
    blocks = [_blocks(x.shape[2 + i], geometry["kernel_size"][i], geometry["dilation"][i],
                      geometry["padding"][i], geometry["stride"][i]) for i in range(2)]
    if min(blocks) < 1:
        raise RuntimeError(f"unfold(): given input with spatial size {list(x.shape[2:])}, {geometry}, "
                           f"calculated shape of the array of sliding blocks as {blocks}, but its "
                           "components must be at least one")
    if input.ndim == 3:  # kernels receive a batch: an unbatched input runs as a batch of one
        return Done(call_op("im2col", (x,), geometry).squeeze(0))
    return (x,), geometry


@op(bind=_unfold_args, derivative=_im2col_rule, jvp=linear("im2col"))
def im2col(input, *, kernel_size, dilation, padding, stride):
    """Sliding blocks of a (N, C, H, W) input as columns: (N, C * kh * kw, L) (torch's im2col).

    A backend kernel for "im2col" receives a 4-D input and kernel_size, dilation, padding
    and stride (pairs of ints) by name.
    """
    (ph, pw) = padding
    x = pad(input, (pw, pw, ph, ph)) if ph or pw else input
    w = windows(x, kernel_size, stride, dilation)                  # (N, C, OH, OW, kh, kw)
    n, c, oh, ow, kh, kw = w.shape
    # (the reshape is a view of the windows where they allow it, overlapping; torch's result is a copy)
    return w.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow).contiguous()


public("nn.functional", name="unfold")(im2col)


def _col2im_rule(ctx, g):
    a = dict(ctx.attrs)
    del a["output_size"]
    return call_op("im2col", (g,), a)


def _fold_blocks_args(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    if not isinstance(input, Tensor):
        raise TypeError(f"fold(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are "
                           f"supported (got {input.ndim}D)")
    geometry = _pairs("fold", kernel_size=kernel_size, dilation=dilation, padding=padding, stride=stride)
    size = _pairs("fold", kernel_size=output_size, dilation=1, padding=0, stride=1)["kernel_size"]
    x = input if input.ndim == 3 else input.unsqueeze(0)
    k = geometry["kernel_size"]
    if x.shape[1] % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of "
                           f"kernel_size, but got input.size(1)={x.shape[1]} and kernel_size={k}")
    blocks = [_blocks(size[i], k[i], geometry["dilation"][i], geometry["padding"][i], geometry["stride"][i])
              for i in range(2)]
    if min(blocks) < 1 or x.shape[2] != math.prod(blocks):
        raise RuntimeError(f"Given output_size={size}, kernel_size={k}, dilation={geometry['dilation']}, "
                           f"padding={geometry['padding']}, stride={geometry['stride']}, expected size "
                           f"of input's dimension 2 to match the calculated number of sliding blocks "
                           f"{blocks[0]} * {blocks[1]} = {math.prod(blocks)}, but got "
                           f"input.size(2)={x.shape[2]}.")
    attrs = {"output_size": size, **geometry}
    if input.ndim == 2:  # kernels receive a batch: an unbatched input runs as a batch of one
        return Done(call_op("col2im", (x,), attrs).squeeze(0))
    return (x,), attrs


@op(bind=_fold_blocks_args, derivative=_col2im_rule, jvp=linear("col2im"))
def col2im(input, *, output_size, kernel_size, dilation, padding, stride):
    """Sum (N, C * kh * kw, L) columns back into a (N, C, *output_size) image (torch's col2im);
    overlapping blocks add up.

    A backend kernel for "col2im" receives a 3-D input and output_size, kernel_size,
    dilation, padding and stride (pairs of ints) by name.
    """
    n, ckk, _ = input.shape
    (h, w), (kh, kw), (ph, pw) = output_size, kernel_size, padding
    oh, ow = (_blocks(output_size[i], kernel_size[i], dilation[i], padding[i], stride[i]) for i in range(2))
    c = ckk // (kh * kw)
    cols = input.reshape(n, c, kh, kw, oh, ow).permute(0, 1, 4, 5, 2, 3)
    out = fold(cols, (n, c, h + 2 * ph, w + 2 * pw), kernel_size, stride, dilation)
    return out[:, :, ph:ph + h, pw:pw + w].contiguous() if ph or pw else out   # contiguous, as torch's


public("nn.functional", name="fold")(col2im)
