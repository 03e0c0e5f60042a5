"""Integer and floating-point arithmetic torch has beyond the basic elementwise ops: gcd, lcm,
nextafter, frexp.

gcd is a backend primitive (Euclid's loop, written with plugtorch ops, would read back to the
host once per step and take up to 92 steps for int64); lcm is written with it. nextafter and
frexp work on the bits of the float (``Tensor.view(dtype)``, the ``bitcast`` primitive): the
next float is the neighbouring integer of its bit pattern, and the exponent is a field of it.
"""
from __future__ import annotations

from ..dtypes import bfloat16, float16, float32, float64, int16, int32, int64, result_type
from ..optable import op
from ..return_types import return_type
from ..tensor import Tensor
from . import elementwise as ew
from .creation import ones_like

_EVERYWHERE = ("plugtorch", "Tensor")

frexp_result = return_type("frexp", ["mantissa", "exponent"])

_C_WORD = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double", "bool": "Bool",
           "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
           "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def _tensors(name, input, other):
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        raise ew._not_a_tensor(name, input, other)


def _check_integers(name, input, other):
    _tensors(name, input, other)
    dt = result_type(input, other)
    if dt.is_floating_point or dt.is_complex or dt.name == "bool":
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_C_WORD[dt.name]}\': {name} takes '
                                  "integer tensors; convert with .long()")
    return dt


def _gcd_front(fn):
    def front(input, other):
        if (out := ew.proxied(front, (input, other))) is not NotImplemented:
            return out
        _check_integers("gcd", input, other)
        return fn(input, other)
    front.__doc__ = "The elementwise greatest common divisor of two integer tensors (non-negative), with broadcasting."
    return front


_gcd, gcd = ew._binary("gcd", dtypes="integers only", inplace=True, public=_gcd_front)


def _lcm_args(input, other):
    dt = _check_integers("lcm", input, other)
    return (input.to(dt), other.to(dt)), {}


@op(bind=_lcm_args, exposed=_EVERYWHERE, inplace=True, dtypes="integers only")
def lcm(input, other):
    """The elementwise least common multiple of two integer tensors (non-negative; 0 where
    either is 0), with broadcasting."""
    g = _gcd(input, other)
    zero = ew.eq(g, 0)
    return ew.where(zero, 0, ew.abs(ew.floor_divide(input, ew.where(zero, 1, g)) * other))


# -- floating-point bits ---------------------------------------------------------------------

# dtype -> (the integer of its width, mantissa bits, exponent field mask, exponent bias - 1)
_LAYOUT = {float64: (int64, 52, 0x7FF, 1022), float32: (int32, 23, 0xFF, 126),
           float16: (int16, 10, 0x1F, 14), bfloat16: (int16, 7, 0xFF, 126)}


def _nextafter_args(input, other):
    _tensors("nextafter", input, other)
    dt = result_type(input, other)
    if not dt.is_floating_point:
        raise NotImplementedError(f'"nextafter_cpu" not implemented for \'{_C_WORD[dt.name]}\': nextafter '
                                  "takes floating point tensors; convert with .float()")
    return (input.to(dt), other.to(dt)), {}


def _nextafter_rule(ctx, g):
    # torch's: input's gradient passes through except where the operands are equal (the result
    # is then other), other's is 0
    a, b = ctx.saved
    need = ctx.needs_input_grad
    return (ew.where(ew.eq(a, b), 0.0, g) if need[0] else None), (ew.zeros_like(g) if need[1] else None)


@op(bind=_nextafter_args, derivative=_nextafter_rule, save="inputs", exposed=_EVERYWHERE, inplace=True,
    dtypes="floating only; the operands promote")
def nextafter(input, other):
    """The next float after ``input`` towards ``other`` (``other`` where they are equal)."""
    itype = _LAYOUT[input.dtype][0]
    bits = input.view(itype)
    up = ew.gt(other, input)
    # a positive float grows with its bit pattern, a negative one shrinks
    step = ew.where(ew.eq(up, ew.gt(input, 0)), 1, -1).to(itype)
    out = (bits + step).view(input.dtype)
    tiny = ones_like(bits).view(input.dtype)  # the smallest subnormal: bit pattern 1
    out = ew.where(ew.eq(input, 0), ew.where(up, tiny, -tiny), out)
    out = ew.where(ew.eq(input, other), other, out)
    out = ew.where(ew.isnan(other), other, out)
    return ew.where(ew.isnan(input), input, out)


def _frexp_args(input):
    if not isinstance(input, Tensor):
        raise TypeError(f"frexp(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return (input,), {}


@op(bind=_frexp_args, multi_output=True, exposed=_EVERYWHERE,
    dtypes="floating only; exponent int32")
def frexp(input):
    """(mantissa, exponent) with ``input = mantissa * 2 ** exponent`` and 0.5 <= |mantissa| < 1
    (zero, inf and nan: the input and exponent 0); the mantissa's gradient is grad / 2**exponent."""
    itype, mbits, emask, bias = _LAYOUT[input.dtype]
    x = input.detach()
    finite = ew.logical_and(ew.isfinite(x), ew.ne(x, 0))
    # a subnormal is scaled into the normal range first, so its exponent field says where it is
    shift = mbits + 2
    subnormal = ew.logical_and(finite, ew.lt(ew.abs(x), 2.0 ** -bias))
    scaled = x * ew.where(subnormal, float(2 ** shift), 1.0).to(x.dtype)
    field = ew.bitwise_and(ew.bitwise_right_shift(scaled.view(itype), mbits), emask).to(int32)
    exponent = ew.where(finite, field - bias - ew.where(subnormal, shift, 0).to(int32), 0).to(int32)
    # scaling by a power of two is exact; in two factors, so neither overflows (2 ** 1074 would)
    half = ew.floor_divide(-exponent, 2)
    mantissa = input * ew.pow(2.0, half.to(input.dtype)) * ew.pow(2.0, (-exponent - half).to(input.dtype))
    return frexp_result(mantissa, exponent)


__all__ = ["gcd", "lcm", "nextafter", "frexp"]
