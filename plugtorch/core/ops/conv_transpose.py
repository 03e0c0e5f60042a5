"""Transposed convolution: conv_transpose2d and conv_transpose3d, and conv_transpose1d on the 2-D op.

A transposed convolution *is* the input gradient of the convolution with the same
weight, so the forward runs the registered op ``conv{2,3}d_input_grad`` (a backend that
fuses that one fuses this too), and the derivative is the convolution itself (for the
input) and ``conv{2,3}d_weight_grad`` with the roles of input and output swapped (for
the weight): no new backward ops are needed.

``output_padding`` only extends the output at its far end; the windows it adds past the
last input position receive nothing in the forward and are cut off in the backward.
"""
from __future__ import annotations

from ..dispatch import call_op
from ..optable import op
from .conv import _EXPOSED, _spatial, as_2d_attrs, check_conv_args, ntuple, unbatched_call


def _output_size(size, k, s, p, d, op_):
    return (size - 1) * s - 2 * p + d * (k - 1) + op_ + 1


def _conv_transpose(input, weight, bias, *, stride, padding, output_padding, dilation, groups):
    nd = weight.ndim - 2
    size = tuple(_output_size(*t) for t in zip(input.shape[2:], weight.shape[2:], stride, padding,
                                               dilation, output_padding))
    out_shape = (input.shape[0], weight.shape[1] * groups) + size
    out = call_op(f"conv{nd}d_input_grad", (input, weight),
                  {"input_shape": out_shape, "stride": stride, "padding": padding,
                   "dilation": dilation, "groups": groups})
    return out if bias is None else out + bias.reshape(1, -1, *(1,) * nd)


def _conv_transpose_rule(nd):
    def rule(ctx, g):
        x, w = ctx.saved[0], ctx.saved[1]
        a = dict(ctx.attrs)
        del a["output_padding"]
        need = ctx.needs_input_grad
        gx = gw = gb = None
        if need[0]:
            gx = call_op(f"conv{nd}d", (g, w, None), a)
            if tuple(gx.shape) != tuple(x.shape):  # output_padding >= stride: one window too many
                gx = gx[(slice(None), slice(None)) + tuple(slice(0, s) for s in x.shape[2:])].contiguous()
        if need[1]:
            gw = call_op(f"conv{nd}d_weight_grad", (x, g), {"weight_shape": tuple(w.shape), **a})
        if need[2]:
            gb = g.sum((0,) + _spatial(nd))
        return gx, gw, gb
    return rule


def _conv_transpose_args(name, nd):
    """torch's checks and normalisation for conv_transpose{nd}d: the bind of each rank's op."""
    def bind(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        x, unbatched = check_conv_args(name, input, weight, bias, nd)
        if isinstance(padding, str):
            raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
        stride, padding = ntuple(stride, nd, "stride"), ntuple(padding, nd, "padding")
        output_padding, dilation = ntuple(output_padding, nd, "output_padding"), ntuple(dilation, nd, "dilation")
        if min(stride + dilation) <= 0 or min(padding + output_padding) < 0:
            raise RuntimeError(f"{name}: non-positive stride/dilation or negative padding is not supported "
                               f"(stride={stride}, padding={padding}, dilation={dilation})")
        if any(op_ >= s and op_ >= d for op_, s, d in zip(output_padding, stride, dilation)):
            raise RuntimeError(f"{name}: output padding must be smaller than either stride or dilation, but "
                               f"got output_padding={output_padding}, stride={stride}, dilation={dilation}")
        c = x.shape[1]
        if groups <= 0 or weight.shape[0] % groups:
            raise RuntimeError(f"{name}: groups={groups} must divide in_channels={weight.shape[0]}")
        if weight.shape[0] != c:
            raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                               f"input{list(x.shape)} to have {weight.shape[0]} channels, but got {c} "
                               "channels instead")
        out_size = [_output_size(*t) for t in zip(x.shape[2:], weight.shape[2:], stride, padding, dilation,
                                                 output_padding)]
        if min(out_size) <= 0:
            raise RuntimeError(f"{name}: Given input size per channel: ({' x '.join(map(str, x.shape[2:]))}). "
                               f"Calculated output size per channel: ({' x '.join(map(str, out_size))}). "
                               "Output size is too small")
        o = weight.shape[1] * groups
        if bias is not None and bias.shape != (o,):
            raise RuntimeError(f"{name}: bias must have shape [{o}], got {list(bias.shape)}")
        attrs = {"stride": stride, "padding": padding, "output_padding": output_padding, "dilation": dilation,
                 "groups": groups}
        if unbatched:
            return unbatched_call(name, (x, weight, bias), attrs)
        return (x, weight, bias), attrs
    return bind


@op(bind=_conv_transpose_args("conv_transpose2d", 2), derivative=_conv_transpose_rule(2), save=(0, 1),
    exposed=_EXPOSED)
def conv_transpose2d(input, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """2-D transposed convolution ("deconvolution"); weight (in_channels, out_channels/groups, kH, kW).

    A backend kernel receives a 4-D input, weight and bias (or None) and stride, padding,
    output_padding, dilation (pairs) and groups by name.
    """
    return _conv_transpose(input, weight, bias, stride=stride, padding=padding, output_padding=output_padding,
                           dilation=dilation, groups=groups)


@op(bind=_conv_transpose_args("conv_transpose3d", 3), derivative=_conv_transpose_rule(3), save=(0, 1),
    exposed=_EXPOSED)
def conv_transpose3d(input, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """3-D transposed convolution; weight (in_channels, out_channels/groups, kD, kH, kW).

    A backend kernel receives a 5-D input, weight and bias (or None) and stride, padding,
    output_padding, dilation (triples) and groups by name.
    """
    return _conv_transpose(input, weight, bias, stride=stride, padding=padding, output_padding=output_padding,
                           dilation=dilation, groups=groups)


@op(bind=_conv_transpose_args("conv_transpose1d", 1), exposed=_EXPOSED)
def conv_transpose1d(input, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """1-D transposed convolution over (N, C, L): conv_transpose2d on a height-1 image.

    A backend kernel receives a 3-D input, weight and bias (or None) and stride, padding,
    output_padding, dilation (1-tuples) and groups by name.
    """
    attrs = {"stride": stride, "padding": padding, "output_padding": output_padding, "dilation": dilation,
             "groups": groups}
    return call_op("conv_transpose2d", (input.unsqueeze(2), weight.unsqueeze(2), bias),
                   as_2d_attrs(attrs)).squeeze(2)
