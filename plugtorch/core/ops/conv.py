"""conv2d, and the two ops its derivative is written with: conv2d_input_grad and conv2d_weight_grad.

The forward is im2col + one batched matmul per group, built on the window view. Its
derivative is two registered ops, so a backend that fuses the forward (a cuDNN-style
kernel) can fuse the backward as well; each has a decomposition of its own (a
transposed matmul and ``fold``; a matmul against the windows), which autograd
differentiates for double backward.

The ops work channels-first, batch-second: the im2col copy then reads contiguous rows
(8x faster than the N-first order on MNIST shapes) and fold's adds are contiguous.

The weight gradient rebuilds the patches instead of keeping the forward's alive until
backward (nine times the input's size for a 3x3 kernel). The two backward ops take the
batch a few images at a time (about ``CHUNK_BYTES`` of patches): a chunk's im2col copy is
still in cache when its matmul reads it, and no whole-batch buffer is allocated (glibc's
default malloc maps buffers that size afresh, page faults included, on every step). The
forward keeps one patch matrix: chunking it paid only while the allocator's pages stayed
mapped.
"""
from __future__ import annotations

from ..dispatch import call_op
from ..optable import op
from ..tensor import Tensor
from ._args import pair
from .movement import pad
from .shape import cat
from .window import fold, windows

CHUNK_BYTES = 4 << 20


def batched(op_name, x, expected_ndim=4):
    """``x`` with a batch dim (and whether one was added), or torch's error for another rank."""
    if x.ndim == expected_ndim:
        return x, False
    if x.ndim == expected_ndim - 1:
        return x.unsqueeze(0), True
    raise RuntimeError(f"Expected {expected_ndim - 1}D (unbatched) or {expected_ndim}D (batched) input "
                       f"to {op_name}, but got input of size: {list(x.shape)}")


def _chunks(n, bytes_per_image):
    """(start, stop) ranges over a batch of ``n``, each about ``CHUNK_BYTES`` of patches."""
    step = max(1, CHUNK_BYTES // max(1, bytes_per_image))
    return [(a, min(n, a + step)) for a in range(0, n, step)] or [(0, 0)]


def _patch_windows(x, kernel, stride, padding, dilation):
    """The (C, N, OH, OW, kh, kw) window view of the zero-padded input, channels first."""
    (ph, pw) = padding
    xc = (pad(x, (pw, pw, ph, ph)) if ph or pw else x).permute(1, 0, 2, 3)
    return windows(xc, kernel, stride, dilation)


def _im2col(win, groups, a, b):
    """(G, C/G * kh * kw, (b - a) * OH * OW) patches of images a..b of a ``_patch_windows`` view."""
    c, n, oh, ow, kh, kw = win.shape
    cg = c // groups
    part = win if (a, b) == (0, n) else win[:, a:b]
    part = part.reshape(groups, cg, b - a, oh, ow, kh, kw).permute(0, 1, 5, 6, 2, 3, 4)
    return part.reshape(groups, cg * kh * kw, (b - a) * oh * ow)


def _grad_matrix(g, groups):
    """(N, O, OH, OW) -> (G, O/G, N * OH * OW), the layout the matmuls above produce."""
    n, o, oh, ow = g.shape
    return g.permute(1, 0, 2, 3).reshape(groups, o // groups, n * oh * ow)


def _columns(m, a, b, per_image):
    """Columns of images a..b of a (..., N * per_image) matrix (a view)."""
    return m if (a * per_image, b * per_image) == (0, m.shape[-1]) else m[..., a * per_image:b * per_image]


# -- the forward -----------------------------------------------------------------------------

def _conv2d(input, weight, bias, *, stride, padding, dilation, groups):
    n = input.shape[0]
    o, cg, kh, kw = weight.shape
    win = _patch_windows(input, (kh, kw), stride, padding, dilation)
    oh, ow = win.shape[2], win.shape[3]
    out = weight.reshape(groups, o // groups, cg * kh * kw) @ _im2col(win, groups, 0, n)
    out = out.reshape(o, n, oh, ow).permute(1, 0, 2, 3)               # (N, O, OH, OW), a view
    return out if bias is None else out + bias.reshape(1, o, 1, 1)


def _conv2d_rule(ctx, g):
    x, w = ctx.saved[0], ctx.saved[1]
    a = ctx.attrs
    need = ctx.needs_input_grad
    gx = conv2d_input_grad(g, w, tuple(x.shape), **a) if need[0] else None
    gw = conv2d_weight_grad(g, x, tuple(w.shape), **a) if need[1] else None
    gb = g.sum((0, 2, 3)) if need[2] else None
    return gx, gw, gb


@op(decompose=_conv2d, derivative=_conv2d_rule, save=(0, 1), exposed=("plugtorch", "nn.functional"))
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation (stride, padding, dilation, groups), im2col + matmul.

    A backend kernel for "conv2d" receives (input, weight, bias) as native arrays (input
    4-D; bias may be None) and stride, padding, dilation (pairs of ints) and groups by
    name; "same" and "valid" padding are already resolved.
    """
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError(f"conv2d(): input and weight must be Tensors, got {type(input).__name__} "
                        f"and {type(weight).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"conv2d(): bias must be a Tensor or None, got {type(bias).__name__}")
    x, unbatched = batched("conv2d", input)
    if weight.ndim != 4:
        raise RuntimeError(f"conv2d: weight must be 4-D (out_channels, in_channels/groups, kH, kW), "
                           f"got size {list(weight.shape)}")
    sh, sw = pair(stride, "stride")
    dh, dw = pair(dilation, "dilation")
    kh, kw = weight.shape[2], weight.shape[3]
    if isinstance(padding, str):
        if padding == "valid":
            ph = pw = 0
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            tot_h, tot_w = dh * (kh - 1), dw * (kw - 1)
            if tot_h % 2 or tot_w % 2:
                # an odd total: the extra row/column goes at the end, as torch does
                x = pad(x, (tot_w // 2, tot_w - tot_w // 2, tot_h // 2, tot_h - tot_h // 2))
                ph = pw = 0
            else:
                ph, pw = tot_h // 2, tot_w // 2
        else:
            raise ValueError(f"Invalid padding string '{padding}'; expected 'valid' or 'same'")
    else:
        ph, pw = pair(padding, "padding")
    if min(sh, sw) <= 0 or min(dh, dw) <= 0 or min(ph, pw) < 0:
        raise RuntimeError(f"conv2d: non-positive stride/dilation or negative padding is not supported "
                           f"(stride={stride}, padding={padding}, dilation={dilation})")
    n, c, h, w = x.shape
    o, cg = weight.shape[0], weight.shape[1]
    if groups <= 0 or c % groups or o % groups:
        raise RuntimeError(f"conv2d: groups={groups} must divide in_channels={c} and out_channels={o}")
    if cg * groups != c:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(x.shape)} "
            f"to have {cg * groups} channels, but got {c} channels instead"
        )
    if h + 2 * ph < dh * (kh - 1) + 1 or w + 2 * pw < dw * (kw - 1) + 1:
        raise RuntimeError(
            f"Calculated padded input size per channel: ({h + 2 * ph} x {w + 2 * pw}). Kernel size: "
            f"({dh * (kh - 1) + 1} x {dw * (kw - 1) + 1}). Kernel size can't be greater than actual input size"
        )
    if x.dtype is not weight.dtype:
        raise RuntimeError(f"conv2d: input type ({x.dtype.name}) and weight type ({weight.dtype.name}) "
                           "should be the same")
    if bias is not None and bias.shape != (o,):
        raise RuntimeError(f"conv2d: bias must have shape [{o}], got {list(bias.shape)}")
    out = call_op("conv2d", (x, weight, bias), {"stride": (sh, sw), "padding": (ph, pw),
                                                "dilation": (dh, dw), "groups": groups})
    return out.squeeze(0) if unbatched else out


# -- the derivative's ops ----------------------------------------------------------------------

def _conv2d_input_grad(grad_output, weight, *, input_shape, stride, padding, dilation, groups):
    n, o, oh, ow = grad_output.shape
    _, cg, kh, kw = weight.shape
    _, c, h, w = input_shape
    (ph, pw) = padding
    wmat_t = weight.reshape(groups, o // groups, cg * kh * kw).mT
    gmat = _grad_matrix(grad_output, groups)
    parts = []
    for a, b in _chunks(n, c * kh * kw * oh * ow * grad_output.element_size()):
        dcols = wmat_t @ _columns(gmat, a, b, oh * ow)                 # (G, K, chunk*OH*OW)
        dcols = dcols.reshape(groups, cg, kh, kw, b - a, oh, ow).permute(0, 1, 4, 5, 6, 2, 3)
        dcols = dcols.reshape(c, b - a, oh, ow, kh, kw)
        parts.append(fold(dcols, (c, b - a, h + 2 * ph, w + 2 * pw), (kh, kw), stride, dilation))
    dx = (parts[0] if len(parts) == 1 else cat(parts, 1)).permute(1, 0, 2, 3)
    return dx[:, :, ph:ph + h, pw:pw + w] if (ph or pw) else dx


@op(decompose=_conv2d_input_grad)
def conv2d_input_grad(grad_output, weight, input_shape, stride, padding, dilation, groups):
    """The gradient of conv2d with respect to its input (a transposed convolution)."""
    return call_op("conv2d_input_grad", (grad_output, weight),
                   {"input_shape": tuple(input_shape), "stride": stride, "padding": padding,
                    "dilation": dilation, "groups": groups})


def _conv2d_weight_grad(grad_output, input, *, weight_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight_shape
    n, c = input.shape[0], input.shape[1]
    win = _patch_windows(input, (kh, kw), stride, padding, dilation)
    oh, ow = win.shape[2], win.shape[3]
    gmat = _grad_matrix(grad_output, groups)
    gw = None
    for a, b in _chunks(n, c * kh * kw * oh * ow * input.element_size()):
        part = _columns(gmat, a, b, oh * ow) @ _im2col(win, groups, a, b).mT   # (G, O/G, K)
        gw = part if gw is None else gw + part
    return gw.reshape(o, cg, kh, kw)


@op(decompose=_conv2d_weight_grad)
def conv2d_weight_grad(grad_output, input, weight_shape, stride, padding, dilation, groups):
    """The gradient of conv2d with respect to its weight (patches times the output gradient)."""
    return call_op("conv2d_weight_grad", (grad_output, input),
                   {"weight_shape": tuple(weight_shape), "stride": stride, "padding": padding,
                    "dilation": dilation, "groups": groups})
