"""Dtype casts and moves between backends, each differentiable.

``cast`` and ``move`` are the two ops; ``Tensor.to`` and the ``float()``/``long()``/...
family are their public spellings.
"""
from __future__ import annotations

from ..device import Device, get_backend
from ..dispatch import call_op, record, wrap
from ..dtypes import dtype as _dtype
from ..dtypes import dtype_from_name
from ..grad_mode import _state as _grad
from ..optable import MODES, TABLE, op, public
from ..tensor import Tensor
from ._front import written_out
from ._jvp import linear


def _cast(input, dtype):
    if dtype is input.dtype:
        return input
    b = input._backend
    fn = b.kernels.get("cast")
    if fn is None or MODES.on:
        return call_op("cast", (input,), {"dtype": dtype})
    out = wrap(fn(input._data, dtype=dtype), b)
    if (input.requires_grad and _grad.enabled and (dtype.is_floating_point or dtype.is_complex)
            and TABLE["cast"].rule is not None):
        record(out, TABLE["cast"], (input,), {"dtype": dtype})
    return out


# Every dtype promotion runs cast: its public function is written out, the input-has-it shortcut
# first and the kernel called inline, since a bind's call and call_op's pass over the operands
# would double a 0.7 us cast.
def _cast_rule(ctx, g):
    target = ctx.meta[0][1]
    if g.dtype.is_complex and not target.is_complex:
        from .complex import real  # a real input's gradient is the real part (torch's convention)
        g = real(g)
    return cast(g, target)


@op(primitive="cast", front=written_out(_cast), derivative=_cast_rule,
    doc="Convert to another dtype; the gradient is cast back.", jvp=linear("cast"))
def cast(input, *, dtype):
    """``input`` converted to ``dtype`` (the input itself when it already has it)."""


def _lower_move(backend, x, *, source, target):
    """Through host memory: the source backend's ``to_host``, then the target's ``from_host``."""
    return target.primitives["from_host"](source.primitives["to_host"](x), source.dtype_of(x))


def _move(input, backend):
    src = input._backend
    if backend is src:
        return input
    lower = TABLE["move"].lower  # the table's: a plugin may declare move anew
    assert lower is not None, "move is computed by its lower= function"
    out = wrap(lower(src, input._data, source=src, target=backend), backend)
    if input.requires_grad and _grad.enabled:
        record(out, TABLE["move"], (input,), {"source": src, "target": backend})
    if MODES.on:  # no call_op ran (it wraps results on the operand's backend): modes hear of the copy
        MODES.rebind(out, input)
    return out


# move's public function is written out: its result lives on another backend than its operand,
# which call_op (it wraps a kernel's result on the operands' backend) cannot say.
@op(lower=_lower_move, front=written_out(_move), derivative=lambda ctx, g: move(g, ctx.attrs["source"]),
    no_kernel="joins two backends, so no one backend's kernel can serve it; it is built "
    "from their to_host and from_host primitives",
    doc="Copy to another backend through host memory; the gradient moves back.", jvp=linear("move"))
def move(input, *, source, target):
    """Copy ``input`` to another backend (a ``Backend`` object), through host memory."""


@public("Tensor")
def to(input, *args, dtype=None, device=None, copy=False, non_blocking=False):
    """``x.to(device)``, ``x.to(dtype)``, ``x.to(device, dtype)`` or ``x.to(other_tensor)``."""
    for a in args:
        if isinstance(a, _dtype):
            dtype = a
        elif isinstance(a, (str, Device)):
            device = a
        elif isinstance(a, Tensor):
            device, dtype = a._backend.name, a.dtype
        elif a is not None:
            raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
    out = input
    if device is not None:
        out = move(out, get_backend(device))
    if dtype is not None:
        out = cast(out, dtype)
    if copy and out is input:
        from .shape import clone  # shape builds on this module's cast
        out = clone(input)
    return out


@public("Tensor")
def cpu(input):
    """The tensor on the host backend ("cpu")."""
    return to(input, "cpu")


@public("Tensor")
def cuda(input, device=None, non_blocking=False):
    """The tensor on the backend that answers to "cuda" (the CuPy backend), device ``device``."""
    if isinstance(device, Device):
        device = device.index
    return to(input, "cuda" if device is None else f"cuda:{int(device)}")


def _caster(name):
    target = dtype_from_name(name)

    def method(input):
        return cast(input, target)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``self.to(plugtorch.{target.name})``."
    return method


for _name in ("float", "double", "half", "long", "int", "short", "char", "byte", "bool", "cfloat", "cdouble"):
    public("Tensor")(_caster(_name))
public("Tensor")(_caster("bfloat16"))  # torch has no short name for it

# torch's legacy tensor-type names: Tensor.type() answers them, Tensor.type(name) takes them
_TYPE_NAMES = {"Float": "float32", "Double": "float64", "Half": "float16", "Long": "int64",
               "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
               "ComplexFloat": "complex64", "ComplexDouble": "complex128"}
_TYPE_NAMES["BFloat16"] = "bfloat16"
_TYPE_OF = {v: k for k, v in _TYPE_NAMES.items()}


@public("Tensor", name="type")
def type_(input, dtype=None, non_blocking=False, **kwargs):
    """No argument: the type name (``'plugtorch.FloatTensor'``); a dtype or a type name
    (``'torch.DoubleTensor'``, ``'plugtorch.IntTensor'``): the tensor cast to it."""
    if dtype is None:
        where = "plugtorch.cuda." if input.is_cuda else "plugtorch."  # torch: 'torch.cuda.FloatTensor'
        return f"{where}{_TYPE_OF[input.dtype.name]}Tensor"
    legacy = getattr(dtype, "dtype", None) if isinstance(dtype, type) else None
    if isinstance(legacy, _dtype):
        dtype = legacy  # a legacy type: x.type(plugtorch.DoubleTensor)
    elif isinstance(dtype, str):
        name = dtype.rsplit(".", 1)[-1]
        kind = name[:-len("Tensor")] if name.endswith("Tensor") else None
        if kind not in _TYPE_NAMES:
            raise ValueError(f"invalid type: {dtype!r}; expected a dtype or one of "
                             f"{', '.join('plugtorch.' + k + 'Tensor' for k in _TYPE_NAMES)}")
        dtype = dtype_from_name(_TYPE_NAMES[kind])
    if not isinstance(dtype, _dtype):
        raise TypeError(f"type(): expected a dtype or a type name, got {dtype!r}")
    return cast(input, dtype)


@public("Tensor")
def type_as(input, other):
    """``input`` cast to ``other``'s dtype."""
    return cast(input, other.dtype)
