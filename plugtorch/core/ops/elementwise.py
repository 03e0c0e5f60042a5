"""Elementwise ops: each maps to one backend primitive and carries its derivative rule.

Every op here is declared with ``op``; the primitive ones through ``_unary`` or ``_binary``,
one line naming the primitive, the rule and the dtype policy, which give ``op`` the fast
public function every unary (binary) op shares. Those functions are the hottest path in
plugtorch, so they inline dispatch (the op's kernel on the operand's backend, recording the
node ``OpDef.rule`` says; else ``call_op``, which also runs an overriding decomposition)
instead of calling through it.

A rule is ``rule(ctx, grad) -> grads`` written with plugtorch ops, so it is itself
differentiable. The second operand of a binary op may be a Python number: it is then
passed to the kernel as is, and ``ctx.saved[1]`` is that number. Broadcasting is undone
by the engine (it sums a gradient down to its operand's shape).
"""
from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from ..complex_policy import REFUSED, refused_error
from ..dispatch import NO_ATTRS, call_op, record, record_one, record_pair, wrap
from ..dtypes import _COMPLEX, _FLOAT, _INT, bool_, get_default_dtype, int64, promote_types, result_type, to_complex
from ..errors import BackendMismatchError
from ..grad_mode import _state as _grad
from ..optable import INTERCEPT, MODES, TABLE, Done, op, public
from ..tensor import Tensor
from ._args import broadcast_shapes
from ._jvp import diagonal
from .conversion import cast
from .creation import ones_like, zeros_like

_NUMBER = (builtins.int, builtins.float, builtins.bool, builtins.complex)
_EVERYWHERE = ("plugtorch", "Tensor")


def _scalar_category(s) -> int:
    if type(s) is builtins.bool:
        return 0
    if type(s) is builtins.int:
        return _INT
    if type(s) is builtins.float:
        return _FLOAT
    if type(s) is builtins.complex:
        return _COMPLEX
    raise TypeError(f"expected a Tensor or a Python number, got {type(s).__name__}")


def as_float(x: Tensor) -> Tensor:
    """``x`` itself if floating or complex, else cast to the default float dtype (torch's rule for
    exp, div...)."""
    return x if x.dtype.category >= _FLOAT else cast(x, get_default_dtype())


# -- unary ------------------------------------------------------------------------

# dtype policies of unary ops (also shown in the catalog)
FLOAT, SAME, INT_UNCHANGED, TO_BOOL = ("integers -> default float", "keeps the dtype",
                                       "integers returned unchanged", "-> bool")


def _unary(name, rule=None, save=(), dtypes=FLOAT, inplace=True, doc="", aliases=(),
           complex_rule=None) -> Callable[..., Any]:
    floating, keep_ints, refuse = dtypes == FLOAT, dtypes == INT_UNCHANGED, name in REFUSED

    def fn(input):
        if not isinstance(input, Tensor):
            if INTERCEPT.on and (out := INTERCEPT.call(fn, (input,), NO_ATTRS)) is not NotImplemented:
                return out  # an fx.Proxy: the call is recorded
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        category = input.dtype.category
        if category != _FLOAT:  # the floating path tests nothing more
            if category == _COMPLEX:
                if refuse:
                    raise refused_error(name, input)
            elif floating:
                input = cast(input, get_default_dtype())
            elif keep_ints:
                return input.clone()  # integers are already whole: torch returns them unchanged
        if MODES.on:
            return call_op(name, (input,))
        b = input._backend
        try:
            kernel = b.kernels[name]
        except KeyError:  # no kernel here: the decomposition (or a clear error), via call_op
            return call_op(name, (input,))
        out = wrap(kernel(input._data), b)
        if input.requires_grad and _grad.enabled:
            d = TABLE[name]
            if d.rule is not None:
                record_one(out, d, input)
        return out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"Elementwise {name}."
    fn.checks_complex = True  # type: ignore[attr-defined]
    # an elementwise op's Jacobian is diagonal: its forward derivative is its rule (_jvp.diagonal)
    return op(name, primitive=name, front=lambda _: fn, derivative=rule, complex_derivative=complex_rule,
              save=save, dtypes=dtypes, exposed=_EVERYWHERE, inplace=inplace, aliases=aliases,
              jvp=None if rule is None else diagonal(complex_rule or rule))(_computed_by_primitive(fn))


def _computed_by_primitive(front):
    """The function ``op`` declares for an elementwise op: the primitive of its name computes it,
    so it carries only the signature and docstring (the fast ``front`` is its public function)."""
    def computes(*operands):
        pass
    computes.__doc__, computes.__module__ = front.__doc__, __name__
    return computes


_TWO_OVER_SQRT_PI = 1.1283791670955126


def _zero_grad(ctx, g):
    return zeros_like(g)


neg = _unary("neg", lambda ctx, g: -g, dtypes=SAME)
# exp's and log's complex rules carry the conjugate; the real ones skip it (OpDef.complex_derivative)
exp = _unary("exp", lambda ctx, g: g * ctx.output, "output", complex_rule=lambda ctx, g: g * _conj(ctx.output))
log = _unary("log", lambda ctx, g: g / ctx.saved[0], "inputs", complex_rule=lambda ctx, g: g / _conj(ctx.saved[0]))
log1p = _unary("log1p", lambda ctx, g: g / (ctx.saved[0] + 1), "inputs")
expm1 = _unary("expm1", lambda ctx, g: g * (ctx.output + 1), "output")
sqrt = _unary("sqrt", lambda ctx, g: g / (ctx.output * 2), "output")
def _abs_rule(ctx, g):
    x = ctx.saved[0]
    if x.dtype.is_complex:  # torch's sgn(z) = z / |z| (0 at 0): sign refuses complex numbers
        a = abs(x)
        return g * where(eq(a, 0), 0.0, x / where(eq(a, 0), 1.0, a))
    return g * sign(x)


def _sin_rule(ctx, g):
    return g * cos(ctx.saved[0])


abs = _unary("abs", _abs_rule, "inputs", dtypes=SAME)
sign = _unary("sign", _zero_grad, dtypes=SAME)
sin = _unary("sin", _sin_rule, "inputs")
cos = _unary("cos", lambda ctx, g: -(g * sin(ctx.saved[0])), "inputs")
# tanh_backward is declared with the activations; the rule finds it in the op table when it runs
tanh = _unary("tanh", lambda ctx, g: call_op("tanh_backward", (g, ctx.output)), "output")
floor = _unary("floor", _zero_grad, dtypes=INT_UNCHANGED)
ceil = _unary("ceil", _zero_grad, dtypes=INT_UNCHANGED)
round = _unary("round", _zero_grad, dtypes=INT_UNCHANGED, doc="Round half to even.")
erf = _unary("erf", lambda ctx, g: g * (_TWO_OVER_SQRT_PI * exp(-(ctx.saved[0] * ctx.saved[0]))),
             "inputs", doc="The error function.")
def _tan_rule(ctx, g):
    return g * (1 + ctx.output * ctx.output)


def _asin_rule(ctx, g):
    x = ctx.saved[0]
    return g * rsqrt(1 - x * x)


def _acos_rule(ctx, g):
    x = ctx.saved[0]
    return -(g * rsqrt(1 - x * x))


def _atan_rule(ctx, g):
    x = ctx.saved[0]
    return g / (1 + x * x)


def _asinh_rule(ctx, g):
    x = ctx.saved[0]
    return g * rsqrt(x * x + 1)


def _acosh_rule(ctx, g):
    x = ctx.saved[0]
    if x.dtype.is_complex:  # torch's branch, 1 / (sqrt(z - 1) sqrt(z + 1)), not that of 1 / sqrt(z^2 - 1)
        return g / (sqrt(x - 1) * sqrt(x + 1))
    return g * rsqrt((x - 1) * (x + 1))


def _atanh_rule(ctx, g):
    x = ctx.saved[0]
    return g / (1 - x * x)


tan = _unary("tan", _tan_rule, "output")
asin = _unary("asin", _asin_rule, "inputs", aliases=("arcsin",))
acos = _unary("acos", _acos_rule, "inputs", aliases=("arccos",))
atan = _unary("atan", _atan_rule, "inputs", aliases=("arctan",))
asinh = _unary("asinh", _asinh_rule, "inputs", aliases=("arcsinh",))
acosh = _unary("acosh", _acosh_rule, "inputs", aliases=("arccosh",))
atanh = _unary("atanh", _atanh_rule, "inputs", aliases=("arctanh",))
isnan = _unary("isnan", dtypes=TO_BOOL, inplace=False)
isinf = _unary("isinf", dtypes=TO_BOOL, inplace=False)
logical_not = _unary("logical_not", dtypes=TO_BOOL, inplace=False)


@op(exposed=_EVERYWHERE)
def isfinite(input):
    """True where x is neither nan nor +-inf."""
    return logical_not(logical_or(isnan(input), isinf(input)))


def _reciprocal_rule(ctx, g):
    return -(g * ctx.output * ctx.output)


def _rsqrt_rule(ctx, g):
    out = ctx.output
    return g * out * out * out * -0.5


def _square_rule(ctx, g):
    return g * ctx.saved[0] * 2


@op(exposed=_EVERYWHERE, inplace=True, derivative=_reciprocal_rule, save="output", jvp=diagonal(_reciprocal_rule))
def reciprocal(input):
    """1 / x (integers promote to float)."""
    return _div(1.0, as_float(input))


@op(exposed=_EVERYWHERE, derivative=_rsqrt_rule, save="output", jvp=diagonal(_rsqrt_rule))
def rsqrt(input):
    """1 / sqrt(x)."""
    return reciprocal(sqrt(input))


@op(exposed=_EVERYWHERE, inplace=True, derivative=_square_rule, save="inputs", jvp=diagonal(_square_rule))
def square(input):
    """x * x."""
    return mul(input, input)


# -- binary -----------------------------------------------------------------------

PROMOTE, TRUE_DIVIDE, COMPARE = ("torch's type promotion", "promoted, then integers -> default float",
                                 "promoted operands, -> bool")


def _promote_pair(name, a, b):
    """Cast two tensors to torch's common dtype (differentiably), or fail on mixed backends."""
    if b._backend is not a._backend:
        raise BackendMismatchError(name, a._backend.name, b._backend.name)
    if a.dtype is not b.dtype:
        dt = result_type(a, b)
        if a.dtype is not dt:
            a = cast(a, dt)
        if b.dtype is not dt:
            b = cast(b, dt)
    return a, b


def _promote_scalar(a, s):
    cat = _scalar_category(s)
    if cat == _COMPLEX and a.dtype.category < _COMPLEX:
        a = cast(a, to_complex(a.dtype if a.dtype.is_floating_point else get_default_dtype()))
    elif cat > a.dtype.category:
        a = cast(a, get_default_dtype() if cat == _FLOAT else promote_types(a.dtype, int64))
    return a


def _binary(name, rule=None, save=(), dtypes=PROMOTE, aliases=(), inplace=False, doc="",
            alpha=None, public=None, primitive=None, complex_rule=None) -> Any:
    """Declare a binary op; returns its function. With ``alpha`` (the operator's symbol), the
    public function also takes torch's ``alpha`` (``other`` is scaled first) and both are
    returned, (two-operand function, public function): operators (``a + b``) bind the first
    and skip that frame. ``public(fn) -> function`` builds a public function of another
    signature around the two-operand one the same way (``div``'s ``rounding_mode``, the
    dtype checks of the bitwise ops), keeping those checks off the other ops' path."""
    floating, refuse = dtypes == TRUE_DIVIDE, name in REFUSED

    def fn(input, other):
        if not isinstance(input, Tensor):
            if isinstance(other, Tensor):
                return fn(other._full_like_scalar(input), other)
            if INTERCEPT.on and (out := INTERCEPT.call(front, (input, other), NO_ATTRS)) is not NotImplemented:
                return out  # an fx.Proxy: the call is recorded
            raise TypeError(f"{name}(): expected at least one Tensor argument")
        if isinstance(other, Tensor):
            if input.dtype is not other.dtype or other._backend is not input._backend:
                input, other = _promote_pair(name, input, other)
            if floating and input.dtype.category < _FLOAT:
                input, other = as_float(input), as_float(other)
            if refuse and input.dtype.is_complex:  # promoted: other's dtype is input's
                raise refused_error(name, input)
            b = input._backend
            if MODES.on:
                return call_op(name, (input, other))
            try:
                kernel = b.kernels[name]
            except KeyError:
                return call_op(name, (input, other))
            try:
                out = wrap(kernel(input._data, other._data), b)
            except ValueError as e:
                raise _broadcast_error(input.shape, other.shape, name, e) from None
            if _grad.enabled and (input.requires_grad or other.requires_grad):
                d = TABLE[name]
                if d.rule is not None:
                    record_pair(out, d, input, other)
            return out
        if type(other) not in _NUMBER:
            if INTERCEPT.on and (out := INTERCEPT.call(front, (input, other), NO_ATTRS)) is not NotImplemented:
                return out
            if hasattr(other, "__array__") or isinstance(other, (list, tuple)):
                return fn(input, input._tensor_like(other))
            raise TypeError(f"{name}(): unsupported operand type {type(other).__name__} "
                            "(expected a Tensor or a Python number)")
        if input.dtype.category < _COMPLEX and (floating or _scalar_category(other) > input.dtype.category):
            input = as_float(input) if floating else _promote_scalar(input, other)
        if refuse and input.dtype.is_complex:
            raise refused_error(name, input)
        b = input._backend
        if MODES.on:
            return call_op(name, (input, other))
        try:
            kernel = b.kernels[name]
        except KeyError:
            return call_op(name, (input, other))
        try:
            out = wrap(kernel(input._data, other), b)
        except ValueError as e:
            raise RuntimeError(f"{name}(): {e} (a tensor of shape {list(input.shape)} and dtype "
                               f"{input.dtype.name} with the number {other!r})") from None
        if input.requires_grad and _grad.enabled:
            d = TABLE[name]
            if d.rule is not None:
                record(out, d, (input, other))
        return out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"Elementwise {name} with broadcasting; ``other`` may be a Python number."
    front = fn
    if alpha:
        def front(input, other, *, alpha=1):
            return fn(input, other if alpha == 1 else other * alpha)
        front.__name__ = front.__qualname__ = name
        front.__doc__ = f"input {alpha} alpha * other, with broadcasting; ``other`` may be a Python number."
    elif public is not None:
        front = public(fn)
        front.__name__ = front.__qualname__ = name
    fn.checks_complex = front.checks_complex = True  # type: ignore[attr-defined]
    op(name, primitive=primitive or name, front=lambda _: front, derivative=rule, complex_derivative=complex_rule,
       save=save, dtypes=dtypes, exposed=_EVERYWHERE, aliases=aliases, inplace=inplace,
       jvp=None if rule is None else diagonal(complex_rule or rule))(_computed_by_primitive(front))
    return (fn, front) if alpha or public else fn


def _add_rule(ctx, g):
    return g, g


def _sub_rule(ctx, g):
    return g, (-g if ctx.needs_input_grad[1] else None)


_add, add = _binary("add", _add_rule, alpha="+", inplace=True)
_sub, sub = _binary("sub", _sub_rule, alpha="-", inplace=True, aliases=("subtract",))


def _conj(v):
    """The conjugate of a complex tensor or number (torch's gradients of a product carry it), else ``v``."""
    if isinstance(v, Tensor):
        if not v.dtype.is_complex:
            return v
        from .complex import conj
        return conj(v)
    return v.conjugate() if type(v) is builtins.complex else v


def _mul_rule(ctx, g):
    """mul's gradient where no operand is complex (a node with one runs _mul_complex_rule)."""
    a, b = ctx.saved
    need = ctx.needs_input_grad
    return (g * b if need[0] else None), (g * a if need[1] else None)


def _mul_complex_rule(ctx, g):
    a, b = ctx.saved
    need = ctx.needs_input_grad
    return (g * _conj(b) if need[0] else None), (g * _conj(a) if need[1] else None)


mul = _binary("mul", _mul_rule, "inputs", aliases=("multiply",), inplace=True, complex_rule=_mul_complex_rule)


def _div_rule(ctx, g):
    """div's gradient where no operand is complex (a node with one runs _div_complex_rule)."""
    a, b = ctx.saved
    need = ctx.needs_input_grad
    # (a / b) / b, as torch's: b * b underflows to 0 for |b| below 1e-154 (1e-19 in float32)
    return (g / b if need[0] else None), (-g * (a / b / b) if need[1] else None)


def _div_complex_rule(ctx, g):
    a, b = ctx.saved
    need = ctx.needs_input_grad
    return (g / _conj(b) if need[0] else None), (-g * _conj(a / b / b) if need[1] else None)


def _div_front(true_div):
    def div(input, other, *, rounding_mode=None):
        """input / other; ``rounding_mode`` "trunc" rounds the quotient toward zero, "floor" down
        (both keep integer dtypes and have a zero gradient)."""
        if rounding_mode is None:
            return true_div(input, other)
        if rounding_mode == "floor":
            return floor_divide(input, other)
        if rounding_mode == "trunc":
            return _trunc_divide(input, other)
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                           f"found {rounding_mode!r}")
    return div


_div, div = _binary("div", _div_rule, "inputs", TRUE_DIVIDE, aliases=("divide",), inplace=True,
                    public=_div_front, complex_rule=_div_complex_rule)


@public("plugtorch", "Tensor", inplace=True)
def true_divide(input, other):
    """input / other, always true division (integers give the default float dtype)."""
    return _div(input, other)


def _trunc_divide(a, b):
    if not isinstance(a, Tensor):
        a = b._full_like_scalar(a)
    if result_type(a, b).is_floating_point:
        from .pointwise import trunc  # pointwise builds on this module
        if not (_grad.enabled and (a.requires_grad or isinstance(b, Tensor) and b.requires_grad)):
            return trunc(_div(a, b))
        # torch's gradient is 0 everywhere; trunc's 0 chained through div's rule would be
        # 0 * inf = nan where b is 0 or a is infinite. The value from the operands detached,
        # the graph through floor_divide, whose gradient is 0, in where's unused branch
        value = trunc(_div(a.detach(), b.detach() if isinstance(b, Tensor) else b))
        return where(ones_like(value, dtype=bool_), value, floor_divide(a, b))
    q = floor_divide(a, b)
    # floor and trunc differ by one where the division is inexact and the signs differ
    signs_differ = ne(lt(a, 0), lt(b, 0)) if isinstance(b, Tensor) else (lt(a, 0) if b > 0 else ge(a, 0))
    return where(logical_and(ne(remainder(a, b), 0), signs_differ), q + 1, q)


def _pow_rule(ctx, g):
    a, b = ctx.saved
    need = ctx.needs_input_grad
    ga = gb = None
    if need[0]:
        if not isinstance(b, Tensor):
            ga = zeros_like(g) if b == 0 else g * (b * pow(a, b - 1))
        else:  # torch: 0 where the exponent is 0 (b * a**(b-1) is 0 * inf at a = 0); the
            # exponent there is replaced first so that no inf is made (nor a nan in double backward)
            zero = eq(b, 0)
            ga = where(zero, 0.0, g * (b * pow(a, where(zero, 1.0, b) - 1)))
    if need[1]:
        # d/db a**b = a**b * log(a); torch defines it as 0 (+0, whatever g's sign) where a == 0
        # and b >= 0. (A complex exponent's real part: complex numbers have no order.) The
        # products grouped as torch's, g * (...): they round alike near the subnormals
        zero = logical_and(eq(a, 0), ge(b.real if b.dtype.is_complex else b, 0))
        gb = where(zero, 0.0, g * (pow(a, b) * where(zero, 0.0, log(a))))
    return ga, gb


pow = _binary("pow", _pow_rule, "inputs", inplace=True)


def _max_min_rule(pick):
    def rule(ctx, g):
        a, b = ctx.saved
        # torch's: ties split the gradient evenly, the operand that loses gets 0, and where either
        # is nan (no comparison holds) both get the gradient
        split = where(eq(a, b), g * 0.5, g)
        return (where(pick(b, a), 0.0, split),
                (where(pick(a, b), 0.0, split) if ctx.needs_input_grad[1] else None))
    return rule


def _greater(a, b):
    return gt(a, b)


def _less(a, b):
    return lt(a, b)


maximum = _binary("maximum", _max_min_rule(_greater), "inputs", inplace=True)
minimum = _binary("minimum", _max_min_rule(_less), "inputs", inplace=True)


def _remainder_rule(ctx, g):
    a, b = ctx.saved
    return g, (-g * floor_divide(a, b) if ctx.needs_input_grad[1] else None)


remainder = _binary("remainder", _remainder_rule, "inputs", inplace=True)
# torch gives floor_divide a zero gradient (it stays in the graph) rather than none
floor_divide = _binary("floor_divide", lambda ctx, g: (zeros_like(g), zeros_like(g)))
eq = _binary("eq", dtypes=COMPARE)
ne = _binary("ne", dtypes=COMPARE, aliases=("not_equal",))
lt = _binary("lt", dtypes=COMPARE, aliases=("less",))
le = _binary("le", dtypes=COMPARE, aliases=("less_equal",))
gt = _binary("gt", dtypes=COMPARE, aliases=("greater",))
ge = _binary("ge", dtypes=COMPARE, aliases=("greater_equal",))


def proxied(front, args):
    """What an fx Proxy among ``args`` makes of a call of ``front`` (its node's Proxy), or
    NotImplemented where there is none: for fronts that check their operands' types themselves."""
    return INTERCEPT.call(front, args, NO_ATTRS) if INTERCEPT.on else NotImplemented


def _tensor_operands(name):
    """torch's logical_and and logical_or take two tensors: a Python number is a TypeError naming
    the argument (the other binary ops' numbers stay accepted); an fx Proxy is recorded as usual."""
    def check(fn):
        def front(input, other):
            if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
                if (out := proxied(front, (input, other))) is not NotImplemented:
                    return out
                raise _not_a_tensor(name, input, other)
            return fn(input, other)
        front.__doc__ = f"Elementwise {name} of two tensors (non-zero is True), with broadcasting; a bool result."
        return front
    return check


def _not_a_tensor(name, input, other):
    position, argument, value = (1, "input", input) if not isinstance(input, Tensor) else (2, "other", other)
    return TypeError(f"{name}(): argument '{argument}' (position {position}) must be Tensor, not "
                     f"{type(value).__name__} (wrap a number with plugtorch.tensor)")


_logical_and, logical_and = _binary("logical_and", dtypes=COMPARE, public=_tensor_operands("logical_and"))
_logical_or, logical_or = _binary("logical_or", dtypes=COMPARE, public=_tensor_operands("logical_or"))


def _atan2_rule(ctx, g):
    a, b = ctx.saved
    need = ctx.needs_input_grad
    r = a * a + b * b
    # 0 where a^2 + b^2 is 0 (at the origin, or underflowed), as torch's
    origin = eq(r, 0)
    inverse = where(origin, 0.0, 1 / where(origin, 1.0, r))
    return (g * b * inverse if need[0] else None), (-(g * a) * inverse if need[1] else None)


def _fmod_rule(ctx, g):
    a, b = ctx.saved
    if not ctx.needs_input_grad[1]:
        return g, None
    from .pointwise import trunc  # pointwise builds on this module
    return g, -g * trunc(_div(a, b))


def _copysign_rule(ctx, g):
    a = ctx.saved[0]
    # d|a|*sign(b)/da: the output's sign over a's sign; 0 at a = 0, as torch's
    return where(eq(a, 0), 0.0, g * _div(ctx.output, a)), (zeros_like(g) if ctx.needs_input_grad[1] else None)


atan2 = _binary("atan2", _atan2_rule, "inputs", TRUE_DIVIDE, aliases=("arctan2",), inplace=True,
                doc="The angle of the point (other, input) in radians, in (-pi, pi].")
fmod = _binary("fmod", _fmod_rule, "inputs", inplace=True,
               doc="C's fmod: the remainder of input / other with the sign of input (remainder "
                   "takes the divisor's).")
copysign = _binary("copysign", _copysign_rule, ("inputs", "output"), TRUE_DIVIDE, inplace=True,
                   doc="|input| with the sign of other (-0.0 counts as negative).")


# -- bitwise ------------------------------------------------------------------------

BITS = "integers and bool only"


def _bits_front(op, symbol, shift=False):
    def check(fn):
        def front(input, other):
            if _floating_operand(input) or _floating_operand(other):
                raise _not_for_floats(op, input, other)
            if shift and _bool_operand(input) and _bool_operand(other):
                raise NotImplementedError(f'"{op}" not implemented for bool tensors: shift integers '
                                          "(convert with .long())")
            return fn(input, other)
        front.__doc__ = (f"``input {symbol} other`` bit by bit on integer tensors (logical on bool); "
                         "``other`` may be a Python int or bool.")
        return front
    return check


def _floating_operand(v):
    return v.dtype.is_floating_point if isinstance(v, Tensor) else type(v) is builtins.float


def _bool_operand(v):
    return v.dtype.name == "bool" if isinstance(v, Tensor) else type(v) is builtins.bool


def _not_for_floats(op, *operands):
    dt = "".join(o.dtype.name for o in operands if isinstance(o, Tensor) and o.dtype.is_floating_point)
    return NotImplementedError(f'"{op}" not implemented for floating point ({dt or "a Python float"}): '
                               "bitwise ops take integer or bool tensors; compare first (x > 0) or "
                               "convert with .long()")


_bitwise_and, bitwise_and = _binary("bitwise_and", dtypes=BITS, inplace=True,
                                    public=_bits_front("bitwise_and", "&"))
_bitwise_or, bitwise_or = _binary("bitwise_or", dtypes=BITS, inplace=True,
                                  public=_bits_front("bitwise_or", "|"))
_bitwise_xor, bitwise_xor = _binary("bitwise_xor", dtypes=BITS, inplace=True,
                                    public=_bits_front("bitwise_xor", "^"))
_left_shift, bitwise_left_shift = _binary("bitwise_left_shift", dtypes=BITS, inplace=True,
                                          primitive="left_shift",
                                          public=_bits_front("bitwise_left_shift", "<<", True))
_right_shift, bitwise_right_shift = _binary("bitwise_right_shift", dtypes=BITS, inplace=True,
                                            primitive="right_shift",
                                            public=_bits_front("bitwise_right_shift", ">>", True))


def _bitwise_not_args(input):
    if not isinstance(input, Tensor):
        raise TypeError(f"bitwise_not(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.dtype.is_floating_point:
        raise _not_for_floats("bitwise_not", input)
    return (input,), NO_ATTRS


@op(primitive="bitwise_not", bind=_bitwise_not_args, dtypes=BITS, exposed=_EVERYWHERE, inplace=True)
def bitwise_not(input):
    """``~input`` bit by bit on an integer tensor (logical not on bool)."""


def invert(input):
    """``~x`` (Python's operator): torch raises TypeError on floating tensors."""
    if input.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return call_op("bitwise_not", (input,))


def _reflected(fn):
    """``number <op> tensor`` for a non-commutative op: the number as a 0-d tensor first."""
    def method(self, other):
        return fn(self._full_like_scalar(other), self)
    method.__name__ = method.__qualname__ = "__r" + fn.__name__ + "__"
    return method


rremainder = _reflected(remainder)
rlshift = _reflected(bitwise_left_shift)
rrshift = _reflected(bitwise_right_shift)


@op(operands=2, exposed=_EVERYWHERE)
def logical_xor(input, other):
    """True where exactly one of input and other is non-zero (bool result)."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        raise _not_a_tensor("logical_xor", input, other)
    return ne(ne(input, 0), ne(other, 0))


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


def _rsub(input, other):
    """``other - input`` for a Python number ``other`` (``1 - x``: ``Tensor.__rsub__``)."""
    return _sub(input._full_like_scalar(other), input)


@public("plugtorch")
def rsub(input, other, *, alpha=1):
    """``other - alpha * input``: torch.rsub, ``sub`` with its operands swapped (``other`` may be a
    Python number)."""
    if alpha != 1:
        input = input * alpha
    return _sub(other, input) if isinstance(other, Tensor) else _rsub(input, other)


def rdiv(input, other):
    return _div(input._full_like_scalar(other), input)


def rpow(input, other):
    return pow(input._full_like_scalar(other), input)


# -- where ------------------------------------------------------------------------

def _where_rule(ctx, g):
    cond = ctx.saved[0]
    need = ctx.needs_input_grad
    return None, (where(cond, g, 0.0) if need[1] else None), (where(cond, 0.0, g) if need[2] else None)


def _where_method(self, condition, other):
    """``self`` where ``condition`` holds, else ``other``."""
    return where(condition, self, other)


def _where_args(condition, input=None, other=None):
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be a Tensor")
    if input is None and other is None:
        from .index import nonzero  # index builds on this module
        return Done(nonzero(condition, as_tuple=True))
    if condition.dtype.name != "bool":
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{condition.dtype.name}. Compare it first, e.g. where(cond != 0, ...)."
        )
    ta, tb = isinstance(input, Tensor), isinstance(other, Tensor)
    dt = result_type(input, other)
    if not (ta or tb):  # two numbers: torch makes the first a tensor of their common dtype
        b = condition._backend
        input, ta = wrap(b.primitives["full"]((), input, dt), b), True
    if ta and input.dtype is not dt:
        input = cast(input, dt)
    if tb and other.dtype is not dt:
        other = cast(other, dt)
    shapes = [t._data.shape for t in (condition, input, other) if isinstance(t, Tensor)]
    if builtins.any(sh != shapes[0] for sh in shapes):
        broadcast_shapes(*shapes)  # torch's error for shapes that do not broadcast
    return (condition, input, other), NO_ATTRS


def _where_jvp(primals, tangents, out, attrs):
    _, ta, tb = tangents
    return where(primals[0], 0.0 if ta is None else ta, 0.0 if tb is None else tb)


@op(primitive="where", bind=_where_args, derivative=_where_rule, save=(0,), exposed=_EVERYWHERE, dtypes=PROMOTE,
    jvp=_where_jvp,
    method=_where_method)
def where(condition, input, other):
    """``input`` where ``condition`` holds, else ``other`` (either may be a Python number).

    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.
    """


def _clamp_rule(ctx, g):
    # torch's (clamp_backward_min_max): the input's gradient passes where min <= x <= max; min's
    # where x < min < max; max's where x > max, and everywhere max < min, where the output is max
    # (and where x < min == max, nobody's). NaN x: nobody's.
    x, lo, hi = ctx.saved
    need = ctx.needs_input_grad
    above_min = ge(x, lo) if lo is not None else None
    below_max = le(x, hi) if hi is not None else None
    inside = (above_min if below_max is None else below_max if above_min is None
              else logical_and(above_min, below_max))
    takes_min = takes_max = None
    if need[1]:
        takes_min = lt(x, lo) if hi is None else logical_and(lt(x, lo), lt(lo, hi))
    if need[2]:
        takes_max = gt(x, hi) if lo is None else logical_or(gt(x, hi), lt(hi, lo))
    return (where(inside, g, 0.0) if need[0] else None,
            where(takes_min, g, 0.0) if need[1] else None,
            where(takes_max, g, 0.0) if need[2] else None)


def _clamp_args(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if not isinstance(input, Tensor):
        raise TypeError(f"clamp(): argument 'input' must be Tensor, not {type(input).__name__}")
    return (input, min, max), NO_ATTRS


@op(bind=_clamp_args, derivative=_clamp_rule, save="inputs", exposed=_EVERYWHERE, aliases=("clip",), inplace=True,
    jvp=diagonal(_clamp_rule))
def clamp(input, min, max):
    """Clamp to [min, max] (numbers or tensors); the gradient passes where min <= input <= max;
    min > max gives max, as in torch."""
    out = input
    if min is not None:
        out = where(lt(out, min), min, out)
    if max is not None:
        out = where(gt(out, max), max, out)
    return out


@public("plugtorch", "Tensor", inplace=True)
def clamp_min(input, min):
    """clamp(input, min=min)."""
    return clamp(input, min=min)


@public("plugtorch", "Tensor", inplace=True)
def clamp_max(input, max):
    """clamp(input, max=max)."""
    return clamp(input, max=max)


__all__ = ["neg", "exp", "log", "log1p", "expm1", "sqrt", "abs", "sign", "sin", "cos", "tanh", "floor",
           "ceil", "round", "erf", "isnan", "isinf", "logical_not", "isfinite", "reciprocal", "rsqrt",
           "square", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder",
           "floor_divide", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "where",
           "clamp", "clamp_min", "clamp_max", "as_float", "rsub", "rdiv", "rpow", "tan", "asin", "acos",
           "atan", "asinh", "acosh", "atanh", "true_divide", "atan2", "fmod", "copysign", "bitwise_and",
           "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "bitwise_not",
           "invert", "rremainder", "rlshift", "rrshift", "logical_xor"]
