"""Tensor methods: bound from the op table, plus Python's operator protocol.

Every ``Tensor.<op>`` (and ``<op>_``) comes from the ops' declarations
(:mod:`plugtorch.core.api`). What is written here is what only a class has: the
operators (``a + b``, ``a @ b``, ``x[i] = v``), properties, and the ``new_*``
constructors.
"""
from __future__ import annotations

from . import api
from .dispatch import wrap
from .dtypes import result_type
from .ops import creation, elementwise as ew, index, inplace, linalg, shape
from .tensor import Tensor

T = Tensor
api.bind_tensor(T)

# Operators bind the two-operand functions directly: no frame for ``alpha``, one call per op.
T.__add__ = T.__radd__ = ew._add
T.__sub__ = ew._sub
T.__rsub__ = ew.rsub
T.__mul__ = T.__rmul__ = ew.mul
T.__truediv__ = ew.div
T.__rtruediv__ = ew.rdiv
T.__floordiv__ = ew.floor_divide
T.__rfloordiv__ = lambda self, other: ew.floor_divide(self._full_like_scalar(other), self)
T.__mod__ = ew.remainder
T.__pow__ = ew.pow
T.__rpow__ = ew.rpow
T.__matmul__ = linalg.matmul
T.__rmatmul__ = lambda self, other: linalg.matmul(other, self)
T.__neg__ = ew.neg
T.__pos__ = lambda self: self
T.__abs__ = ew.abs
T.__invert__ = ew.logical_not
T.__and__ = ew.logical_and
T.__or__ = ew.logical_or
T.__eq__ = ew.eq
T.__ne__ = ew.ne
T.__lt__ = ew.lt
T.__le__ = ew.le
T.__gt__ = ew.gt
T.__ge__ = ew.ge
T.__getitem__ = index.getitem
T.__setitem__ = inplace.setitem
T.__iadd__, T.__isub__, T.__imul__, T.__itruediv__ = T.add_, T.sub_, T.mul_, T.div_
T.T = property(lambda self: shape.permute(self, tuple(range(self.ndim - 1, -1, -1))))
T.mT = property(lambda self: shape.transpose(self, -2, -1))


def _full_like_scalar(self, value):
    """A 0-d tensor holding a Python number, already in the dtype ``self op value`` will have.

    Used for reversed scalar ops (``1 - x``): creating it in the result dtype keeps the
    op on the same-dtype fast path instead of promoting and casting afterwards.
    """
    b = self._backend
    return wrap(b.primitives["full"]((), value, result_type(self, value)), b)


def _tensor_like(self, data):
    return creation.tensor(data, device=self._backend.name)


T._full_like_scalar = _full_like_scalar
T._tensor_like = _tensor_like
