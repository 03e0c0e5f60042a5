"""Tensor methods: bound from the op table, plus Python's operator protocol.

Every ``Tensor.<op>`` (and ``<op>_``) comes from the ops' declarations
(:mod:`plugtorch.core.api`). What is written here is what only a class has: the
operators (``a + b``, ``a @ b``, ``x[i] = v``), properties, and the ``new_*``
constructors.
"""
from __future__ import annotations

from . import api, printing  # noqa: F401  (printing declares set_printoptions & co.)
from .dispatch import wrap
from .dtypes import result_type
from .ops import complex as complex_ops
from .ops import creation, index, inplace, linalg, shape
from .ops import elementwise as ew
from .tensor import Tensor

T = Tensor
api.bind_tensor(T)

# Operators bind the two-operand functions directly: no frame for ``alpha``, one call per op.
OPERATORS = {
    "__add__": ew._add, "__radd__": ew._add, "__sub__": ew._sub, "__rsub__": ew._rsub,
    "__mul__": ew.mul, "__rmul__": ew.mul, "__truediv__": ew._div, "__rtruediv__": ew.rdiv,
    "__floordiv__": ew.floor_divide,
    "__rfloordiv__": lambda self, other: ew.floor_divide(self._full_like_scalar(other), self),
    "__mod__": ew.remainder, "__rmod__": ew.rremainder, "__pow__": ew.pow, "__rpow__": ew.rpow,
    "__matmul__": linalg.matmul, "__rmatmul__": lambda self, other: linalg.matmul(other, self),
    "__neg__": ew.neg, "__pos__": lambda self: self, "__abs__": ew.abs,
    # & | ^ ~ are bitwise on integers and logical on bool, as torch's
    "__invert__": ew.invert, "__and__": ew.bitwise_and, "__rand__": ew.bitwise_and,
    "__or__": ew.bitwise_or, "__ror__": ew.bitwise_or, "__xor__": ew.bitwise_xor,
    "__rxor__": ew.bitwise_xor, "__lshift__": ew.bitwise_left_shift, "__rlshift__": ew.rlshift,
    "__rshift__": ew.bitwise_right_shift, "__rrshift__": ew.rrshift,
    "__eq__": ew.eq, "__ne__": ew.ne, "__lt__": ew.lt, "__le__": ew.le, "__gt__": ew.gt, "__ge__": ew.ge,
    "__getitem__": index.getitem, "__setitem__": inplace.setitem,
    "__iadd__": T.add_, "__isub__": T.sub_, "__imul__": T.mul_, "__itruediv__": T.div_,
    "__ipow__": T.pow_, "__imod__": T.remainder_, "__iand__": T.bitwise_and_, "__ior__": T.bitwise_or_,
    "__ixor__": T.bitwise_xor_, "__ilshift__": T.bitwise_left_shift_,
    "__irshift__": T.bitwise_right_shift_,
    "T": property(lambda self: shape.permute(self, tuple(range(self.ndim - 1, -1, -1)))),
    "mT": property(lambda self: complex_ops.matrix_transpose(self, "mT")),
    "mH": property(lambda self: complex_ops.matrix_transpose(self, "mH", conjugate=True)),
    "H": property(lambda self: _conjugate_transpose(self)),
    # views of a complex tensor's parts, written through by ``z.real = ...`` as in torch
    "real": property(complex_ops.real, lambda self, value: complex_ops.real(self).copy_(value)),
    "imag": property(complex_ops.imag, lambda self, value: complex_ops.imag(self).copy_(value)),
}


def _conjugate_transpose(self):
    if self.ndim > 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor. For "
                           "batches of matrices, consider using tensor.mH")
    if self.ndim == 1:
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got 1-D tensor.")
    return complex_ops.matrix_transpose(self, "H", conjugate=True)


def _full_like_scalar(self, value):
    """A 0-d tensor holding a Python number, already in the dtype ``self op value`` will have.

    Used for reversed scalar ops (``1 - x``): creating it in the result dtype keeps the
    op on the same-dtype fast path instead of promoting and casting afterwards.
    """
    b = self._backend
    return wrap(b.primitives["full"]((), value, result_type(self, value)), b)


def _tensor_like(self, data):
    return creation.tensor(data, device=self._backend.name)


OPERATORS.update(_full_like_scalar=_full_like_scalar, _tensor_like=_tensor_like)
for _name, _fn in OPERATORS.items():
    setattr(T, _name, _fn)
