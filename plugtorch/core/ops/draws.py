"""torch's random draws beyond rand/randn/randint: normal with tensor parameters, bernoulli,
multinomial, and the in-place fills (random_, exponential_, geometric_, cauchy_,
log_normal_, bernoulli_).

Each transforms the backend's uniform, normal or integer draws with plugtorch ops, so every
backend with those primitives runs them and a generator makes them reproducible. Like
torch's, a draw is not differentiable: where torch's result still requires grad (normal's
mean and std, bernoulli's probabilities), it does here too, with a zero gradient.
"""
from __future__ import annotations

import math

from ..dtypes import bool_, float64, int64
from ..optable import public
from ..tensor import Tensor
from . import elementwise as ew
from .creation import _random, randint, zeros
from .inplace import _check_leaf, _fill_in_place
from .reduce import sum as _sum

_FLOAT_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _zero_grad_from(out, *params):
    """``out`` joined to the graph of ``params`` with a zero gradient, as torch's draws are."""
    never = zeros((), dtype=bool_, device=out._backend.name)
    for p in params:
        if isinstance(p, Tensor) and p.requires_grad:
            out = out + ew.where(never, p, 0).to(out.dtype)
    return out


def _uniform_like(x, generator, dtype=None):
    return _random("uniform", tuple(x.shape), generator, dtype or x.dtype, x._backend.name, False, 0.0, 1.0)


@public("plugtorch")
def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """Normal samples with the given mean and standard deviation: each a number (then ``size``
    is the shape) or a tensor (then the shapes broadcast)."""
    if out is not None:
        raise TypeError("normal(): out= is not supported; assign the result instead")
    m_t, s_t = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not m_t and not s_t:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: with a number mean and std, "
                            "give size (normal(mean, std, size))")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        shape = tuple(size) if not isinstance(size, int) else (size,)
        eps = _random("normal", shape, generator, dtype, device, False, 0.0, 1.0)
        return (eps * std + mean).requires_grad_(requires_grad)
    if size is not None:
        raise TypeError("normal(): size is given only with a number mean and std; a tensor's shape is the size")
    for t in (mean, std):
        if isinstance(t, Tensor) and not t.dtype.is_floating_point:
            raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{_word(t.dtype)}'")
    if s_t:
        if std.numel() and bool((std < 0).any().item()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    m = mean.detach() if m_t else mean
    s = std.detach() if s_t else std
    ref = m if m_t else s
    shape = tuple((m * 0 + s * 0).shape) if m_t and s_t else tuple(ref.shape)  # broadcast, with torch's error
    eps = _random("normal", shape, generator, ref.dtype, ref._backend.name, False, 0.0, 1.0)
    return _zero_grad_from(eps * s + m, mean, std)


def _word(dt) -> str:
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool", "float16": "Half", "float32": "Float", "float64": "Double"}.get(dt.name, dt.name)


def _check_probability(p):
    if isinstance(p, Tensor):
        if p.numel() and not bool(((p >= 0) & (p <= 1)).all().item()):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
                               "message be improved?  If so, please report an enhancement request to PyTorch.)")
    elif not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")


@public("plugtorch", "Tensor")
def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 draws, 1 with probability ``input`` (or, given ``p``, with probability ``p``), in
    ``input``'s dtype."""
    if out is not None:
        raise TypeError("bernoulli(): out= is not supported; assign the result instead")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{_word(input.dtype)}'")
    prob = input.detach() if p is None else p
    _check_probability(prob)
    u = _uniform_like(input, generator)
    draw = (u < prob).to(input.dtype)
    return _zero_grad_from(draw, input) if p is None else draw


@public("Tensor")
def bernoulli_(input, p=0.5, *, generator=None):
    """Fill with 0/1 draws, 1 with probability ``p`` (a number or a tensor that broadcasts)."""
    _check_probability(p)
    u = _random("uniform", tuple(input.shape), generator, float64, input._backend.name, False, 0.0, 1.0)
    prob = p.to(float64) if isinstance(p, Tensor) else p
    return _fill_from(input, (u < prob).to(input.dtype), "bernoulli_")


def _fill_from(x, values, op_name):
    _check_leaf(x, op_name)
    return _fill_in_place(x, values._data, op_name)


@public("plugtorch", "Tensor")
def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """``num_samples`` category indices per row of the (unnormalised) probabilities ``input``
    (1-D or 2-D), with or without replacement."""
    if out is not None:
        raise TypeError("multinomial(): out= is not supported; assign the result instead")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {_word(input.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    p = input.detach().to(float64)
    rows = p.reshape(-1, n)
    if rows.numel() and not bool((ew.isfinite(rows) & (rows >= 0)).all().item()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = _sum(rows, -1, keepdim=True)
    if rows.shape[0] and not bool((total > 0).all().item()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    k = rows.shape[0]
    if replacement:
        # inverse CDF: the index is how many cumulative probabilities the uniform draw passes
        cdf = (rows / total).cumsum(-1)
        u = _random("uniform", (k, num_samples, 1), generator, float64, p._backend.name, False, 0.0, 1.0)
        idx = _sum(u >= cdf[:, :-1].unsqueeze(1), -1)
    else:
        # Gumbel top-k: the k largest of log(p) + Gumbel noise are a draw without replacement
        u = _random("uniform", (k, n), generator, float64, p._backend.name, False, 0.0, 1.0)
        keys = ew.where(rows > 0, ew.log(rows) - ew.log(-ew.log1p(-u)), -math.inf)
        idx = keys.topk(num_samples, -1).indices
    idx = idx.to(int64)
    return idx.reshape(num_samples) if input.ndim == 1 else idx


@public("Tensor")
def random_(input, *args, generator=None, **kwargs):
    """Fill with integers drawn uniformly from [from, to) (``random_(to)``: [0, to); no
    bounds: [0, 2**mantissa] for floating dtypes, the dtype's range for integers)."""
    bounds = list(args) + [kwargs.pop(k) for k in ("from", "to") if k in kwargs]
    if kwargs:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if len(bounds) > 2:
        raise TypeError(f"random_() takes at most 2 bounds (from, to), got {len(bounds)}")
    dt = input.dtype
    if len(bounds) == 2:
        low, high = bounds
        if high is None:
            high = _top(dt)
    elif len(bounds) == 1:
        low, high = 0, bounds[0]
    else:
        low, high = 0, _top(dt)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    draw = randint(int(low), int(high), tuple(input.shape), generator=generator, device=input._backend.name)
    return _fill_from(input, draw.to(dt), "random_")


def _top(dt):
    """One past the largest value ``random_()`` draws for ``dt``."""
    if dt is bool_:
        return 2
    if dt.is_floating_point:
        return 2 ** _FLOAT_DIGITS.get(dt.name, 24) + 1
    bits = 8 * dt.itemsize
    top = 2 ** (bits - 1) - 1 if dt.is_signed else 2 ** bits - 1
    return min(top, 2 ** 63 - 2) + 1  # randint's exclusive bound must fit int64


def _float_fill(input, name):
    if not input.dtype.is_floating_point:
        kind = {"exponential_": "Exponential", "cauchy_": "Cauchy", "log_normal_": "LogNormal"}[name]
        # torch names the dtype as its C++ type for cauchy_ and by its short name for the others
        word = _C_TYPE.get(input.dtype.name, input.dtype.name) if kind == "Cauchy" else _word(input.dtype)
        raise RuntimeError(f"{kind} distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {word}")


_C_TYPE = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
           "bool": "bool"}


@public("Tensor")
def exponential_(input, lambd=1.0, *, generator=None):
    """Fill with exponential draws of rate ``lambd``."""
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    _float_fill(input, "exponential_")
    u = _uniform_like(input, generator, float64)
    return _fill_from(input, (-ew.log1p(-u) / lambd).to(input.dtype), "exponential_")


@public("Tensor")
def geometric_(input, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    u = _uniform_like(input, generator, float64)
    draw = ew.ceil(ew.log1p(-u) / math.log1p(-p)).clamp(min=1)
    return _fill_from(input, draw.to(input.dtype), "geometric_")


@public("Tensor")
def cauchy_(input, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy draws of location ``median`` and scale ``sigma``."""
    _float_fill(input, "cauchy_")
    u = _uniform_like(input, generator, float64)
    return _fill_from(input, (median + sigma * ew.tan(math.pi * (u - 0.5))).to(input.dtype), "cauchy_")


@public("Tensor")
def log_normal_(input, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std**2)) draws."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    _float_fill(input, "log_normal_")
    eps = _random("normal", tuple(input.shape), generator, float64, input._backend.name, False, 0.0, 1.0)
    return _fill_from(input, ew.exp(eps * std + mean).to(input.dtype), "log_normal_")


# -- dropout's functional forms at the top level (torch.dropout(input, p, train)) -----------------

_SELU_ALPHA = 1.7580993408473766  # -scale * alpha of SELU: where alpha dropout sends dropped units


def _check_dropout(input, p):
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"dropout(): expected a floating point input, got {input.dtype.name}")


def _noise_dropout(input, p, train, alpha, feature, generator=None):
    """torch's _dropout_impl: a keep mask (whole channels with ``feature``), scaled to keep the
    mean (and, with ``alpha``, SELU's mean and variance)."""
    _check_dropout(input, p)
    if not train or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input * 0.0
    shape = tuple(input.shape)
    if feature:
        if input.ndim < 2:
            raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, got {input.ndim}")
        shape = shape[:2] + (1,) * (input.ndim - 2)
    u = _random("uniform", shape, generator, input.dtype, input._backend.name, False, 0.0, 1.0)
    keep = (u >= p).to(input.dtype)
    if not alpha:
        return input * (keep / (1 - p))
    a = 1.0 / math.sqrt((_SELU_ALPHA ** 2 * p + 1) * (1 - p))
    b = (keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    return input * (keep * a) + b


@public("plugtorch")
def dropout(input, p, train):
    """Elements zeroed with probability ``p`` while ``train``, the rest scaled by 1 / (1 - p)."""
    return _noise_dropout(input, p, train, False, False)


@public("plugtorch")
def feature_dropout(input, p, train):
    """Whole channels (dim 1) zeroed with probability ``p`` while ``train``, the rest scaled."""
    return _noise_dropout(input, p, train, False, True)


@public("plugtorch")
def alpha_dropout(input, p, train):
    """Dropout for SELU networks: dropped elements set to SELU's negative saturation, and an
    affine map that keeps the mean and variance."""
    return _noise_dropout(input, p, train, True, False)


@public("plugtorch")
def feature_alpha_dropout(input, p, train):
    """Alpha dropout of whole channels (dim 1)."""
    return _noise_dropout(input, p, train, True, True)


def _functional(fn_alpha, fn_feature):
    def f(input, p=0.5, training=False, inplace=False):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        out = _noise_dropout(input, p, training, fn_alpha, fn_feature)
        return input.copy_(out) if inplace and out is not input else out
    return f


public("nn.functional", name="alpha_dropout")(_functional(True, False))
public("nn.functional", name="feature_alpha_dropout")(_functional(True, True))
