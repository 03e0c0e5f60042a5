"""Convolution: conv2d and conv3d, the ops their derivatives are written with
(conv{2,3}d_input_grad, conv{2,3}d_weight_grad), and conv1d as a 2-D convolution of height 1.

The forward is im2col + one batched matmul per group, built on the N-d window view. Its
derivative is two registered ops, so a backend that fuses the forward (a cuDNN-style
kernel) can fuse the backward as well; each has a decomposition of its own (a
transposed matmul and ``fold``; a matmul against the windows), which autograd
differentiates for double backward. One set of helpers serves any number of spatial
dims; each rank is an op of its own, as in torch, so a backend can fuse one rank only.
conv1d is the 2-D op on a height-1 image (as torch does on CPU), so a backend's 2-D
kernel serves it.

Each image's patches are one (C*prod(k), prod(out)) block and each product runs per image, so
the forward and the input gradient come out (N, C, ...) as torch's do, with no transposing copy,
and on MNIST's shapes faster than one product over the whole batch (one thread, batch 64,
16->32 3x3: the forward's product 1.6 -> 1.0 ms, the input gradient's 1.45 -> 0.86 ms; the
NumPy backend's whole conv2d kernel 2.08 -> 1.57 ms, and 0.69 -> 0.36 ms for 1->16). The weight
gradient's one-product forms (see ``geometry.weight_grad_product``) still take the patches
channels first, batch second, and copy the output gradient to that order (0.15 ms of 1.8 for
16->32). Where padding is cut from the input gradient, the cut is copied (torch's gradient is
contiguous): 84 us of 1.8 ms for 16<-32 at 14x14.

The weight gradient rebuilds the patches instead of keeping the forward's alive until
backward (nine times the input's size for a 3x3 kernel). The two backward ops take the
batch in chunks of at most ``geometry.CHUNK_BYTES`` of patches, which bounds their temporaries on
large inputs; the forward keeps one patch matrix. Fewer chunks run faster: each costs its own
matmul and, for the input gradient, a share of the final ``cat``. MNIST's second convolution
(16->32, 3x3, 7.2 MB of patches at batch 64), input gradient: 4 MB chunks 2274 / 1445 us on
one / two threads, one chunk (8 MB and up) 2140 / 1250 us; at batch 128, 4 MB 2914 us, 8 MB
2719 us, 16 MB (one chunk) 2482 us on two threads; the weight gradient changes by under 5 %.
Smaller chunks were meant to keep a chunk's patches in cache for its matmul and to keep glibc
from mapping whole-batch buffers afresh every step; the measurements above show no cache
gain, and the NumPy backend raises glibc's mmap threshold to 32 MB (its ``allocator.py``).
"""
from __future__ import annotations

import builtins
import math

from ..dispatch import call_op
from ..geometry import batch_chunks, weight_grad_product, window_count
from ..optable import MODES, Done, op
from ..tensor import Tensor
from ._jvp import multilinear
from .movement import pad
from .shape import cat
from .window import fold, windows

_EXPOSED = ("plugtorch", "nn.functional")


def batched(op_name, x, expected_ndim=4):
    """``x`` with a batch dim (and whether one was added), or torch's error for another rank."""
    if x.ndim == expected_ndim:
        return x, False
    if x.ndim == expected_ndim - 1:
        return x.unsqueeze(0), True
    raise RuntimeError(f"Expected {expected_ndim - 1}D (unbatched) or {expected_ndim}D (batched) input "
                       f"to {op_name}, but got input of size: {list(x.shape)}")


def unbatched_call(name, operands, attrs):
    """What a bind returns for an unbatched input: ``Done`` with the op run on a batch of one
    and squeezed back (kernels and decompositions always receive a batch)."""
    return Done(call_op(name, operands, attrs).squeeze(0))


def ntuple(v, n: int, name: str) -> tuple:
    """An int or a 1- or n-sequence of ints as an n-tuple (conv and pooling arguments)."""
    if isinstance(v, builtins.int):
        return (v,) * n
    v = tuple(v)
    if len(v) == 1:
        v = v * n
    if len(v) != n or not all(isinstance(i, builtins.int) for i in v):
        raise ValueError(f"{name} must be an int or a sequence of {n} ints, got {v!r}")
    return v


def _spatial(nd, first=2):
    return tuple(range(first, first + nd))


def _patch_windows(x, kernel, stride, padding, dilation):
    """The (C, N, *out, *kernel) window view of the zero-padded input, channels first."""
    nd = len(kernel)
    if any(padding):
        x = pad(x, tuple(w for p in reversed(padding) for w in (p, p)))
    return windows(x.permute(1, 0, *_spatial(nd)), kernel, stride, dilation)


def _im2col(win, groups, a, b, out=None):
    """(G, C/G * prod(k), (b - a) * prod(out)) patches of images a..b of a ``_patch_windows`` view
    (its first ``out`` windows per axis, where given)."""
    nd = (win.ndim - 2) // 2
    c, n = win.shape[0], win.shape[1]
    k = win.shape[2 + nd:]
    part = win if (a, b) == (0, n) else win[:, a:b]
    if out is not None and tuple(out) != tuple(win.shape[2:2 + nd]):
        part = part[(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]
    out = part.shape[2:2 + nd]
    part = part.reshape(groups, c // groups, b - a, *out, *k)
    part = part.permute(0, 1, *_spatial(nd, 3 + nd), 2, *_spatial(nd, 3))
    return part.reshape(groups, c // groups * math.prod(k), (b - a) * math.prod(out))


def _image_patches(x, kernel, stride, padding, dilation, groups, out=None):
    """(N, G, C/G * prod(k), prod(out)) patches of the images ``x`` (N, C, *size), each image's
    block whole: a product per image then gives (N, O, *out), the output's own layout (the first
    ``out`` windows per axis, where given)."""
    nd = len(kernel)
    n, c = x.shape[0], x.shape[1]
    if any(padding):
        x = pad(x, tuple(w for p in reversed(padding) for w in (p, p)))
    win = windows(x, kernel, stride, dilation)                          # (N, C, *out, *k), a view
    if out is not None and tuple(out) != tuple(win.shape[2:2 + nd]):
        win = win[(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]
    out = win.shape[2:2 + nd]
    part = win.reshape(n, groups, c // groups, *out, *kernel).permute(0, 1, 2, *_spatial(nd, 3 + nd), *_spatial(nd, 3))
    return part.reshape(n, groups, c // groups * math.prod(kernel), math.prod(out))


# -- the forward, any rank -------------------------------------------------------------------

def _conv(input, weight, bias, *, stride, padding, dilation, groups):
    nd = weight.ndim - 2
    o, cg, k = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
    cols = _image_patches(input, k, stride, padding, dilation, groups)      # (N, G, K, P)
    out_size = tuple(window_count(*t) for t in zip(input.shape[2:], k, stride, padding, dilation))
    # one product per image, (G, O/G, K) @ (K, P) each: (N, O, *out) as torch lays it out, and on
    # MNIST's shapes faster than one (O, K) @ (K, N * P) product and a transposing copy
    out = (weight.reshape(groups, o // groups, cg * math.prod(k)) @ cols).reshape(input.shape[0], o, *out_size)
    return out if bias is None else out + bias.reshape(1, o, *(1,) * nd)


def _conv_rule(input_grad_op, weight_grad_op):
    def rule(ctx, g):
        x, w = ctx.saved[0], ctx.saved[1]
        a = ctx.attrs
        need = ctx.needs_input_grad
        gx = call_op(input_grad_op, (g, w), {"input_shape": tuple(x.shape), **a}) if need[0] else None
        gw = call_op(weight_grad_op, (g, x), {"weight_shape": tuple(w.shape), **a}) if need[1] else None
        gb = g.sum((0,) + _spatial(g.ndim - 2)) if need[2] else None
        return gx, gw, gb
    return rule


def _resolve_padding(name, x, weight, stride, padding, dilation, nd):
    """Padding per spatial dim (and ``x`` padded at the end where 'same' is uneven)."""
    if not isinstance(padding, str):
        return x, ntuple(padding, nd, "padding")
    if padding == "valid":
        return x, (0,) * nd
    if padding != "same":
        raise ValueError(f"Invalid padding string '{padding}'; expected 'valid' or 'same'")
    if any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")
    totals = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    if any(t % 2 for t in totals):
        # an odd total: the extra row/column goes at the end, as torch does
        x = pad(x, tuple(w for t in reversed(totals) for w in (t // 2, t - t // 2)))
        return x, (0,) * nd
    return x, tuple(t // 2 for t in totals)


def check_conv_args(name, input, weight, bias, nd):
    """Types and ranks of a convolution's tensors; the input with a batch dim, and whether added."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError(f"{name}(): input and weight must be Tensors, got {type(input).__name__} "
                        f"and {type(weight).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"{name}(): bias must be a Tensor or None, got {type(bias).__name__}")
    if MODES.on and input.dtype is not weight.dtype:  # autocast casts them, as torch's, before this check
        input, weight, bias = MODES.cast_operands(name, (input, weight, bias)) or (input, weight, bias)
    x, unbatched = batched(name, input, nd + 2)
    if weight.ndim != nd + 2:
        dims = ", ".join(["kD", "kH", "kW"][3 - nd:])
        raise RuntimeError(f"{name}: weight must be {nd + 2}-D (out_channels, in_channels/groups, {dims}), "
                           f"got size {list(weight.shape)}")
    if x.dtype is not weight.dtype:
        raise RuntimeError(f"{name}: input type ({x.dtype.name}) and weight type ({weight.dtype.name}) "
                           "should be the same")
    return x, unbatched


def _conv_args(name, nd):
    """torch's checks and normalisation for conv{nd}d: the bind of each rank's op."""
    def bind(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        x, unbatched = check_conv_args(name, input, weight, bias, nd)
        stride = ntuple(stride, nd, "stride")
        dilation = ntuple(dilation, nd, "dilation")
        x, padding = _resolve_padding(name, x, weight, stride, padding, dilation, nd)
        if min(stride + dilation) <= 0 or min(padding) < 0:
            raise RuntimeError(f"{name}: non-positive stride/dilation or negative padding is not supported "
                               f"(stride={stride}, padding={padding}, dilation={dilation})")
        c, o, cg = x.shape[1], weight.shape[0], weight.shape[1]
        if groups <= 0 or c % groups or o % groups:
            raise RuntimeError(f"{name}: groups={groups} must divide in_channels={c} and out_channels={o}")
        if cg * groups != c:
            raise RuntimeError(
                f"Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(x.shape)} "
                f"to have {cg * groups} channels, but got {c} channels instead"
            )
        padded = [s + 2 * p for s, p in zip(x.shape[2:], padding)]
        span = [d * (k - 1) + 1 for d, k in zip(dilation, weight.shape[2:])]
        if any(p < s for p, s in zip(padded, span)):
            raise RuntimeError(
                f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
                f"({' x '.join(map(str, span))}). Kernel size can't be greater than actual input size"
            )
        if bias is not None and bias.shape != (o,):
            raise RuntimeError(f"{name}: bias must have shape [{o}], got {list(bias.shape)}")
        attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        if unbatched:
            return unbatched_call(name, (x, weight, bias), attrs)
        return (x, weight, bias), attrs
    return bind


@op(bind=_conv_args("conv2d", 2), derivative=_conv_rule("conv2d_input_grad", "conv2d_weight_grad"),
    save=(0, 1), exposed=_EXPOSED, jvp=multilinear("conv2d", bias=2, channel_dim=1))
def conv2d(input, weight, bias, *, stride, padding, dilation, groups):
    """2-D cross-correlation (stride, padding, dilation, groups), im2col + matmul.

    A backend kernel for "conv2d" receives (input, weight, bias) as native arrays (input
    4-D; bias may be None) and stride, padding, dilation (pairs of ints) and groups by
    name; "same" and "valid" padding are already resolved. conv1d runs on it too.
    """
    return _conv(input, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)


@op(bind=_conv_args("conv3d", 3), derivative=_conv_rule("conv3d_input_grad", "conv3d_weight_grad"),
    save=(0, 1), exposed=_EXPOSED, jvp=multilinear("conv3d", bias=2, channel_dim=1))
def conv3d(input, weight, bias, *, stride, padding, dilation, groups):
    """3-D cross-correlation over (N, C, D, H, W), im2col + matmul.

    A backend kernel for "conv3d" receives a 5-D input, weight and bias (or None) and
    stride, padding, dilation (triples) and groups by name.
    """
    return _conv(input, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)


def as_2d_attrs(attrs):
    """A 1-D op's attrs for the 2-D op on a height-1 image (stride/dilation 1, padding 0 on top)."""
    lead = {"padding": 0, "output_padding": 0}
    return {k: (v if k == "groups" else (lead.get(k, 1),) + tuple(v)) for k, v in attrs.items()}


@op(bind=_conv_args("conv1d", 1), exposed=_EXPOSED)
def conv1d(input, weight, bias, *, stride, padding, dilation, groups):
    """1-D cross-correlation over (N, C, L): conv2d on a height-1 image, as torch does on CPU,
    so a backend's conv2d kernel (and conv2d's derivative) serves it.

    A backend kernel for "conv1d" receives a 3-D input, weight and bias (or None) and
    stride, padding, dilation (1-tuples) and groups by name.
    """
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    return call_op("conv2d", (input.unsqueeze(2), weight.unsqueeze(2), bias), as_2d_attrs(attrs)).squeeze(2)


# -- the derivative's ops ----------------------------------------------------------------------

def _conv_input_grad(grad_output, weight, *, input_shape, stride, padding, dilation, groups):
    nd = weight.ndim - 2
    n, o, out_size = grad_output.shape[0], grad_output.shape[1], tuple(grad_output.shape[2:])
    cg, k = weight.shape[1], tuple(weight.shape[2:])
    c, size = input_shape[1], tuple(input_shape[2:])
    per = math.prod(out_size)
    wmat_t = weight.reshape(groups, o // groups, cg * math.prod(k)).mT       # (G, K, O/G)
    padded = tuple(s + 2 * p for s, p in zip(size, padding))
    parts = []
    for a, b in batch_chunks(n, c * math.prod(k) * per * grad_output.element_size()):
        g = grad_output if (a, b) == (0, n) else grad_output[a:b]
        dcols = wmat_t @ g.reshape(b - a, groups, o // groups, per)          # (chunk, G, K, P), per image
        dcols = dcols.reshape(b - a, c, *k, *out_size).permute(0, 1, *_spatial(nd, 2 + nd), *_spatial(nd))
        parts.append(fold(dcols, (b - a, c) + padded, k, stride, dilation))  # (chunk, C, *padded)
    dx = parts[0] if len(parts) == 1 else cat(parts, 0)
    if any(padding):  # the padding's share dropped: a copy, as torch's gradient is contiguous
        dx = dx[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(padding, size))].contiguous()
    return dx


def _conv_weight_grad(grad_output, input, *, weight_shape, stride, padding, dilation, groups):
    o, cg, k = weight_shape[0], weight_shape[1], tuple(weight_shape[2:])
    n, c = input.shape[0], input.shape[1]
    out_size = tuple(grad_output.shape[2:])
    per = math.prod(out_size)
    product = weight_grad_product(o // groups, cg * math.prod(k), n, per)
    # a transposed convolution's output_padding leaves windows past the output's end: unused
    win = None if product == "per_image" else _patch_windows(input, k, stride, padding, dilation)
    gw = None
    for a, b in batch_chunks(n, c * math.prod(k) * per * input.element_size()):
        g = (grad_output if (a, b) == (0, n) else grad_output[a:b]).reshape(b - a, groups, o // groups, per)
        if product == "per_image":    # (images, G, K, P) @ (images, G, P, O/G), summed
            cols = _image_patches(input if (a, b) == (0, n) else input[a:b], k, stride, padding, dilation,
                                  groups, out_size)
            part = (cols @ g.mT).sum(0).mT
        else:                         # one product over the chunk: the gradient copied channel-major
            assert win is not None
            cols = _im2col(win, groups, a, b, out_size)
            g = g.permute(1, 2, 0, 3).reshape(groups, o // groups, (b - a) * per)
            part = (cols @ g.mT).mT if product == "rows_first" else g @ cols.mT   # (G, O/G, K)
        gw = part if gw is None else gw + part
    assert gw is not None, "batch_chunks gives at least one chunk"
    return gw.reshape(o, cg, *k).contiguous()   # (a transposed product's view otherwise)


def _grad_op_attrs(shape_name, shape, stride, padding, dilation, groups):
    return {shape_name: tuple(shape), "stride": tuple(stride), "padding": tuple(padding),
            "dilation": tuple(dilation), "groups": groups}


def _check_input_grad(name, nd, grad_output, weight, input_shape, groups):
    n_c = (tuple(input_shape[:2]) if len(input_shape) == nd + 2 else None)
    if grad_output.ndim != nd + 2 or weight.ndim != nd + 2 or n_c is None or grad_output.shape[0] != n_c[0] \
            or grad_output.shape[1] != weight.shape[0] or weight.shape[1] * groups != n_c[1] \
            or weight.shape[0] % groups:
        raise RuntimeError(f"{name}: expected grad_output (N, O, {nd} spatial dims), weight (O, C/groups, "
                           f"{nd} kernel dims) and an input shape (N, C, {nd} spatial dims) that agree; got "
                           f"grad_output {list(grad_output.shape)}, weight {list(weight.shape)}, input shape "
                           f"{list(input_shape)}, groups {groups}")


def _check_weight_grad(name, nd, grad_output, input, weight_shape, stride, padding, dilation, groups):
    shape = tuple(weight_shape)
    ok = grad_output.ndim == nd + 2 and input.ndim == nd + 2 and len(shape) == nd + 2 and groups > 0 \
        and grad_output.shape[0] == input.shape[0] and grad_output.shape[1] == shape[0] \
        and shape[1] * groups == input.shape[1] and shape[0] % groups == 0
    # every output position needs a whole window of the (padded) input
    ok = ok and all(0 < o <= (s + 2 * p - d * (k - 1) - 1) // st + 1 for o, s, p, d, k, st in
                    zip(grad_output.shape[2:], input.shape[2:], padding, dilation, shape[2:], stride))
    if not ok:
        raise RuntimeError(f"{name}: expected grad_output (N, O, {nd} spatial dims), input (N, C, {nd} spatial "
                           f"dims) and a weight shape (O, C/groups, {nd} kernel dims) that agree, with an output "
                           f"no larger than the input's windows; got grad_output {list(grad_output.shape)}, input "
                           f"{list(input.shape)}, weight shape {list(shape)}, groups {groups}, stride "
                           f"{tuple(stride)}, padding {tuple(padding)}, dilation {tuple(dilation)}")


def _input_grad_args(name, nd):
    def bind(grad_output, weight, input_shape, stride, padding, dilation, groups):
        _check_input_grad(name, nd, grad_output, weight, input_shape, groups)
        return (grad_output, weight), _grad_op_attrs("input_shape", input_shape, stride, padding, dilation, groups)
    return bind


def _weight_grad_args(name, nd):
    def bind(grad_output, input, weight_shape, stride, padding, dilation, groups):
        _check_weight_grad(name, nd, grad_output, input, weight_shape, stride, padding, dilation, groups)
        return (grad_output, input), _grad_op_attrs("weight_shape", weight_shape, stride, padding, dilation, groups)
    return bind


@op(bind=_input_grad_args("conv2d_input_grad", 2))
def conv2d_input_grad(grad_output, weight, *, input_shape, stride, padding, dilation, groups):
    """The gradient of conv2d with respect to its input (a transposed convolution)."""
    return _conv_input_grad(grad_output, weight, input_shape=input_shape, stride=stride, padding=padding,
                            dilation=dilation, groups=groups)


@op(bind=_weight_grad_args("conv2d_weight_grad", 2))
def conv2d_weight_grad(grad_output, input, *, weight_shape, stride, padding, dilation, groups):
    """The gradient of conv2d with respect to its weight (patches times the output gradient)."""
    return _conv_weight_grad(grad_output, input, weight_shape=weight_shape, stride=stride, padding=padding,
                             dilation=dilation, groups=groups)


@op(bind=_input_grad_args("conv3d_input_grad", 3))
def conv3d_input_grad(grad_output, weight, *, input_shape, stride, padding, dilation, groups):
    """The gradient of conv3d with respect to its input (a transposed convolution)."""
    return _conv_input_grad(grad_output, weight, input_shape=input_shape, stride=stride, padding=padding,
                            dilation=dilation, groups=groups)


@op(bind=_weight_grad_args("conv3d_weight_grad", 3))
def conv3d_weight_grad(grad_output, input, *, weight_shape, stride, padding, dilation, groups):
    """The gradient of conv3d with respect to its weight (patches times the output gradient)."""
    return _conv_weight_grad(grad_output, input, weight_shape=weight_shape, stride=stride, padding=padding,
                             dilation=dilation, groups=groups)
