"""Samples for activations, (log-)softmax, and the convolution/pooling ops."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._common import F, Sample, Waiver, empty, is_torch, np, scalar, with_nans

SAMPLES: dict = {}


def _np_softplus(x, beta=1.0, threshold=20.0):
    z = beta * x
    return np.where(z > threshold, x, (np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))) / beta)


def _np_sigmoid(x):
    return 0.5 * (1 + np.tanh(x / 2))


def _np_elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(x))


_erf = np.vectorize(__import__("math").erf, otypes=[np.float64])
_SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946)

# NumPy references, so the activations are checked where torch is not installed
_NP: dict[str, Callable[..., Any]] = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": _np_sigmoid,
    "leaky_relu": lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
    "gelu": lambda x, approximate="none": (
        0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))) if approximate == "tanh"
        else 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    "silu": lambda x: x * _np_sigmoid(x),
    "softplus": _np_softplus,
    "elu": _np_elu,
    "hardtanh": lambda x: np.clip(x, -1, 1),
    "relu6": lambda x: np.clip(x, 0, 6),
    "selu": lambda x: _SELU[1] * _np_elu(x, _SELU[0]),
    "celu": lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(x / alpha)),
    "mish": lambda x: x * np.tanh(_np_softplus(x)),
    "hardsigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "logsigmoid": lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))),
    "tanhshrink": lambda x: x - np.tanh(x),
}


def _activation(name, domain=None, **kwargs):
    def samples(g):
        x = g.away(3, 4, low=0.05, high=3.0) if domain is None else domain(g, 3, 4)
        call = (lambda m, a: getattr(F(m), name)(a, **kwargs))
        ref = (lambda a: _NP[name](a, **kwargs))
        return [
            Sample((x,), call=call, ref=ref),
            Sample((g.away(2, 1, 3),), call=call, gradgrad=False, ref=ref),
            Sample((scalar(0.7),), call=call, ref=ref),
            Sample((scalar(-0.4),), call=call, ref=ref),
            Sample((empty(0, 3),), call=call, ref=ref),
        ]
    return samples


def _softplus_domain(g, *s):
    # straddle the threshold (beta * x > threshold returns x itself) without sitting on it
    return g.uniform(*s, low=-3, high=3) * np.array([1, 1, 1, 4])


SAMPLES.update(
    relu=_activation("relu"),
    sigmoid=_activation("sigmoid"),
    leaky_relu=_activation("leaky_relu", negative_slope=0.2),
    gelu=_activation("gelu"),
    silu=_activation("silu"),
    softplus=_activation("softplus", _softplus_domain, beta=2.0, threshold=3.0),
    elu=_activation("elu", alpha=0.7),
)


def _kinked(g, *s):
    # away from the kinks at -3, -1, 0, 1, 3 and 6 of the piecewise activations
    base = g.uniform(*s, low=0.1, high=0.8)
    return base + np.resize(np.array([-7.0, -4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 5.0, 6.0]), s) if s else base - 2


SAMPLES.update(
    hardtanh=_activation("hardtanh", _kinked),
    relu6=_activation("relu6", _kinked),
    selu=_activation("selu"),
    celu=_activation("celu", alpha=0.5),
    mish=_activation("mish"),
    hardsigmoid=_activation("hardsigmoid", _kinked),
    hardswish=_activation("hardswish", _kinked),
    softsign=_activation("softsign"),
    logsigmoid=_activation("logsigmoid"),
    tanhshrink=_activation("tanhshrink"),
)


def _more_activations(g):
    # leaky_relu's default slope and gelu's tanh form, on top of the generic samples
    return [
        Sample((g.away(3, 4),), call=lambda m, a: F(m).leaky_relu(a), ref=_NP["leaky_relu"], desc="default slope"),
        Sample((g.ints(2, 2),), call=lambda m, a: F(m).leaky_relu(a), raises=RuntimeError, desc="int64 input"),
    ]


SAMPLES["leaky_relu"] = (lambda base: lambda g: base(g) + _more_activations(g))(SAMPLES["leaky_relu"])
# relu(NaN) is NaN and its gradient flows (finite differences cannot see through a NaN: the
# gradient is checked against torch's)
SAMPLES["relu"] = (lambda base: lambda g: base(g) + [
    Sample((with_nans(g.distinct(3, 4), 2, 7),), call=lambda m, a: F(m).relu(a), numerical=False, gradgrad=False,
           desc="NaN input")])(SAMPLES["relu"])
SAMPLES["gelu"] = (lambda base: lambda g: base(g) + [
    Sample((g.randn(3, 4),), call=lambda m, a: F(m).gelu(a, approximate="tanh"),
           ref=lambda a: _NP["gelu"](a, "tanh"), desc="tanh approximation"),
    Sample((scalar(0.3),), call=lambda m, a: F(m).gelu(a, approximate="tanh"),
           ref=lambda a: _NP["gelu"](a, "tanh"), desc="tanh 0d"),
    Sample((g.randn(2),), call=lambda m, a: F(m).gelu(a, approximate="sigmoid"), raises=RuntimeError,
           desc="unknown approximation"),
])(SAMPLES["gelu"])
SAMPLES["softplus"] = (lambda base: lambda g: base(g) + [
    Sample((g.randn(3, 4) * 30,), call=lambda m, a: F(m).softplus(a), ref=_np_softplus,
           desc="defaults, large inputs"),
])(SAMPLES["softplus"])


def _glu(g):
    def glu(dim=-1):
        return lambda m, x: F(m).glu(x, dim)
    ref = lambda x, d=-1: np.split(x, 2, d)[0] * _np_sigmoid(np.split(x, 2, d)[1])
    return [
        Sample((g.randn(3, 4),), call=glu(), ref=ref),
        Sample((g.randn(4, 3),), call=glu(0), ref=lambda x: ref(x, 0), desc="dim=0"),
        Sample((g.randn(2),), call=glu(), ref=ref, desc="small"),
        Sample((empty(0, 4),), call=glu(), ref=ref),
        Sample((scalar(1.0),), call=glu(), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(2, 3),), call=glu(), raises=RuntimeError, desc="odd size"),
    ]


def _softmin(g):
    ref = lambda x, d: np.exp(_np_log_softmax(-x, d))
    call = lambda m, x, d: F(m).softmin(x, d)
    return [
        Sample((g.randn(3, 4), 1), call=call, ref=ref),
        Sample((g.randn(2, 3, 2), 0), call=call, ref=ref),
        Sample((scalar(0.3), 0), call=call, ref=ref),
        Sample((empty(0, 3), 1), call=call, ref=ref),
        Sample((g.ints(2, 3), 1), call=lambda m, x, d: F(m).softmin(x, d, dtype=m.float64), grad=False,
               desc="int64 input with dtype="),
    ]


SAMPLES.update(glu=_glu, softmin=_softmin)


def _np_log_softmax(x, d):
    z = x - np.max(x, axis=d, keepdims=True) if x.size else x
    return z - np.log(np.sum(np.exp(z), axis=d, keepdims=True))


def _softmax_like(name):
    def ref(x, d):
        out = _np_log_softmax(x, d)
        return out if name == "log_softmax" else np.exp(out)

    def samples(g):
        return [
            Sample((g.randn(3, 4), 1), ref=ref),
            Sample((g.randn(2, 3, 2), 0), ref=ref),
            Sample((g.randn(2, 3) * 200, -1), ref=ref, desc="large values stay finite"),
            Sample((scalar(0.3), 0), ref=ref),
            Sample((empty(0, 3), 1), ref=ref),
            Sample((g.ints(2, 3), 1), call=lambda m, x, d: getattr(m, name)(x, d, dtype=m.float64),
                   grad=False, desc="int64 input with dtype="),
        ]
    SAMPLES[name] = samples


_softmax_like("softmax")
_softmax_like("log_softmax")


# -- convolution and pooling: the window view, its adjoint, and the ops built on them ---------

def _windows(g):
    from plugtorch.core.ops import window

    def unfold(k, s, d=(1, 1)):
        def call(m, x):
            if m.__name__ == "torch":
                if d != (1, 1):
                    return NotImplemented
                return x.unfold(-2, k[0], s[0]).unfold(-2, k[1], s[1])
            return window.windows(x, k, s, d)
        return call

    def conv2d(**kw):
        return lambda m, x, w, *b: F(m).conv2d(x, w, *b, **kw)
    return [
        Sample((g.randn(1, 2, 4, 5),), call=unfold((2, 3), (1, 1))),
        Sample((g.randn(2, 1, 5, 5),), call=unfold((3, 2), (2, 1)), desc="strided"),
        Sample((empty(0, 1, 3, 3),), call=unfold((2, 2), (1, 1)), desc="empty batch"),
        Sample((g.randn(1, 1, 5, 5),), call=unfold((2, 2), (1, 1), (2, 2)),
               ref=lambda x: np.stack([np.stack([x[..., i:i + 3:2, j:j + 3:2] for j in range(3)], -3)
                                       for i in range(3)], -4), desc="dilated"),
        # conv2d is composed from the window view: checked here until it is an op of its own
        Sample((g.randn(1, 2, 5, 5), g.randn(3, 2, 3, 3), g.randn(3)), call=conv2d(), gradgrad=False,
               desc="conv2d with bias"),
        Sample((g.randn(2, 4, 5, 4), g.randn(4, 2, 2, 2)), call=conv2d(stride=2, padding=1, groups=2),
               gradgrad=False, desc="conv2d stride, padding, groups"),
        Sample((g.randn(1, 1, 6, 6), g.randn(2, 1, 2, 2)), call=conv2d(dilation=2, padding="same"),
               gradgrad=False, desc="conv2d dilation, padding='same'"),
        Sample((g.randn(1, 5, 5), g.randn(2, 1, 3, 3)), call=conv2d(padding=1), gradgrad=False,
               desc="conv2d unbatched"),
        Sample((g.randn(1, 2, 3, 3), g.randn(1, 3, 2, 2)), call=conv2d(), raises=RuntimeError,
               desc="conv2d channel mismatch"),
        Sample((scalar(1.0), g.randn(1, 1, 1, 1)), call=conv2d(), raises=RuntimeError, desc="conv2d 0-d input"),
        Sample((g.randn(2, 1, 4, 4),), call=lambda m, x: F(m).avg_pool2d(x, 2), desc="avg_pool2d"),
        Sample((g.randn(1, 2, 5, 5),), call=lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, count_include_pad=False),
               desc="avg_pool2d padding without counting it"),
        Sample((g.randn(1, 1, 5, 5),), call=lambda m, x: F(m).avg_pool2d(x, 2, ceil_mode=True),
               desc="avg_pool2d ceil_mode"),
    ]


def _fold(g):
    from plugtorch.core.ops import window

    def call(shape, k, s, d=(1, 1)):
        def f(m, cols):
            if m.__name__ == "torch":
                return NotImplemented
            return window.fold(cols, shape, k, s, d)
        return f

    def ref(shape, k, s, d=(1, 1)):
        def f(cols):
            out = np.zeros(shape)
            oh, ow = cols.shape[-4], cols.shape[-3]
            for i in range(k[0]):
                for j in range(k[1]):
                    for p in range(oh):
                        for q in range(ow):
                            out[..., p * s[0] + i * d[0], q * s[1] + j * d[1]] += cols[..., p, q, i, j]
            return out
        return f
    return [
        Sample((g.randn(1, 2, 3, 3, 2, 2),), call=call((1, 2, 4, 4), (2, 2), (1, 1)),
               ref=ref((1, 2, 4, 4), (2, 2), (1, 1))),
        Sample((g.randn(1, 1, 2, 2, 3, 2),), call=call((1, 1, 5, 4), (3, 2), (2, 2)),
               ref=ref((1, 1, 5, 4), (3, 2), (2, 2)), desc="strided"),
        Sample((g.randn(1, 1, 3, 3, 2, 2),), call=call((1, 1, 5, 5), (2, 2), (1, 1), (2, 2)),
               ref=ref((1, 1, 5, 5), (2, 2), (1, 1), (2, 2)), desc="dilated"),
        Sample((empty(0, 1, 2, 2, 2, 2),), call=call((0, 1, 3, 3), (2, 2), (1, 1)),
               ref=ref((0, 1, 3, 3), (2, 2), (1, 1))),
        Waiver("zero_dim", "fold is the adjoint of the window view of a 4-D input; a 0-d input has no windows"),
    ]


def _max_pool2d(g):
    def pool(*args, **kw):
        return lambda m, x: F(m).max_pool2d(x, *args, **kw)
    return [
        Sample((g.distinct(1, 2, 4, 4),), call=pool(2)),
        Sample((g.distinct(2, 1, 5, 5),), call=pool(3, 2, 1), desc="stride, padding"),
        Sample((g.distinct(1, 1, 5, 5),), call=pool(2, ceil_mode=True), desc="ceil_mode"),
        Sample((g.distinct(1, 1, 6, 6),), call=pool(2, 1, 0, 2), desc="dilation"),
        Sample((g.distinct(1, 5, 5),), call=pool(2), desc="unbatched"),
        Sample((g.distinct(1, 1, 4, 4),), call=pool(2, return_indices=True), desc="return_indices"),
        # NaN maxima: two NaNs in one window, one in another, and windows without (finite
        # differences cannot see through a NaN: the gradient is checked against torch's)
        Sample((with_nans(g.distinct(1, 2, 4, 4), 1, 4, 10, 16, 21),), call=pool(2), numerical=False,
               gradgrad=False, desc="NaN windows"),
        Sample((with_nans(g.distinct(1, 2, 4, 4), 1, 4, 10, 16, 21),), call=pool(2, return_indices=True),
               numerical=False, gradgrad=False, desc="NaN windows, return_indices"),
        Sample((with_nans(g.distinct(1, 1, 5, 5), 6, 12),), call=pool(3, 2, 1), numerical=False, gradgrad=False,
               desc="NaN in overlapping windows"),
        Sample((empty(0, 1, 4, 4),), call=pool(2)),
        Sample((scalar(1.0),), call=pool(2), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(1, 1, 4, 4),), call=pool(2, padding=2), raises=RuntimeError, desc="padding > kernel/2"),
    ]


def _conv2d(g):
    def conv2d(**kw):
        return lambda m, x, w, *b: F(m).conv2d(x, w, *b, **kw)
    return [
        Sample((g.randn(1, 2, 4, 4), g.randn(3, 2, 2, 2), g.randn(3)), call=conv2d(), desc="with bias"),
        Sample((g.randn(2, 2, 5, 5), g.randn(2, 1, 3, 3)), call=conv2d(stride=2, padding=1, groups=2),
               gradgrad=False, desc="stride, padding, groups"),
        Sample((g.randn(1, 1, 5, 5), g.randn(1, 1, 2, 2)), call=conv2d(dilation=2, padding="same"),
               gradgrad=False, desc="dilation, padding='same'"),
        Sample((empty(0, 1, 3, 3), g.randn(2, 1, 2, 2)), call=conv2d(), desc="empty batch"),
        Sample((scalar(1.0), g.randn(1, 1, 1, 1)), call=conv2d(), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(1, 2, 3, 3), g.randn(1, 3, 2, 2)), call=conv2d(), raises=RuntimeError,
               desc="channel mismatch"),
    ]


def _avg_pool2d(g):
    def pool(*args, **kw):
        return lambda m, x: F(m).avg_pool2d(x, *args, **kw)
    return [
        Sample((g.randn(1, 2, 4, 4),), call=pool(2)),
        Sample((g.randn(1, 1, 5, 5),), call=pool(3, 2, 1, count_include_pad=False), desc="padding not counted"),
        Sample((g.randn(1, 1, 5, 5),), call=pool(2, ceil_mode=True), desc="ceil_mode"),
        Sample((g.randn(1, 4, 4),), call=pool(2), desc="unbatched"),
        Sample((empty(0, 1, 4, 4),), call=pool(2)),
        Sample((scalar(1.0),), call=pool(2), raises=RuntimeError, desc="0-d input"),
    ]


def _adaptive_avg_pool2d(g):
    def pool(size):
        return lambda m, x: F(m).adaptive_avg_pool2d(x, size)
    return [
        Sample((g.randn(1, 2, 4, 4),), call=pool(2)),
        Sample((g.randn(1, 1, 5, 7),), call=pool((2, 3)), desc="uneven windows"),
        Sample((empty(0, 1, 4, 4),), call=pool(1)),
        Sample((scalar(1.0),), call=pool(1), raises=RuntimeError, desc="0-d input"),
    ]


# -- the ops conv2d's and max_pool2d's derivatives are written with -----------------------------

def _conv_grads(op_name):
    """conv2d_input_grad / conv2d_weight_grad against torch.nn.grad (an output gradient is input 0)."""
    def samples(g):
        def call(x_shape, w_shape, **kw):
            kw = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **kw}

            def f(m, grad_output, other):
                pairs = {k: (v, v) if isinstance(v, int) and k != "groups" else v for k, v in kw.items()}
                if is_torch(m):
                    if op_name == "conv2d_input_grad":
                        return m.nn.grad.conv2d_input(x_shape, other, grad_output, **kw)
                    return m.nn.grad.conv2d_weight(other, w_shape, grad_output, **kw)
                from plugtorch.core.ops import conv
                fn = getattr(conv, op_name)
                return fn(grad_output, other, x_shape if op_name == "conv2d_input_grad" else w_shape,
                          **pairs)
            return f
        # (grad_output, weight) for the input gradient; (grad_output, input) for the weight gradient
        if op_name == "conv2d_input_grad":
            return [
                Sample((g.randn(1, 3, 3, 3), g.randn(3, 2, 2, 2)), call=call((1, 2, 4, 4), (3, 2, 2, 2))),
                Sample((g.randn(2, 2, 3, 3), g.randn(2, 1, 3, 3)),
                       call=call((2, 2, 5, 5), (2, 1, 3, 3), stride=2, padding=1, groups=2),
                       gradgrad=False, desc="stride, padding, groups"),
                Sample((g.randn(1, 1, 2, 2), g.randn(1, 1, 2, 2)),
                       call=call((1, 1, 6, 6), (1, 1, 2, 2), stride=2, dilation=2), gradgrad=False,
                       desc="dilation, uncovered edge"),
                Sample((empty(0, 2, 3, 3), g.randn(2, 1, 2, 2)), call=call((0, 1, 4, 4), (2, 1, 2, 2))),
                Waiver("zero_dim", "a convolution's gradient has the 4-D shape of its input"),
            ]
        return [
            Sample((g.randn(1, 3, 3, 3), g.randn(1, 2, 4, 4)), call=call((1, 2, 4, 4), (3, 2, 2, 2))),
            Sample((g.randn(2, 2, 3, 3), g.randn(2, 2, 5, 5)),
                   call=call((2, 2, 5, 5), (2, 1, 3, 3), stride=2, padding=1, groups=2),
                   gradgrad=False, desc="stride, padding, groups"),
            Sample((g.randn(1, 1, 2, 2), g.randn(1, 1, 6, 6)),
                   call=call((1, 1, 6, 6), (1, 1, 2, 2), stride=2, dilation=2), gradgrad=False,
                   desc="dilation, uncovered edge"),
            Sample((empty(0, 2, 3, 3), g.randn(0, 1, 4, 4)), call=call((0, 1, 4, 4), (2, 1, 2, 2))),
            Waiver("zero_dim", "a convolution's gradient has the 4-D shape of its weight"),
        ]
    return samples


def _max_pool2d_backward(g):
    """The input gradient of max_pool2d for a given output gradient, against torch's autograd."""
    def call(**kw):
        geometry = {"kernel_size": 2, "stride": None, "padding": 0, "dilation": 1, "ceil_mode": False,
                    **kw}

        def f(m, grad_output, x):
            if is_torch(m):
                x = x.detach().requires_grad_(True)
                out = m.nn.functional.max_pool2d(x, **geometry)
                return m.autograd.grad(out, x, grad_output, create_graph=True)[0]
            from plugtorch.core.ops import pooling
            norm = pooling._geometry("max_pool2d", x, 2, geometry["kernel_size"], geometry["stride"],
                                     geometry["padding"], geometry["dilation"], geometry["ceil_mode"])
            out = pooling.max_pool2d(x.detach(), **geometry)
            return pooling.max_pool2d_backward(grad_output, x, out, **norm)
        return f
    return [
        Sample((g.randn(1, 2, 2, 2), g.distinct(1, 2, 4, 4)), call=call(), grad_inputs=(0,)),
        Sample((g.randn(2, 1, 3, 3), g.distinct(2, 1, 5, 5)), call=call(kernel_size=3, stride=2, padding=1),
               grad_inputs=(0,), desc="stride, padding"),
        Sample((g.randn(1, 2, 2, 2), with_nans(g.distinct(1, 2, 4, 4), 1, 4, 10, 16, 21)), call=call(),
               grad_inputs=(0,), desc="NaN windows"),
        Sample((g.randn(1, 1, 3, 3), with_nans(g.distinct(1, 1, 5, 5), 6, 12)),
               call=call(kernel_size=3, stride=2, padding=1), grad_inputs=(0,), desc="NaN in overlapping windows"),
        Sample((g.randn(1, 1, 3, 3), g.distinct(1, 1, 5, 5)), call=call(ceil_mode=True), grad_inputs=(0,),
               desc="ceil_mode"),
        Sample((empty(0, 1, 2, 2), empty(0, 1, 4, 4)), call=call(), grad_inputs=(0,)),
        Waiver("zero_dim", "max_pool2d's gradient has the 4-D shape of its input"),
    ]


def _threshold_backward(g):
    """relu's gradient op against torch's aten::threshold_backward."""
    def call(threshold):
        def f(m, grad_output, x):
            if is_torch(m):
                return m.ops.aten.threshold_backward(grad_output, x, threshold)
            from plugtorch.core.ops import activation
            return activation.threshold_backward(grad_output, x, threshold)
        return f
    return [
        Sample((g.randn(3, 4), g.distinct(3, 4)), call=call(0), grad_inputs=(0,)),
        Sample((g.randn(2, 3, 5), g.distinct(2, 3, 5)), call=call(0.25), grad_inputs=(0,), desc="threshold 0.25"),
        Sample((g.randn(4, 3).T, g.distinct(4, 3).T), call=call(0), grad_inputs=(0,), desc="transposed"),
        # a NaN input is not <= the threshold, so its gradient flows (torch's rule)
        Sample((g.randn(3, 4), with_nans(g.distinct(3, 4), 1, 6, 11)), call=call(0), grad_inputs=(0,),
               desc="NaN input"),
        Sample((scalar(0.7), scalar(-0.4)), call=call(0), grad_inputs=(0,)),
        Sample((empty(0, 3), empty(0, 3)), call=call(0), grad_inputs=(0,)),
        Sample((g.randn(3, 4), g.randn(4, 3)), call=call(0), raises=RuntimeError, desc="shapes differ"),
    ]


def _output_backward(name):
    """tanh's or sigmoid's gradient op (grad_output, output) against torch's aten op of that name."""
    def f(m, grad_output, output):
        if is_torch(m):
            return getattr(m.ops.aten, name)(grad_output, output)
        from plugtorch.core.ops import activation
        return getattr(activation, name)(grad_output, output)

    def samples(g):
        return [
            Sample((g.randn(3, 4), g.uniform(3, 4)), call=f),
            Sample((g.randn(2, 3, 5), g.uniform(2, 3, 5)), call=f, desc="3-d"),
            Sample((g.randn(4, 3).T, g.uniform(4, 3).T), call=f, desc="transposed"),
            Sample((g.randn(3, 4), g.uniform(4, 3)), call=f, raises=RuntimeError, desc="shapes differ"),
            Sample((scalar(0.7), scalar(-0.4)), call=f),
            Sample((empty(0, 3), empty(0, 3)), call=f),
            Sample((g.ints(3), g.ints(3)), call=f, raises=RuntimeError, desc="integers"),
        ]
    return samples


def _gelu_backward(g):
    """gelu's gradient op (grad_output, input) against torch's aten::gelu_backward, both forms."""
    def call(approximate):
        def f(m, grad_output, x):
            if is_torch(m):
                return m.ops.aten.gelu_backward(grad_output, x, approximate=approximate)
            from plugtorch.core.ops import activation
            return activation.gelu_backward(grad_output, x, approximate=approximate)
        return f
    return [
        Sample((g.randn(3, 4), g.randn(3, 4) * 2), call=call("none")),
        Sample((g.randn(3, 4), g.randn(3, 4) * 2), call=call("tanh"), desc="tanh form"),
        Sample((g.randn(2, 3, 5), g.randn(2, 3, 5)), call=call("none"), desc="3-d"),
        Sample((g.randn(4, 3).T, g.randn(4, 3).T), call=call("tanh"), desc="transposed"),
        Sample((scalar(0.7), scalar(-0.4)), call=call("none")),
        Sample((empty(0, 3), empty(0, 3)), call=call("none")),
        Sample((g.randn(3, 4), g.randn(4, 3)), call=call("none"), raises=RuntimeError, desc="shapes differ"),
        Sample((g.randn(3), g.randn(3)), call=call("sigmoid"), raises=RuntimeError, desc="unknown form"),
    ]


def _softmax_backward(name, aten):
    """softmax's or log_softmax's gradient op (grad_output, output, dim) against torch's aten op."""
    def samples(g):
        def call(dim):
            def f(m, grad_output, output):
                if is_torch(m):
                    return getattr(m.ops.aten, aten)(grad_output, output, dim, output.dtype)
                from plugtorch.core.ops import activation
                return getattr(activation, name)(grad_output, output, dim)
            return f
        # softmax's outputs are probabilities, log_softmax's their logs
        y = g.uniform if name == "softmax_backward" else (lambda *shape: g.uniform(*shape, low=-3.0, high=0.0))
        samples = [
            Sample((g.randn(3, 4), y(3, 4)), call=call(-1)),
            Sample((g.randn(2, 3, 5), y(2, 3, 5)), call=call(1), desc="a middle dim"),
            Sample((g.randn(2, 3, 5), y(2, 3, 5)), call=call(2), desc="the last dim"),
            Sample((g.randn(4, 3).T, y(4, 3).T), call=call(1), desc="transposed"),
            Sample((empty(0, 3), empty(0, 3)), call=call(1)),
            Sample((scalar(0.7), scalar(1.0 if name == "softmax_backward" else 0.0)), call=call(0)),
        ]
        if name == "softmax_backward":  # torch's log_softmax one does not check its shapes (ours does)
            samples.append(Sample((g.randn(3, 4), y(4, 3)), call=call(1), raises=RuntimeError, desc="shapes differ"))
        return samples
    return samples


SAMPLES.update(windows=_windows, fold=_fold, max_pool2d=_max_pool2d, conv2d=_conv2d, gelu_backward=_gelu_backward,
               softmax_backward=_softmax_backward("softmax_backward", "_softmax_backward_data"),
               log_softmax_backward=_softmax_backward("log_softmax_backward",
                                                      "_log_softmax_backward_data"),
               avg_pool2d=_avg_pool2d, adaptive_avg_pool2d=_adaptive_avg_pool2d,
               conv2d_input_grad=_conv_grads("conv2d_input_grad"),
               conv2d_weight_grad=_conv_grads("conv2d_weight_grad"),
               max_pool2d_backward=_max_pool2d_backward, threshold_backward=_threshold_backward,
               tanh_backward=_output_backward("tanh_backward"),
               sigmoid_backward=_output_backward("sigmoid_backward"))


# -- hardshrink, softshrink, prelu ---------------------------------------------------------------

def _shrink(npop):
    def samples(g):
        x = np.array([-1.0, -0.3, 0.2, 0.7, 2.0])  # away from the band's edges
        return [
            Sample((x,), ref=lambda a: npop(a, 0.5)),
            Sample((g.randn(2, 3) * 2 + 0.05, 0.25), ref=npop, desc="lambd"),
            Sample((scalar(-2.0),), ref=lambda a: npop(a, 0.5)),
            Sample((empty(0, 2),), ref=lambda a: npop(a, 0.5)),
        ]
    return samples


def _hardshrink_ref(a, lambd):
    return np.where(np.abs(a) > lambd, a, 0.0)


def _softshrink_ref(a, lambd):
    return np.where(a > lambd, a - lambd, np.where(a < -lambd, a + lambd, 0.0))


def _prelu(g):
    def ref(x, w):
        w = w.reshape([-1] + [1] * (x.ndim - 2)) if w.size > 1 else w.reshape(())
        return np.where(x > 0, x, w * x)
    return [
        Sample((g.away(2, 3, 2) * np.sign(g.randn(2, 3, 2)), g.positive(3)), ref=ref, desc="a slope per channel"),
        Sample((g.away(4) * np.array([1, -1, 1, -1]), g.positive(1)), ref=ref, desc="one slope"),
        Sample((empty(0, 3), g.positive(3)), ref=ref),
        Sample((scalar(-1.5), g.positive(1)), ref=ref, desc="0-d input, one slope"),
        Sample((scalar(1.0), g.positive(2)), raises=RuntimeError, desc="0-d input, two slopes"),
        Sample((g.randn(2, 4), g.positive(3)), raises=RuntimeError, desc="slopes and channels differ"),
    ]


def _threshold(g):
    """torch.threshold: value where x <= threshold, else x; inputs kept off the threshold, where
    the gradient steps."""
    def call(threshold, value):
        return lambda m, a: F(m).threshold(a, threshold, value)
    return [
        Sample((g.away(3, 4),), call=call(0.0, 0.0), desc="as relu"),
        Sample((np.array([-1.0, 0.1, 0.9, 2.0]),), call=call(0.5, -3.0), desc="threshold 0.5, value -3"),
        Sample((g.away(4, 3).T,), call=call(0.0, 20.0), desc="transposed"),
        Sample((scalar(-2.0),), call=call(0.0, 1.5)),
        Sample((empty(0, 2),), call=call(0.0, 1.5)),
    ]


SAMPLES.update(hardshrink=_shrink(_hardshrink_ref), softshrink=_shrink(_softshrink_ref), prelu=_prelu,
               threshold=_threshold)
