"""Complex tensors: their real and imaginary parts, and building them from parts.

Two ops carry the rest, both views of the input's memory: ``view_as_real`` (a complex
``(...)`` tensor as a real ``(..., 2)``) and ``view_as_complex`` (the other way). ``real``,
``imag``, ``conj``, ``angle``, ``complex`` and ``polar`` are written with them and real ops,
so their gradients come from those two rules.

Gradients follow torch's convention ("Autograd for Complex Numbers"): for a real loss L of
``z = x + iy`` the gradient is ``dL/dx + i dL/dy``, so the gradient of ``view_as_real`` is
``view_as_complex`` of the incoming one, and the reverse.
"""
from __future__ import annotations

import math

from ..dtypes import float32, float64, to_complex, to_real
from ..optable import op, public
from ..tensor import Tensor
from . import elementwise as ew
from ._args import broadcast_shapes
from .shape import contiguous, stack, transpose

_EVERYWHERE = ("plugtorch", "Tensor")


def _lower_view_as_real(backend, x):
    # a trailing axis of one element is contiguous whatever x's strides, so the bitcast that
    # doubles it is a view for any layout (0-d included)
    p = backend.primitives
    return p["bitcast"](p["reshape"](x, tuple(x.shape) + (1,)), to_real(backend.dtype_of(x)))


def _view_as_real_args(input):
    if not input.dtype.is_complex:
        raise RuntimeError(f"view_as_real is only supported for complex tensors, but got a tensor of "
                           f"dtype {input.dtype!r}; build one with plugtorch.complex(real, imag)")
    return (input,), {}


def _view_as_real_rule(ctx, g):
    return view_as_complex(contiguous(g))


@op(lower=_lower_view_as_real, bind=_view_as_real_args, view=True, derivative=_view_as_real_rule,
    exposed=("plugtorch",))
def view_as_real(input):
    """A complex tensor of shape ``(...)`` seen as a real one of shape ``(..., 2)`` (real and
    imaginary parts last): a view, writes reach the input."""


def _lower_view_as_complex(backend, x):
    p = backend.primitives
    out = p["bitcast"](x, to_complex(backend.dtype_of(x)))
    return p["reshape"](out, tuple(x.shape[:-1]))


def _view_as_complex_args(input):
    if input.dtype not in (float32, float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but got a "
                           f"tensor of dtype {input.dtype!r}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError(f"Tensor must have a last dimension of size 2 (view_as_complex got shape "
                           f"{list(input.shape)})")
    strides = input.stride()
    if strides[-1] != 1:
        raise RuntimeError(f"Tensor must have a last dimension with stride 1 (view_as_complex got strides "
                           f"{list(strides)}); call .contiguous() first")
    if any(s % 2 for s, n in zip(strides[:-1], input.shape[:-1]) if n > 1):
        raise RuntimeError(f"Tensor must have a stride divisible by 2 for all but last dimension "
                           f"(view_as_complex got strides {list(strides)}); call .contiguous() first")
    return (input,), {}


@op(lower=_lower_view_as_complex, bind=_view_as_complex_args, view=True,
    derivative=lambda ctx, g: view_as_real(g), exposed=("plugtorch",))
def view_as_complex(input):
    """A real tensor of shape ``(..., 2)`` seen as a complex one of shape ``(...)``: a view."""


@public("plugtorch", "Tensor")
def is_complex(input) -> bool:
    """Whether the tensor's dtype is complex (complex64 or complex128)."""
    return input.dtype.is_complex


@public("plugtorch")
def real(input):
    """The real parts of a complex tensor, as a view; a real tensor itself."""
    if not input.dtype.is_complex:
        return input
    return view_as_real(input)[..., 0]


@public("plugtorch")
def imag(input):
    """The imaginary parts of a complex tensor, as a view."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return view_as_real(input)[..., 1]


@public("plugtorch", "Tensor", name="complex")
def complex_(real, imag):
    """The complex tensor ``real + i * imag`` (two float32 or two float64 tensors, broadcast)."""
    for t in (real, imag):
        if not isinstance(t, Tensor):
            raise TypeError(f"complex(): argument must be Tensor, not {type(t).__name__}")
    if real.dtype is not imag.dtype or real.dtype not in (float32, float64):
        raise RuntimeError(f"complex(): expected both inputs to be Float or Double tensors of one dtype "
                           f"but got {real.dtype!r} and {imag.dtype!r}")
    real, imag = (t.broadcast_to(broadcast_shapes(real.shape, imag.shape)) for t in (real, imag))
    return view_as_complex(stack([real, imag], -1))


@public("plugtorch")
def polar(abs, angle):
    """The complex tensor ``abs * (cos(angle) + i * sin(angle))``."""
    return complex_(abs * ew.cos(angle), abs * ew.sin(angle))


@public("plugtorch", "Tensor")
def conj(input):
    """The complex conjugate (a copy here, where torch gives a lazy view); a real tensor itself."""
    if not input.dtype.is_complex:
        return input
    parts = view_as_real(input)
    return complex_(parts[..., 0], -parts[..., 1])


def matrix_transpose(input, what, conjugate=False):
    """The last two dims swapped (and conjugated), as torch's ``mT``/``mH``/``adjoint``: a 0-d
    tensor is its own transpose, a 1-D one is refused with torch's message."""
    if input.ndim == 1:
        raise RuntimeError(f"tensor.{what} is only supported on matrices or batches of matrices. Got 1-D tensor.")
    t = input if input.ndim == 0 else transpose(input, -2, -1)
    return conj(t) if conjugate else t


@public("plugtorch", "Tensor")
def adjoint(input):
    """The conjugate transpose of a matrix or a batch of matrices (the last two dims)."""
    return matrix_transpose(input, "adjoint()", conjugate=True)


@public("plugtorch", "Tensor")
def conj_physical(input):
    """The complex conjugate, as a new tensor; a real tensor itself."""
    return conj(input)


@public("plugtorch", "Tensor")
def resolve_conj(input):
    """``input``: plugtorch's conjugates are never lazy."""
    return input


@public("plugtorch", "Tensor")
def is_conj(input) -> bool:
    """False: plugtorch's conjugates are never lazy."""
    return False


@public("plugtorch", "Tensor")
def angle(input):
    """The argument of each complex element, in (-pi, pi]; for real input pi where it is
    negative, else 0 (nan stays nan), as torch."""
    if input.dtype.is_complex:
        parts = view_as_real(input)
        return ew.atan2(parts[..., 1], parts[..., 0])
    x = ew.as_float(input)
    # torch's gradient is zero everywhere, nan included: the nan is passed on times 0, whose
    # gradient is 0 (x's own would be 1). pi is a number beside a tensor of x's dtype, so
    # float64 gets it to float64's precision
    return ew.where(x < 0, math.pi, ew.where(ew.isnan(x), x, 0.0) * 0.0)
