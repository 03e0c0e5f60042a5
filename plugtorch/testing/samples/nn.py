"""Samples for activations, (log-)softmax, and the convolution/pooling ops."""
from __future__ import annotations

from ._common import F, Sample, Waiver, empty, np, scalar

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
_NP = {
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
    from plugtorch.core.ops import conv

    def unfold(k, s, d=(1, 1)):
        def call(m, x):
            if m.__name__ == "torch":
                if d != (1, 1):
                    return NotImplemented
                return x.unfold(-2, k[0], s[0]).unfold(-2, k[1], s[1])
            return conv.windows(x, k, s, d)
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
    from plugtorch.core.ops import conv

    def call(shape, k, s, d=(1, 1)):
        def f(m, cols):
            if m.__name__ == "torch":
                return NotImplemented
            return conv.fold(cols, shape, k, s, d)
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
        Sample((g.randn(1, 2, 3, 3, 2, 2),), call=call((1, 2, 4, 4), (2, 2), (1, 1)), ref=ref((1, 2, 4, 4), (2, 2), (1, 1))),
        Sample((g.randn(1, 1, 2, 2, 3, 2),), call=call((1, 1, 5, 4), (3, 2), (2, 2)), ref=ref((1, 1, 5, 4), (3, 2), (2, 2)),
               desc="strided"),
        Sample((g.randn(1, 1, 3, 3, 2, 2),), call=call((1, 1, 5, 5), (2, 2), (1, 1), (2, 2)),
               ref=ref((1, 1, 5, 5), (2, 2), (1, 1), (2, 2)), desc="dilated"),
        Sample((empty(0, 1, 2, 2, 2, 2),), call=call((0, 1, 3, 3), (2, 2), (1, 1)), ref=ref((0, 1, 3, 3), (2, 2), (1, 1))),
        Waiver("zero_dim", "fold is the adjoint of the window view of a 4-D input; a 0-d input has no windows"),
    ]


def _pad2d(g):
    from plugtorch.core.ops import conv

    def call(p, value=0.0):
        def f(m, x):
            if m.__name__ == "torch":
                return m.nn.functional.pad(x, (p[1], p[1], p[0], p[0]), value=value)
            return conv.pad2d(x, p, value)
        return f
    def ref(p, value=0.0):
        return lambda a: np.pad(a, [(0, 0)] * (a.ndim - 2) + [(p[0], p[0]), (p[1], p[1])],
                                constant_values=value)
    return [
        Sample((g.randn(1, 2, 3, 3),), call=call((1, 2)), ref=ref((1, 2))),
        Sample((g.randn(2, 3),), call=call((0, 1), -1.0), ref=ref((0, 1), -1.0)),
        Sample((empty(0, 2, 2),), call=call((1, 1)), ref=ref((1, 1))),
        Waiver("zero_dim", "pad2d pads the last two dims; a 0-d input has none"),
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


# conv2d and the average pools are checked through the window op's samples while they are
# compositions, and under their own names once they are registered ops.
SAMPLES.update(windows=_windows, fold=_fold, pad2d=_pad2d, max_pool2d=_max_pool2d, conv2d=_conv2d,
               avg_pool2d=_avg_pool2d, adaptive_avg_pool2d=_adaptive_avg_pool2d)
