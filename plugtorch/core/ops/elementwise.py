"""Elementwise ops on backend primitives, with their derivative rules.

Each rule is ``rule(ctx, grad) -> input grads`` written with plugtorch ops, so it is
itself differentiable (higher-order gradients) and backend-independent.
Broadcasting is undone by the engine (it sums a gradient down to its input's shape).
"""
from __future__ import annotations

import builtins

from ..dispatch import call_op, record, wrap
from ..dtypes import _FLOAT, _INT, get_default_dtype, int64, promote_types, result_type
from ..errors import BackendMismatchError
from ..grad_mode import _state as _grad
from ..registry import OpDef
from ..tensor import Tensor
from ._composite import composite
from .creation import zeros_like

_NUMBER = (builtins.int, builtins.float, builtins.bool)
OPS: list[OpDef] = []


def _scalar_category(s) -> int:
    if type(s) is builtins.bool:
        return 0
    if type(s) is builtins.int:
        return _INT
    if type(s) is builtins.float:
        return _FLOAT
    raise TypeError(f"expected a Tensor or a Python number, got {type(s).__name__}")


def _float(x: Tensor) -> Tensor:
    return x if x.dtype.is_floating_point else x.to(get_default_dtype())


# -- unary ------------------------------------------------------------------------

def _unary(name, rule, save=None, floating=True, doc="", int_identity=False):
    def op(x):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
        if not x.dtype.is_floating_point:
            if floating:
                x = x.to(get_default_dtype())
            elif int_identity:
                return x.clone()  # integers are already whole: torch returns them unchanged
        b = x._backend
        out = wrap(b.kernels[name](x._data), b)
        if rule is not None and x.requires_grad and _grad.enabled:
            record(out, name, rule, (x,), saved=(x,) if save == "input" else None,
                   save_output=save == "output")
        return out
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc or f"Elementwise {name}."
    OPS.append(OpDef(name, derivative=rule, save=(save + "s",) if save else (), doc=op.__doc__))
    return op


_TWO_OVER_SQRT_PI = 1.1283791670955126


def _zero_grad(ctx, g):
    return zeros_like(g)


neg = _unary("neg", lambda ctx, g: -g, floating=False)
exp = _unary("exp", lambda ctx, g: g * ctx.output, "output")
log = _unary("log", lambda ctx, g: g / ctx.saved[0], "input")
log1p = _unary("log1p", lambda ctx, g: g / (ctx.saved[0] + 1), "input")
expm1 = _unary("expm1", lambda ctx, g: g * (ctx.output + 1), "output")
sqrt = _unary("sqrt", lambda ctx, g: g / (ctx.output * 2), "output")
abs = _unary("abs", lambda ctx, g: g * sign(ctx.saved[0]), "input", floating=False)
sign = _unary("sign", _zero_grad, floating=False)
sin = _unary("sin", lambda ctx, g: g * cos(ctx.saved[0]), "input")
cos = _unary("cos", lambda ctx, g: -(g * sin(ctx.saved[0])), "input")
tanh = _unary("tanh", lambda ctx, g: g - g * ctx.output * ctx.output, "output")
floor = _unary("floor", _zero_grad, floating=False, int_identity=True)
ceil = _unary("ceil", _zero_grad, floating=False, int_identity=True)
round = _unary("round", _zero_grad, floating=False, int_identity=True)
erf = _unary("erf", lambda ctx, g: g * (_TWO_OVER_SQRT_PI * exp(-(ctx.saved[0] * ctx.saved[0]))),
             "input")
isnan = _unary("isnan", None, floating=False)
isinf = _unary("isinf", None, floating=False)
logical_not = _unary("logical_not", None, floating=False)


def _isfinite(x):
    return logical_not(logical_or(isnan(x), isinf(x)))


def _reciprocal(x):
    return _rdiv(_float(x), 1)


def _rsqrt(x):
    return _reciprocal(sqrt(x))


def _square(x):
    return mul(x, x)


_ISFINITE = composite(OPS, "isfinite", _isfinite, "True where x is neither nan nor +-inf.")
_RECIPROCAL = composite(OPS, "reciprocal", _reciprocal, "1 / x (integers promote to float).")
_RSQRT = composite(OPS, "rsqrt", _rsqrt, "1 / sqrt(x).")
_SQUARE = composite(OPS, "square", _square, "x * x.")


def isfinite(x):
    return call_op(_ISFINITE, (x,), {})


def reciprocal(x):
    return call_op(_RECIPROCAL, (x,), {})


def rsqrt(x):
    return call_op(_RSQRT, (x,), {})


def square(x):
    return call_op(_SQUARE, (x,), {})


# -- binary -----------------------------------------------------------------------

def _promote_pair(name, a, b):
    """Cast two tensors to torch's common dtype (differentiably), or fail on mixed backends."""
    if b._backend is not a._backend:
        raise BackendMismatchError(name, a._backend.name, b._backend.name)
    if a.dtype is not b.dtype:
        dt = result_type(a, b)
        if a.dtype is not dt:
            a = a.to(dt)
        if b.dtype is not dt:
            b = b.to(dt)
    return a, b


def _promote_scalar(a, s):
    cat = _scalar_category(s)
    if cat > a.dtype.category:
        a = a.to(get_default_dtype() if cat == _FLOAT else promote_types(a.dtype, int64))
    return a


def _binary(name, rule, rule_scalar, save=False, floating=False, differentiable=True):
    def op(a, b):
        if not isinstance(a, Tensor):
            if isinstance(b, Tensor):
                return op(b._full_like_scalar(a), b)
            raise TypeError(f"{name}(): expected at least one Tensor argument")
        if isinstance(b, Tensor):
            if a.dtype is not b.dtype or b._backend is not a._backend:
                a, b = _promote_pair(name, a, b)
            if floating and not a.dtype.is_floating_point:
                a, b = a.to(get_default_dtype()), b.to(get_default_dtype())
            bk = a._backend
            try:
                out = wrap(bk.kernels[name](a._data, b._data), bk)
            except ValueError as e:
                raise _broadcast_error(a.shape, b.shape, name, e) from None
            if differentiable and _grad.enabled and (a.requires_grad or b.requires_grad):
                record(out, name, rule, (a, b), saved=(a, b) if save else None)
            return out
        if type(b) not in _NUMBER:
            if hasattr(b, "__array__") or isinstance(b, (list, tuple)):
                return op(a, a._tensor_like(b))
            raise TypeError(f"{name}(): unsupported operand type {type(b).__name__} "
                            "(expected a Tensor or a Python number)")
        if differentiable and rule_scalar is None:
            return op(a, a._full_like_scalar(b))
        if a.dtype.category < 2 and (floating or _scalar_category(b) > a.dtype.category):
            a = a.to(get_default_dtype()) if floating else _promote_scalar(a, b)
        bk = a._backend
        try:
            out = wrap(bk.kernels[name](a._data, b), bk)
        except ValueError as e:
            raise RuntimeError(f"{name}(): {e} (a tensor of shape {list(a.shape)} and dtype "
                               f"{a.dtype.name} with the number {b!r})") from None
        if differentiable and _grad.enabled and a.requires_grad:
            record(out, name, rule_scalar, (a,), saved=(a,) if save else None, attrs=b)
        return out
    op.__name__ = op.__qualname__ = name
    OPS.append(OpDef(name, derivative=rule if differentiable else None,
                     save=("inputs",) if save else (), doc=f"Elementwise {name} with broadcasting."))
    return op


add = _binary("add", lambda ctx, g: (g, g), lambda ctx, g: g)
sub = _binary("sub", lambda ctx, g: (g, -g), lambda ctx, g: g)


def _mul_rule(ctx, g):
    a, b = ctx.saved
    return (g * b if ctx.next[0] is not None else None,
            g * a if ctx.next[1] is not None else None)


mul = _binary("mul", _mul_rule, lambda ctx, g: g * ctx.attrs, save=True)


def _div_rule(ctx, g):
    a, b = ctx.saved
    ga = g / b if ctx.next[0] is not None else None
    gb = -g * a / (b * b) if ctx.next[1] is not None else None
    return ga, gb


div = _binary("div", _div_rule, lambda ctx, g: g / ctx.attrs, save=True, floating=True)


def _pow_rule(ctx, g):
    a, b = ctx.saved
    ga = g * b * pow(a, b - 1) if ctx.next[0] is not None else None
    gb = None
    if ctx.next[1] is not None:
        # d/db a**b = a**b * log(a); torch defines it as 0 where a == 0 and b >= 0.
        safe = where(logical_and(eq(a, 0), ge(b, 0)), 0.0, log(a))
        gb = g * pow(a, b) * safe
    return ga, gb


def _pow_scalar_rule(ctx, g):
    s = ctx.attrs
    if s == 0:
        return zeros_like(g)
    return g * s * pow(ctx.saved[0], s - 1)


pow = _binary("pow", _pow_rule, _pow_scalar_rule, save=True)


def _max_min_rule(pick):
    def rule(ctx, g):
        a, b = ctx.saved
        # Ties split the gradient evenly, as torch does.
        wa = pick(a, b).to(g.dtype) + eq(a, b).to(g.dtype) * 0.5
        return g * wa, g * (1 - wa)
    return rule


maximum = _binary("maximum", _max_min_rule(lambda a, b: gt(a, b)), None, save=True)
minimum = _binary("minimum", _max_min_rule(lambda a, b: lt(a, b)), None, save=True)


def _remainder_rule(ctx, g):
    a, b = ctx.saved
    return g, -g * floor_divide(a, b)


remainder = _binary("remainder", _remainder_rule, lambda ctx, g: g, save=True)
# torch gives floor_divide a zero gradient (it stays in the graph) rather than none
floor_divide = _binary("floor_divide", lambda ctx, g: (zeros_like(g), zeros_like(g)),
                       lambda ctx, g: zeros_like(g))
eq = _binary("eq", None, None, differentiable=False)
ne = _binary("ne", None, None, differentiable=False)
lt = _binary("lt", None, None, differentiable=False)
le = _binary("le", None, None, differentiable=False)
gt = _binary("gt", None, None, differentiable=False)
ge = _binary("ge", None, None, differentiable=False)
logical_and = _binary("logical_and", None, None, differentiable=False)
logical_or = _binary("logical_or", None, None, differentiable=False)


def _broadcast_error(sa, sb, op, cause):
    """torch's message for shapes that do not broadcast, naming the first clashing dim.

    A kernel error on shapes that do broadcast (NumPy refusing int ** negative int) keeps
    the backend's message, as a RuntimeError naming the op.
    """
    n = builtins.max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    for d in range(n - 1, -1, -1):
        if pa[d] != pb[d] and 1 not in (pa[d], pb[d]):
            return RuntimeError(
                f"The size of tensor a ({pa[d]}) must match the size of tensor b ({pb[d]}) at "
                f"non-singleton dimension {d} (shapes {list(sa)} and {list(sb)} do not broadcast)")
    return RuntimeError(f"{op}(): {cause} (shapes {list(sa)} and {list(sb)})")


def _rsub(x, s):
    return x._full_like_scalar(s) - x


def _rdiv(x, s):
    return div(x._full_like_scalar(s), x)


def _rpow(x, s):
    return pow(x._full_like_scalar(s), x)


# -- where ------------------------------------------------------------------------

def _where_rule(ctx, g):
    cond = ctx.attrs
    ga = where(cond, g, 0.0) if ctx.next[0] is not None else None
    gb = where(cond, 0.0, g) if len(ctx.next) > 1 and ctx.next[1] is not None else None
    return (ga, gb) if len(ctx.next) > 1 else ga


def where(condition, input=None, other=None):
    """``input`` where ``condition`` holds, else ``other`` (either may be a Python number).

    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.
    """
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be a Tensor")
    if input is None and other is None:
        from .index import nonzero
        return nonzero(condition, as_tuple=True)
    if condition.dtype.name != "bool":
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{condition.dtype.name}. Compare it first, e.g. where(cond != 0, ...)."
        )
    ta, tb = isinstance(input, Tensor), isinstance(other, Tensor)
    if not (ta or tb):
        raise TypeError("where(): expected at least one of input and other to be a Tensor")
    bk = condition._backend
    for t in (input, other):
        if isinstance(t, Tensor) and t._backend is not bk:
            raise BackendMismatchError("where", bk.name, t._backend.name)
    dt = result_type(*(v for v in (input, other)))
    if ta and input.dtype is not dt:
        input = input.to(dt)
    if tb and other.dtype is not dt:
        other = other.to(dt)
    tensors = tuple(t for t in (input, other) if isinstance(t, Tensor))
    da = input._data if ta else input
    db = other._data if tb else other
    try:
        out = wrap(bk.kernels["where"](condition._data, da, db), bk)
    except ValueError:
        from .shape import broadcast_shapes
        broadcast_shapes(*(t.shape for t in (condition, input, other) if isinstance(t, Tensor)))
        raise
    if len(tensors) and _grad.enabled and any(t.requires_grad for t in tensors):
        if ta and tb:
            record(out, "where", _where_rule, (input, other), attrs=condition)
        elif ta:
            record(out, "where", _where_rule, (input,), attrs=condition)
        else:
            record(out, "where", lambda ctx, g: where(ctx.attrs, 0.0, g), (other,), attrs=condition)
    return out


OPS.append(OpDef("where", derivative=_where_rule, doc="Select from two tensors by a bool condition."))


def _clamp(input, min=None, max=None):
    out = input
    if min is not None:
        out = where(lt(out, min), min, out)
    if max is not None:
        out = where(gt(out, max), max, out)
    return out


_CLAMP = composite(OPS, "clamp", _clamp,
                   "Clamp to [min, max] (numbers or tensors); the gradient passes where "
                   "min <= input <= max; min > max gives max, as in torch.")


def clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if not isinstance(input, Tensor):
        raise TypeError(f"clamp(): argument 'input' must be Tensor, not {type(input).__name__}")
    return call_op(_CLAMP, (input,), {"min": min, "max": max})


clip = clamp


def clamp_min(input, min):
    return clamp(input, min=min)


def clamp_max(input, max):
    return clamp(input, max=max)
