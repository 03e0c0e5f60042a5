"""Samples for the 1-D and 3-D convolutions, transposed convolutions, unfold/fold and the
N-d pools (the 2-D ones are in ``nn.py``)."""
from __future__ import annotations

import warnings

from ._common import F, Sample, Waiver, empty, is_torch, np, scalar, with_nans

SAMPLES: dict = {}


def _f(name, *args, **kw):
    """``F.<name>(*tensors, *args, **kw)`` on either side."""
    return lambda m, *xs: getattr(F(m), name)(*xs, *args, **kw)


def _quiet(call):
    """``call`` with warnings silenced (torch warns that an uneven 'same' padding copies the input)."""
    def f(m, *xs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call(m, *xs)
    return f


# -- convolutions ----------------------------------------------------------------------------

def _conv1d(g):
    c = lambda **kw: _f("conv1d", **kw)
    return [
        Sample((g.randn(2, 2, 6), g.randn(3, 2, 3), g.randn(3)), call=c(), desc="with bias"),
        Sample((g.randn(1, 4, 7), g.randn(4, 2, 2)), call=c(stride=2, padding=1, dilation=2, groups=2),
               gradgrad=False, desc="stride, padding, dilation, groups"),
        Sample((g.randn(1, 2, 5), g.randn(2, 2, 2)), call=c(padding="same"), torch_call=_quiet(c(padding="same")),
               desc="padding='same', even kernel"),
        Sample((g.randn(2, 5), g.randn(1, 2, 2)), call=c(), desc="unbatched"),
        Sample((g.randn(1, 1, 4), g.randn(1, 1, 2), g.randn(1)), call=c(), desc="small (gradgrad)"),
        Sample((empty(0, 2, 4), g.randn(3, 2, 2)), call=c(), desc="empty batch"),
        Sample((scalar(1.0), g.randn(1, 1, 1)), call=c(), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(1, 2, 4), g.randn(1, 3, 2)), call=c(), raises=RuntimeError, desc="channel mismatch"),
        Sample((g.randn(1, 1, 2), g.randn(1, 1, 3)), call=c(), raises=RuntimeError, desc="kernel too large"),
    ]


def _conv3d(g):
    c = lambda **kw: _f("conv3d", **kw)
    return [
        Sample((g.randn(1, 2, 3, 4, 3), g.randn(2, 2, 2, 2, 2), g.randn(2)), call=c(), gradgrad=False,
               desc="with bias"),
        Sample((g.randn(1, 2, 3, 3, 4), g.randn(2, 1, 2, 1, 2)),
               call=c(stride=(2, 1, 2), padding=1, dilation=(1, 2, 1), groups=2), gradgrad=False,
               desc="stride, padding, dilation, groups"),
        Sample((g.randn(1, 1, 3, 3, 3), g.randn(1, 1, 2, 3, 2)), call=c(padding="same"), gradgrad=False,
               desc="padding='same'"),
        Sample((g.randn(1, 2, 2, 2), g.randn(1, 1, 2, 1, 2)), call=c(), desc="unbatched (gradgrad)"),
        Sample((empty(0, 1, 2, 2, 2), g.randn(2, 1, 1, 1, 1)), call=c(), desc="empty batch"),
        Sample((scalar(1.0), g.randn(1, 1, 1, 1, 1)), call=c(), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(1, 2, 2, 2, 2), g.randn(1, 1, 1, 1)), call=c(), raises=RuntimeError,
               desc="4-D weight"),
    ]


def _conv_transpose(nd):
    name = f"conv_transpose{nd}d"

    def samples(g):
        c = lambda **kw: _f(name, **kw)
        sp = (3, 2, 3)[:nd]
        k = (2, 3, 2)[:nd]
        return [
            Sample((g.randn(1, 2, *sp), g.randn(2, 3, *k), g.randn(3)), call=c(), gradgrad=nd == 1,
                   desc="with bias"),
            Sample((g.randn(1, 2, *sp), g.randn(2, 1, *k)), call=c(stride=2, padding=1, output_padding=1, groups=2),
                   gradgrad=False, desc="stride, padding, output_padding, groups"),
            Sample((g.randn(1, 1, *sp), g.randn(1, 2, *k)), call=c(dilation=2, output_padding=1),
                   gradgrad=False, desc="output_padding below dilation"),
            Sample((g.randn(1, *(2,) * nd), g.randn(1, 1, *(2,) * nd)), call=c(stride=2), desc="unbatched"),
            Sample((empty(0, 2, *sp), g.randn(2, 1, *k)), call=c(), desc="empty batch"),
            Sample((scalar(1.0), g.randn(1, 1, *k)), call=c(), raises=RuntimeError, desc="0-d input"),
            Sample((g.randn(1, 2, *sp), g.randn(2, 1, *k)), call=c(output_padding=1), raises=RuntimeError,
                   desc="output_padding not below stride or dilation"),
            Sample((g.randn(1, 3, *sp), g.randn(2, 1, *k)), call=c(), raises=RuntimeError,
                   desc="channel mismatch"),
        ]
    return samples


def _conv3d_grads(op_name):
    """conv3d_input_grad / conv3d_weight_grad against torch.nn.grad (the output gradient is input 0)."""
    def samples(g):
        def call(x_shape, w_shape, **kw):
            kw = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **kw}

            def f(m, grad_output, other):
                if is_torch(m):
                    if op_name == "conv3d_input_grad":
                        return m.nn.grad.conv3d_input(x_shape, other, grad_output, **kw)
                    return m.nn.grad.conv3d_weight(other, w_shape, grad_output, **kw)
                from plugtorch.core.ops import conv
                trip = {k: (v,) * 3 if k != "groups" else v for k, v in kw.items()}
                shape = x_shape if op_name == "conv3d_input_grad" else w_shape
                return getattr(conv, op_name)(grad_output, other, shape, **trip)
            return f
        first = op_name == "conv3d_input_grad"
        return [
            Sample((g.randn(1, 2, 2, 2, 2), g.randn(2, 2, 2, 2, 2) if first else g.randn(1, 2, 3, 3, 3)),
                   call=call((1, 2, 3, 3, 3), (2, 2, 2, 2, 2)), gradgrad=False),
            Sample((g.randn(1, 2, 2, 2, 2), g.randn(2, 1, 2, 2, 2) if first else g.randn(1, 2, 3, 3, 3)),
                   call=call((1, 2, 3, 3, 3), (2, 1, 2, 2, 2), stride=2, padding=1, groups=2),
                   gradgrad=False, desc="stride, padding, groups"),
            Sample((empty(0, 1, 1, 1, 1), g.randn(1, 1, 2, 2, 2) if first else empty(0, 1, 2, 2, 2)),
                   call=call((0, 1, 2, 2, 2), (1, 1, 2, 2, 2))),
            Sample((g.randn(1, 2, 3, 3, 3), g.randn(2, 1, 2, 2, 2) if first else g.randn(1, 3, 4, 4, 4)),
                   call=call((1, 3, 4, 4, 4), (2, 1, 2, 2, 2)), raises=RuntimeError, desc="channels that disagree"),
            Waiver("zero_dim", "a convolution's gradient has the 5-D shape of its input or weight"),
        ]
    return samples


# -- unfold / fold ---------------------------------------------------------------------------

def _im2col(g):
    u = lambda *a, **kw: _f("unfold", *a, **kw)
    return [
        Sample((g.randn(1, 2, 3, 4),), call=u(2)),
        Sample((g.randn(2, 1, 5, 4),), call=u((2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
               desc="dilation, padding, stride"),
        Sample((g.randn(2, 3, 3),), call=u(2), desc="unbatched"),
        Sample((g.randn(1, 1, 3, 2),), call=u((2, 1)), desc="small"),
        Sample((empty(0, 2, 3, 3),), call=u(2), desc="empty batch"),
        Sample((scalar(1.0),), call=u(2), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(1, 1, 2, 2),), call=u(3), raises=RuntimeError, desc="kernel too large"),
    ]


def _col2im(g):
    f = lambda *a, **kw: _f("fold", *a, **kw)
    return [
        Sample((g.randn(1, 8, 6),), call=f((3, 4), 2), desc="overlapping blocks"),
        Sample((g.randn(2, 6, 10),), call=f((5, 4), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
               desc="dilation, padding, stride"),
        Sample((g.randn(4, 4),), call=f((3, 3), 2), desc="unbatched"),
        Sample((g.randn(1, 2, 3),), call=f((2, 3), (2, 1)), desc="small"),
        Sample((empty(0, 4, 4),), call=f((3, 3), 2), desc="empty batch"),
        Sample((scalar(1.0),), call=f((3, 3), 2), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(1, 8, 5),), call=f((3, 4), 2), raises=RuntimeError, desc="wrong number of blocks"),
        Sample((g.randn(1, 7, 6),), call=f((3, 4), 2), raises=RuntimeError, desc="channels not divisible"),
    ]


# -- pooling ---------------------------------------------------------------------------------

def _max_pool(nd):
    def samples(g):
        p = lambda *a, **kw: _f(f"max_pool{nd}d", *a, **kw)
        sp = (5, 4, 5)[:nd] if nd < 3 else (4, 3, 4)
        out = [
            Sample((g.distinct(1, 2, *sp),), call=p(2)),
            Sample((g.distinct(2, 1, *sp),), call=p(3, 2, 1), desc="stride, padding"),
            Sample((g.distinct(1, 1, *sp),), call=p(2, ceil_mode=True), desc="ceil_mode"),
            Sample((g.distinct(1, 1, *sp),), call=p(2, 1, 0, 2), desc="dilation"),
            Sample((g.distinct(2, *sp),), call=p(2), desc="unbatched"),
            Sample((g.distinct(1, 1, *(3,) * nd),), call=p(2, return_indices=True), desc="return_indices"),
            Sample((g.distinct(1, 1, *sp),), call=p(3, 2, 1, ceil_mode=True, return_indices=True),
                   desc="indices with padding, ceil_mode"),
            # NaN at the first window's first and last positions (torch: the last takes the gradient
            # and the index) and at the last window's last
            Sample((with_nans(g.distinct(1, 1, *(4,) * nd), 0, sum(4 ** i for i in range(nd)), 4 ** nd - 1),),
                   call=p(2, return_indices=True), numerical=False, gradgrad=False, desc="NaN windows"),
            Sample((empty(0, 1, *sp),), call=p(2)),
            Sample((scalar(1.0),), call=p(2), raises=RuntimeError, desc="0-d input"),
            Sample((g.randn(1, 1, *sp),), call=p(2, padding=2), raises=RuntimeError, desc="padding > kernel/2"),
        ]
        if nd == 3:
            out.append(Sample((np.arange(27).reshape(1, 1, 3, 3, 3) % 7,), call=p(2), grad=False,
                              desc="int64 input"))
        else:
            out.append(Sample((np.arange(6).reshape(1, 1, 6),), call=p(2), raises=RuntimeError,
                              desc="int64 input (torch has no integer max_pool1d)"))
        return out
    return samples


def _max_pool3d_backward(g):
    """The input gradient of max_pool3d for a given output gradient, against torch's autograd."""
    def call(**kw):
        geometry = {"kernel_size": 2, "stride": None, "padding": 0, "dilation": 1, "ceil_mode": False, **kw}

        def f(m, grad_output, x):
            if is_torch(m):
                x = x.detach().requires_grad_(True)
                out = m.nn.functional.max_pool3d(x, **geometry)
                return m.autograd.grad(out, x, grad_output, create_graph=True)[0]
            from plugtorch.core.ops import pooling
            norm = pooling._geometry("max_pool3d", x, 3, geometry["kernel_size"], geometry["stride"],
                                     geometry["padding"], geometry["dilation"], geometry["ceil_mode"])
            out = pooling.max_pool3d(x.detach(), **geometry)
            return pooling.max_pool3d_backward(grad_output, x, out, **norm)
        return f
    return [
        Sample((g.randn(1, 1, 2, 2, 2), g.distinct(1, 1, 4, 4, 4)), call=call(), grad_inputs=(0,)),
        Sample((g.randn(1, 1, 2, 2, 3), g.distinct(1, 1, 3, 4, 5)), call=call(kernel_size=3, stride=2, padding=1),
               grad_inputs=(0,), desc="stride, padding"),
        Sample((g.randn(1, 1, 2, 2, 2), with_nans(g.distinct(1, 1, 4, 4, 4), 0, 21, 63)), call=call(),
               grad_inputs=(0,), desc="NaN windows"),
        Sample((g.randn(1, 1, 2, 2, 2), g.distinct(1, 1, 3, 3, 3)), call=call(ceil_mode=True), grad_inputs=(0,),
               desc="ceil_mode"),
        Sample((empty(0, 1, 1, 1, 1), empty(0, 1, 2, 2, 2)), call=call(), grad_inputs=(0,)),
        Waiver("zero_dim", "max_pool3d's gradient has the 5-D shape of its input"),
    ]


def _avg_pool(nd):
    def samples(g):
        p = lambda *a, **kw: _f(f"avg_pool{nd}d", *a, **kw)
        sp = (5, 4, 5)[:nd] if nd < 3 else (4, 3, 4)
        out = [
            Sample((g.randn(1, 2, *sp),), call=p(2)),
            Sample((g.randn(1, 1, *sp),), call=p(3, 2, 1, count_include_pad=False), desc="padding not counted"),
            Sample((g.randn(1, 1, *sp),), call=p(3, 2, 1), desc="padding counted"),
            Sample((g.randn(1, 1, *sp),), call=p(2, ceil_mode=True), desc="ceil_mode"),
            Sample((g.randn(2, *sp),), call=p(2), desc="unbatched"),
            Sample((empty(0, 1, *sp),), call=p(2)),
            Sample((scalar(1.0),), call=p(2), raises=RuntimeError, desc="0-d input"),
        ]
        if nd == 3:
            out.append(Sample((g.randn(1, 1, *sp),), call=p(2, divisor_override=3), desc="divisor_override"))
        return out
    return samples


def _adaptive(nd):
    def samples(g):
        p = lambda size: _f(f"adaptive_avg_pool{nd}d", size)
        sp = (5, 7, 4)[:nd] if nd < 3 else (3, 5, 4)
        out = [
            Sample((g.randn(1, 2, *sp),), call=p(2), desc="uneven windows"),
            Sample((g.randn(1, 1, *(4,) * nd),), call=p(2), desc="even windows"),
            Sample((g.randn(2, *sp),), call=p(3), desc="unbatched"),
            Sample((empty(0, 1, *sp),), call=p(1)),
            Sample((scalar(1.0),), call=p(1), raises=RuntimeError, desc="0-d input"),
        ]
        if nd == 3:
            out.append(Sample((g.randn(1, 1, *sp),), call=p((2, None, 3)), desc="None keeps a size"))
        return out
    return samples


SAMPLES.update(
    conv1d=_conv1d, conv3d=_conv3d,
    conv_transpose1d=_conv_transpose(1), conv_transpose2d=_conv_transpose(2),
    conv_transpose3d=_conv_transpose(3),
    conv3d_input_grad=_conv3d_grads("conv3d_input_grad"),
    conv3d_weight_grad=_conv3d_grads("conv3d_weight_grad"),
    im2col=_im2col, col2im=_col2im,
    max_pool1d=_max_pool(1), max_pool3d=_max_pool(3), max_pool3d_backward=_max_pool3d_backward,
    avg_pool1d=_avg_pool(1), avg_pool3d=_avg_pool(3),
    adaptive_avg_pool1d=_adaptive(1), adaptive_avg_pool3d=_adaptive(3),
)
