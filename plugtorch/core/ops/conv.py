"""conv2d and 2-D pooling, built on the strided-window primitive (im2col style).

``windows(x)`` views every (kh, kw) patch of the last two axes without copying;
a convolution is then one batched matmul over (channels x kh x kw). The
window op's adjoint, ``fold``, sums patch gradients back into place with one
slice-add per kernel offset, and is itself differentiable (its derivative is the
window op again), so double backward through conv2d works.
"""
from __future__ import annotations

from ..dispatch import call_op, record, wrap
from ..grad_mode import _state as _grad, no_grad
from ..registry import OpDef
from ..tensor import Tensor

OPS: list[OpDef] = []


def _pair(v, name):
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2 or not all(isinstance(i, int) for i in v):
        raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
    return v


def _out_size(size, k, s, p, d, ceil_mode=False):
    span = size + 2 * p - d * (k - 1) - 1
    if ceil_mode:
        out = -(-span // s) + 1
        # torch: the last window must start inside the input or left padding
        if (out - 1) * s >= size + p:
            out -= 1
        return out
    return span // s + 1


# -- the window view and its adjoint ---------------------------------------------------

def _windows_rule(ctx, g):
    shape = ctx.meta[0][0]
    window, strides, dilation = ctx.attrs
    return fold(g, shape, window, strides, dilation)


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
    b = x._backend
    out = wrap(b.kernels["windows"](x._data, tuple(window), tuple(strides), tuple(dilation)), b)
    out._vc = x._vc
    if x.requires_grad and _grad.enabled:
        record(out, "windows", _windows_rule, (x,), attrs=(tuple(window), tuple(strides), tuple(dilation)))
    return out


OPS.append(OpDef("windows", derivative=_windows_rule,
                 doc="Sliding (kh, kw) windows over the last two axes, as a view."))


def _fold_rule(ctx, g):
    return windows(g, *ctx.attrs)


def fold(cols, shape, window, strides, dilation=(1, 1)):
    """The adjoint of ``windows``: sum each patch of ``cols`` back into an array of ``shape``."""
    b = cols._backend
    k = b.kernels
    kh, kw = window
    sh, sw = strides
    dh, dw = dilation
    oh, ow = cols._data.shape[-4], cols._data.shape[-3]
    acc = k["zeros"](tuple(shape), cols.dtype)
    lead = (Ellipsis,)
    for i in range(kh):
        rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
        for j in range(kw):
            idx = lead + (rows, slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))
            patch = k["getitem"](cols._data, lead + (slice(None), slice(None), i, j))
            k["setitem"](acc, idx, k["add"](k["getitem"](acc, idx), patch))
    out = wrap(acc, b)
    if cols.requires_grad and _grad.enabled:
        record(out, "fold", _fold_rule, (cols,), attrs=(tuple(window), tuple(strides), tuple(dilation)))
    return out


OPS.append(OpDef("fold", derivative=_fold_rule, doc="Sum sliding-window patches back into place (col2im)."))


def _pad_rule(ctx, g):
    top, left = ctx.attrs
    h, w = ctx.meta[0][0][-2:]
    return g[..., top:top + h, left:left + w]


def _pad_last2(x, top, bottom, left, right, value):
    """Constant padding of the last two axes, each side on its own; the one padding op here."""
    if not (top or bottom or left or right):
        return x
    b = x._backend
    widths = ((0, 0),) * (x.ndim - 2) + ((top, bottom), (left, right))
    out = wrap(b.kernels["pad"](x._data, widths, value), b)
    if x.requires_grad and _grad.enabled:
        record(out, "pad2d", _pad_rule, (x,), attrs=(top, left))
    return out


def pad2d(x, padding, value=0.0):
    """Pad the last two axes by (ph, pw) on each side with a constant."""
    ph, pw = padding
    if x.ndim < 2 or ph < 0 or pw < 0:
        raise RuntimeError(f"pad2d: expected an input with at least 2 dims and non-negative padding, "
                           f"got shape {list(x.shape)} and padding {tuple(padding)}")
    return _pad_last2(x, ph, ph, pw, pw, value)


OPS.append(OpDef("pad2d", derivative=_pad_rule, doc="Constant padding of the last two axes."))


# -- convolution -------------------------------------------------------------------------

def _batched(op, x, expected_ndim=4):
    if x.ndim == expected_ndim:
        return x, False
    if x.ndim == expected_ndim - 1:
        return x.unsqueeze(0), True
    raise RuntimeError(
        f"Expected 3D (unbatched) or 4D (batched) input to {op}, but got input of size: {list(x.shape)}"
    )


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation with torch.nn.functional.conv2d's arguments and semantics.

    A registered op: a backend kernel named "conv2d" receives (input, weight[, bias]) as
    native arrays and stride/padding/dilation/groups by name, and is preferred to the
    im2col decomposition below; its gradient then comes from the decomposition.
    """
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError(f"conv2d(): input and weight must be Tensors, got {type(input).__name__} "
                        f"and {type(weight).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"conv2d(): bias must be a Tensor or None, got {type(bias).__name__}")
    tensors = (input, weight) if bias is None else (input, weight, bias)
    return call_op(_CONV2D, tensors, {"stride": stride, "padding": padding, "dilation": dilation,
                                      "groups": groups})


def _conv2d(input, weight, bias=None, *, stride, padding, dilation, groups):
    x, unbatched = _batched("conv2d", input)
    if weight.ndim != 4:
        raise RuntimeError(f"conv2d: weight must be 4-D (out_channels, in_channels/groups, kH, kW), "
                           f"got size {list(weight.shape)}")
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            ph = pw = 0
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            kh_, kw_ = weight.shape[2], weight.shape[3]
            tot_h, tot_w = dh * (kh_ - 1), dw * (kw_ - 1)
            if tot_h % 2 or tot_w % 2:
                x = _pad_asym(x, tot_h, tot_w)
                ph = pw = 0
            else:
                ph, pw = tot_h // 2, tot_w // 2
        else:
            raise ValueError(f"Invalid padding string '{padding}'; expected 'valid' or 'same'")
    else:
        ph, pw = _pair(padding, "padding")
    if min(sh, sw) <= 0 or min(dh, dw) <= 0 or min(ph, pw) < 0:
        raise RuntimeError(f"conv2d: non-positive stride/dilation or negative padding is not supported "
                           f"(stride={stride}, padding={padding}, dilation={dilation})")
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
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
    # Work channels-first, batch-second: the im2col copy below then reads contiguous output
    # rows (8x faster than the N-first order on MNIST shapes) and fold's adds are contiguous.
    xc = pad2d(x, (ph, pw)).permute(1, 0, 2, 3)                      # (C, N, Hp, Wp), a view
    cols = windows(xc, (kh, kw), (sh, sw), (dh, dw))                  # (C, N, OH, OW, kh, kw)
    oh, ow = cols.shape[2], cols.shape[3]
    g = groups
    # (G, C/G, kh, kw, N, OH, OW) -> (G, K, N*OH*OW): one batched matmul per group
    cols = cols.reshape(g, cg, n, oh, ow, kh, kw).permute(0, 1, 5, 6, 2, 3, 4)
    cols = cols.reshape(g, cg * kh * kw, n * oh * ow)
    wmat = weight.reshape(g, o // g, cg * kh * kw)                    # (G, O/G, K)
    out = wmat @ cols                                                  # (G, O/G, N*OH*OW)
    out = out.reshape(o, n, oh, ow).permute(1, 0, 2, 3)              # (N, O, OH, OW), a view
    if bias is not None:
        if bias.shape != (o,):
            raise RuntimeError(f"conv2d: bias must have shape [{o}], got {list(bias.shape)}")
        out = out + bias.reshape(1, o, 1, 1)
    return out.squeeze(0) if unbatched else out


_CONV2D = OpDef("conv2d", decompose=_conv2d,
                doc="2-D cross-correlation (stride, padding, dilation, groups), im2col + matmul.")
OPS.append(_CONV2D)


def _pad_asym(x, tot_h, tot_w):
    """'same' padding with an odd total: the extra row/column goes at the end, as torch does."""
    return _pad_last2(x, tot_h // 2, tot_h - tot_h // 2, tot_w // 2, tot_w - tot_w // 2, 0.0)


# -- pooling ------------------------------------------------------------------------------

def _pool_geometry(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(stride if stride not in (None, ()) else (kh, kw), "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError(f"{op}: pad should be at most half of effective kernel size, but got "
                           f"pad={max(ph, pw)}, kernel_size={max(kh, kw)}")
    h, w = x.shape[-2], x.shape[-1]
    oh = _out_size(h, kh, sh, ph, dh, ceil_mode)
    ow = _out_size(w, kw, sw, pw, dw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{op}: Given input size: ({x.shape[-3]}x{h}x{w}). Calculated output size: "
                           f"({x.shape[-3]}x{oh}x{ow}). Output size is too small")
    # extra bottom/right padding so ceil_mode windows exist
    eh = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + 2 * ph))
    ew = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (w + 2 * pw))
    return (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow), (eh, ew)


def _pad_pool(x, pads, extra, value):
    """Pooling's padding: ``pads`` on both sides, plus ``extra`` at the end for ceil_mode."""
    (ph, pw), (eh, ew) = pads, extra
    return _pad_last2(x, ph, ph + eh, pw, pw + ew, value)


def _maxpool_rule(ctx, g):
    """Each window's gradient goes to its first maximum (row-major), as in torch.

    Built from comparisons and multiplies rather than argmax/scatter: on CPUs those
    branch on every element and run several times slower on real activations.
    """
    from .elementwise import eq, logical_and, logical_not, logical_or
    from .shape import stack
    (x,) = ctx.saved
    out = ctx.output.detach()
    k, s, p, d, _, extra = _pool_geometry("max_pool2d", x, **ctx.attrs)
    padded = _pad_pool(x.detach(), p, extra, float("-inf"))
    w = windows(padded, k, s, d)
    claimed = None
    parts = []
    for i in range(k[0]):
        for j in range(k[1]):
            hit = eq(w[..., i, j], out)
            if claimed is None:
                claimed = hit
            else:
                hit = logical_and(hit, logical_not(claimed))
                claimed = logical_or(claimed, hit)
            parts.append(g * hit.to(g.dtype))
    # stacked on a new leading axis (contiguous writes), then viewed as (..., kh, kw)
    nd = out.ndim
    cols = stack(parts, 0).reshape(k[0], k[1], *out.shape).permute(*range(2, nd + 2), 0, 1)
    dx = fold(cols, padded.shape, k, s, d)
    h, wd = x.shape[-2], x.shape[-1]
    return dx[..., p[0]:p[0] + h, p[1]:p[1] + wd] if (any(p) or any(extra)) else dx


def _max_pool2d(input, *, kernel_size, stride, padding, dilation, ceil_mode):
    """The forward as a running maximum over window offsets, recorded as one node."""
    from .elementwise import maximum
    _batched("max_pool2d", input)
    attrs = {"kernel_size": kernel_size, "stride": stride, "padding": padding,
             "dilation": dilation, "ceil_mode": ceil_mode}
    k, s, p, d, _, extra = _pool_geometry("max_pool2d", input, **attrs)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"max_pool2d: expected a floating point input, got {input.dtype.name}")
    with no_grad():
        w = windows(_pad_pool(input, p, extra, float("-inf")), k, s, d)
        out = w[..., 0, 0]
        for i in range(k[0]):
            for j in range(k[1]):
                if i or j:
                    out = maximum(out, w[..., i, j])  # NaN-propagating, like torch
        out = out.contiguous() if k == (1, 1) else out
    out = wrap(out._data, out._backend)
    if input.requires_grad and _grad.enabled:
        record(out, "max_pool2d", _maxpool_rule, (input,), saved=(input,), save_output=True,
               attrs=attrs)
    return out


_MAX_POOL2D = OpDef("max_pool2d", decompose=_max_pool2d, derivative=_maxpool_rule,
                    save=("inputs", "output"),
                    doc="Max over sliding windows; the gradient goes to the first maximum.")
OPS.append(_MAX_POOL2D)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    if return_indices:
        x, unbatched = _batched("max_pool2d", input)
        k, s, p, d, (oh, ow), extra = _pool_geometry("max_pool2d", x, kernel_size, stride, padding,
                                                     dilation, ceil_mode)
        out, indices = _max_pool_with_indices(x, k, s, p, d, oh, ow, extra)
        return (out.squeeze(0), indices.squeeze(0)) if unbatched else (out, indices)
    return call_op(_MAX_POOL2D, (input,), {"kernel_size": kernel_size, "stride": stride,
                                           "padding": padding, "dilation": dilation,
                                           "ceil_mode": ceil_mode})


def _max_pool_with_indices(x, k, s, p, d, oh, ow, extra):
    cols = windows(_pad_pool(x, p, extra, float("-inf")), k, s, d)
    n, c = x.shape[0], x.shape[1]
    flat = cols.reshape(n, c, oh, ow, k[0] * k[1])
    idx = flat.argmax(-1, keepdim=True)      # the first maximum gets the gradient, as in torch
    out = flat.gather(-1, idx).squeeze(-1)
    return out, _flat_indices(idx.squeeze(-1), x, k, s, p, d, oh, ow)


def _flat_indices(win_idx, x, k, s, p, d, oh, ow):
    """Window-relative argmax -> index into the flattened (H*W) input plane (torch's convention)."""
    from .creation import arange
    dev = x._backend.name
    r = win_idx // k[1]
    q = win_idx - r * k[1]
    rows = arange(oh, device=dev).reshape(oh, 1) * s[0] - p[0] + r * d[0]
    cols = arange(ow, device=dev).reshape(1, ow) * s[1] - p[1] + q * d[1]
    return rows * x.shape[-1] + cols


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return call_op(_AVG_POOL2D, (input,), {
        "kernel_size": kernel_size, "stride": stride, "padding": padding, "ceil_mode": ceil_mode,
        "count_include_pad": count_include_pad, "divisor_override": divisor_override})


def _avg_pool2d(input, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    x, unbatched = _batched("avg_pool2d", input)
    k, s, p, d, (oh, ow), extra = _pool_geometry("avg_pool2d", x, kernel_size, stride, padding, 1,
                                                 ceil_mode)
    x = x if x.dtype.is_floating_point else x.to(_default_float())
    cols = windows(_pad_pool(x, p, extra, 0.0), k, s, d)
    total = cols.sum((-2, -1))
    if divisor_override:
        out = total / divisor_override
    elif count_include_pad and not any(extra):
        out = total / (k[0] * k[1])
    else:
        # Divide each window by how many of its cells are real (or real+padding) input.
        from .creation import ones
        h, w = x.shape[-2], x.shape[-1]
        mask = ones(1, 1, h, w, dtype=x.dtype, device=x._backend.name)
        if count_include_pad:
            # padding counts, the ceil_mode overhang does not
            mask = _pad_pool(mask, p, (0, 0), 1.0)
            mask = _pad_pool(mask, (0, 0), extra, 0.0)
        else:
            mask = _pad_pool(mask, p, extra, 0.0)
        counts = windows(mask, k, s, d).sum((-2, -1))
        out = total / counts
    return out.squeeze(0) if unbatched else out


def adaptive_avg_pool2d(input, output_size):
    return call_op(_ADAPTIVE_AVG_POOL2D, (input,), {"output_size": output_size})


def _adaptive_avg_pool2d(input, *, output_size):
    x, unbatched = _batched("adaptive_avg_pool2d", input)
    oh, ow = _pair(output_size, "output_size") if output_size is not None else x.shape[-2:]
    oh = x.shape[-2] if oh is None else oh
    ow = x.shape[-1] if ow is None else ow
    h, w = x.shape[-2], x.shape[-1]
    if h % oh == 0 and w % ow == 0:
        out = avg_pool2d(x, (h // oh, w // ow), (h // oh, w // ow))
    else:
        # torch's adaptive windows: start = floor(i*H/OH), end = ceil((i+1)*H/OH)
        from .shape import cat
        rows = []
        for i in range(oh):
            r0, r1 = (i * h) // oh, -(-((i + 1) * h) // oh)
            cols = []
            for j in range(ow):
                c0, c1 = (j * w) // ow, -(-((j + 1) * w) // ow)
                cols.append(x[..., r0:r1, c0:c1].mean((-2, -1), keepdim=True))
            rows.append(cat(cols, -1))
        out = cat(rows, -2)
    return out.squeeze(0) if unbatched else out


def _default_float():
    from ..dtypes import get_default_dtype
    return get_default_dtype()


_AVG_POOL2D = OpDef("avg_pool2d", decompose=_avg_pool2d,
                    doc="Mean over sliding windows (padding, ceil_mode, count_include_pad).")
_ADAPTIVE_AVG_POOL2D = OpDef("adaptive_avg_pool2d", decompose=_adaptive_avg_pool2d,
                             doc="Mean over torch's adaptive windows for a given output size.")
OPS.extend([_AVG_POOL2D, _ADAPTIVE_AVG_POOL2D])
