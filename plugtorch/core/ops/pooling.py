"""2-D pooling on the window view: max_pool2d (with its registered backward op), avg_pool2d,
adaptive_avg_pool2d.

Each op function checks and normalises its arguments (pairs of ints, a batch dim),
so kernels and decompositions see 4-D input and the resolved geometry.
"""
from __future__ import annotations

from ..dispatch import call_op
from ..dtypes import get_default_dtype
from ..optable import op
from ..tensor import Tensor
from . import elementwise as ew
from ._args import pair
from .conv import batched
from .creation import arange, ones
from .movement import pad
from .shape import cat, stack
from .window import fold, windows

_F = ("nn.functional",)


def _out_size(size, k, s, p, d, ceil_mode=False):
    span = size + 2 * p - d * (k - 1) - 1
    if ceil_mode:
        out = -(-span // s) + 1
        # torch: the last window must start inside the input or left padding
        if (out - 1) * s >= size + p:
            out -= 1
        return out
    return span // s + 1


def _geometry(op_name, x, kernel_size, stride, padding, dilation, ceil_mode):
    """The normalised attrs of a pooling call, checked against torch's rules."""
    kh, kw = pair(kernel_size, "kernel_size")
    sh, sw = pair(stride if stride not in (None, ()) else (kh, kw), "stride")
    ph, pw = pair(padding, "padding")
    dh, dw = pair(dilation, "dilation")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError(f"{op_name}: pad should be at most half of effective kernel size, but got "
                           f"pad={max(ph, pw)}, kernel_size={max(kh, kw)}")
    h, w = x.shape[-2], x.shape[-1]
    oh = _out_size(h, kh, sh, ph, dh, ceil_mode)
    ow = _out_size(w, kw, sw, pw, dw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{op_name}: Given input size: ({x.shape[-3]}x{h}x{w}). Calculated output "
                           f"size: ({x.shape[-3]}x{oh}x{ow}). Output size is too small")
    return {"kernel_size": (kh, kw), "stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw),
            "ceil_mode": ceil_mode}


def _padded(x, kernel_size, stride, padding, dilation, value):
    """``x`` padded on both sides, plus at the end where ceil_mode's last window overhangs."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    h, w = x.shape[-2], x.shape[-1]
    oh = (h + 2 * ph - dh * (kh - 1) - 1 + sh - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1 + sw - 1) // sw + 1
    widths = (pw, pw + max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (w + 2 * pw)),
              ph, ph + max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + 2 * ph)))
    return pad(x, widths, value=value) if any(widths) else x  # pad() would copy even for none


def _pool_windows(x, value, *, kernel_size, stride, padding, dilation, ceil_mode):
    """The (N, C, OH, OW, kh, kw) windows of a pooling call (ceil_mode's extra one included)."""
    w = windows(_padded(x, kernel_size, stride, padding, dilation, value), kernel_size, stride,
                dilation)
    oh = _out_size(x.shape[-2], kernel_size[0], stride[0], padding[0], dilation[0], ceil_mode)
    ow = _out_size(x.shape[-1], kernel_size[1], stride[1], padding[1], dilation[1], ceil_mode)
    return w if (w.shape[2], w.shape[3]) == (oh, ow) else w[:, :, :oh, :ow]


# -- max_pool2d --------------------------------------------------------------------------

def _max_pool2d(input, **geometry):
    """A running maximum over the window offsets (NaN-propagating, like torch)."""
    w = _pool_windows(input, float("-inf"), **geometry)
    kh, kw = geometry["kernel_size"]
    out = w[..., 0, 0]
    for i in range(kh):
        for j in range(kw):
            if i or j:
                out = ew.maximum(out, w[..., i, j])
    return out.contiguous() if (kh, kw) == (1, 1) else out


def _max_pool2d_rule(ctx, g):
    return max_pool2d_backward(g, ctx.saved[0], ctx.output, **ctx.attrs)


def _maybe_unbatched(op_name, input, run):
    x, unbatched = batched(op_name, input)
    out = run(x)
    return out.squeeze(0) if unbatched else out


@op(decompose=_max_pool2d, derivative=_max_pool2d_rule, save=("inputs", "output"),
    exposed=("plugtorch",) + _F)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over sliding windows; the gradient goes to each window's first maximum.

    A backend kernel receives a 4-D input and kernel_size, stride, padding, dilation (pairs)
    and ceil_mode by name.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"max_pool2d(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"max_pool2d: expected a floating point input, got {input.dtype.name}")
    geometry = _geometry("max_pool2d", batched("max_pool2d", input)[0], kernel_size, stride, padding,
                         dilation, ceil_mode)
    if return_indices:
        return _maybe_unbatched("max_pool2d", input, lambda x: _max_pool_with_indices(x, geometry))
    return _maybe_unbatched("max_pool2d", input, lambda x: call_op("max_pool2d", (x,), geometry))


def _max_pool2d_backward(grad_output, input, output, **geometry):
    """Each window's gradient goes to its first maximum (row-major), as in torch.

    Built from comparisons and multiplies rather than argmax/scatter: on CPUs those
    branch on every element and run several times slower on real activations.
    """
    x, out = input.detach(), output.detach()
    k, s, p, d = (geometry[a] for a in ("kernel_size", "stride", "padding", "dilation"))
    padded = _padded(x, k, s, p, d, float("-inf"))
    w = _pool_windows(x, float("-inf"), **geometry)
    claimed, parts = None, []
    for i in range(k[0]):
        for j in range(k[1]):
            hit = ew.eq(w[..., i, j], out)
            if claimed is None:
                claimed = hit
            else:
                hit = ew.logical_and(hit, ew.logical_not(claimed))
                claimed = ew.logical_or(claimed, hit)
            parts.append(grad_output * hit.to(grad_output.dtype))
    # stacked on a new leading axis (contiguous writes), then viewed as (..., kh, kw)
    cols = stack(parts, 0).reshape(k[0], k[1], *out.shape).permute(2, 3, 4, 5, 0, 1)
    dx = fold(cols, padded.shape, k, s, d)
    h, wd = x.shape[-2], x.shape[-1]
    return dx[..., p[0]:p[0] + h, p[1]:p[1] + wd] if tuple(dx.shape) != tuple(x.shape) else dx


@op(decompose=_max_pool2d_backward)
def max_pool2d_backward(grad_output, input, output, kernel_size, stride, padding, dilation,
                        ceil_mode):
    """The gradient of max_pool2d: ``grad_output`` routed to each window's first maximum."""
    return call_op("max_pool2d_backward", (grad_output, input, output),
                   {"kernel_size": kernel_size, "stride": stride, "padding": padding,
                    "dilation": dilation, "ceil_mode": ceil_mode})


def _max_pool_with_indices(x, geometry):
    w = _pool_windows(x, float("-inf"), **geometry)
    n, c, oh, ow, kh, kw = w.shape
    flat = w.reshape(n, c, oh, ow, kh * kw)
    idx = flat.argmax(-1, keepdim=True)      # the first maximum gets the gradient, as in torch
    out = flat.gather(-1, idx).squeeze(-1)
    return out, _flat_indices(idx.squeeze(-1), x, geometry, oh, ow)


def _flat_indices(win_idx, x, geometry, oh, ow):
    """Window-relative argmax -> index into the flattened (H*W) input plane (torch's convention)."""
    k, s, p, d = (geometry[a] for a in ("kernel_size", "stride", "padding", "dilation"))
    dev = x._backend.name
    r = win_idx // k[1]
    q = win_idx - r * k[1]
    rows = arange(oh, device=dev).reshape(oh, 1) * s[0] - p[0] + r * d[0]
    cols = arange(ow, device=dev).reshape(1, ow) * s[1] - p[1] + q * d[1]
    return rows * x.shape[-1] + cols


# -- average pooling ---------------------------------------------------------------------

def _avg_pool2d(input, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    geometry = {"kernel_size": kernel_size, "stride": stride, "padding": padding,
                "dilation": (1, 1), "ceil_mode": ceil_mode}
    total = _pool_windows(input, 0.0, **geometry).sum((-2, -1))
    k = kernel_size
    if divisor_override:
        return total / divisor_override
    h, w = input.shape[-2], input.shape[-1]
    overhang = _padded(input[:1, :1], k, stride, padding, (1, 1), 0.0).shape[-2:] != (
        h + 2 * padding[0], w + 2 * padding[1])
    if count_include_pad and not overhang:
        return total / (k[0] * k[1])
    # Divide each window by how many of its cells are real (or real + padding) input.
    mask = ones(1, 1, h, w, dtype=input.dtype, device=input._backend.name)
    if count_include_pad:  # padding counts, the ceil_mode overhang does not
        mask = pad(mask, (padding[1], padding[1], padding[0], padding[0]), value=1.0)
        unpadded = {**geometry, "padding": (0, 0)}
        counts = _pool_windows(mask, 0.0, **unpadded).sum((-2, -1))
    else:
        counts = _pool_windows(mask, 0.0, **geometry).sum((-2, -1))
    return total / counts


@op(decompose=_avg_pool2d, exposed=("plugtorch",) + _F)
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over sliding windows (padding, ceil_mode, count_include_pad, divisor_override)."""
    x, unbatched = batched("avg_pool2d", input)
    g = _geometry("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    x = x if x.dtype.is_floating_point else x.to(get_default_dtype())
    out = call_op("avg_pool2d", (x,), {"kernel_size": g["kernel_size"], "stride": g["stride"],
                                       "padding": g["padding"], "ceil_mode": ceil_mode,
                                       "count_include_pad": count_include_pad,
                                       "divisor_override": divisor_override})
    return out.squeeze(0) if unbatched else out


def _adaptive_avg_pool2d(input, *, output_size):
    oh, ow = output_size
    h, w = input.shape[-2], input.shape[-1]
    if h % oh == 0 and w % ow == 0:
        return avg_pool2d(input, (h // oh, w // ow), (h // oh, w // ow))
    # torch's adaptive windows: start = floor(i*H/OH), end = ceil((i+1)*H/OH)
    rows = []
    for i in range(oh):
        r0, r1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        cols = []
        for j in range(ow):
            c0, c1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            cols.append(input[..., r0:r1, c0:c1].mean((-2, -1), keepdim=True))
        rows.append(cat(cols, -1))
    return cat(rows, -2)


@op(decompose=_adaptive_avg_pool2d, exposed=("plugtorch",) + _F)
def adaptive_avg_pool2d(input, output_size):
    """Mean over torch's adaptive windows for a given output size (None keeps that size)."""
    x, unbatched = batched("adaptive_avg_pool2d", input)
    oh, ow = pair(output_size, "output_size") if output_size is not None else x.shape[-2:]
    size = (x.shape[-2] if oh is None else oh, x.shape[-1] if ow is None else ow)
    out = call_op("adaptive_avg_pool2d", (x,), {"output_size": size})
    return out.squeeze(0) if unbatched else out
