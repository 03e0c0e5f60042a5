"""Tensor methods and operators, bound to the op functions in ``core.ops``.

Kept apart from ``tensor.py`` so the class there reads as what a tensor is, and
this file as the (long, flat) list of what it can do.
"""
from __future__ import annotations

from .ops import activation, creation, elementwise as ew, index, inplace, linalg, reduce, shape
from .ops import movement, pointwise, scatter, sorting, statistics
from .dispatch import wrap
from .dtypes import result_type
from .tensor import Tensor


def _binop(fn):
    def method(self, other):
        return fn(self, other)
    return method


def _rbinop(fn):
    def method(self, other):
        return fn(other, self)
    return method


T = Tensor
# The op functions take (self, other) already; binding them directly saves a frame per op.
T.__add__ = T.__radd__ = ew.add
T.__sub__ = ew.sub
T.__rsub__ = lambda self, other: ew._rsub(self, other)
T.__mul__ = T.__rmul__ = ew.mul
T.__truediv__ = ew.div
T.__rtruediv__ = lambda self, other: ew._rdiv(self, other)
T.__floordiv__ = _binop(ew.floor_divide)
T.__rfloordiv__ = lambda self, other: ew.floor_divide(self._full_like_scalar(other), self)
T.__mod__ = _binop(ew.remainder)
T.__pow__ = ew.pow
T.__rpow__ = lambda self, other: ew._rpow(self, other)
T.__matmul__ = linalg.matmul
T.__rmatmul__ = _rbinop(linalg.matmul)
T.__neg__ = ew.neg
T.__pos__ = lambda self: self
T.__abs__ = ew.abs
T.__invert__ = ew.logical_not
T.__and__ = _binop(ew.logical_and)
T.__or__ = _binop(ew.logical_or)
T.__eq__ = ew.eq
T.__ne__ = ew.ne
T.__lt__ = ew.lt
T.__le__ = ew.le
T.__gt__ = ew.gt
T.__ge__ = ew.ge
T.__getitem__ = index.getitem

for _name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "floor_divide",
              "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
              "neg", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "abs", "sign", "sin", "cos",
              "tanh", "floor", "ceil", "round", "isnan", "isinf", "isfinite", "logical_not",
              "reciprocal", "square", "clamp", "clip"):
    setattr(T, _name, getattr(ew, _name))
T.multiply, T.divide, T.subtract, T.negative, T.true_divide = ew.mul, ew.div, ew.sub, ew.neg, ew.div
T.greater, T.less, T.greater_equal, T.less_equal, T.not_equal = ew.gt, ew.lt, ew.ge, ew.le, ew.ne
T.where = lambda self, condition, other: ew.where(condition, self, other)
T.relu, T.sigmoid = activation.relu, activation.sigmoid
T.softmax, T.log_softmax = activation.softmax, activation.log_softmax

for _name in ("sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "logsumexp"):
    setattr(T, _name, getattr(reduce, _name))

for _name in ("reshape", "view", "permute", "transpose", "swapaxes", "swapdims", "squeeze",
              "unsqueeze", "flatten", "unflatten", "expand", "expand_as", "broadcast_to", "to",
              "clone", "contiguous", "t"):
    setattr(T, _name, getattr(shape, _name))
T.view_as = lambda self, other: shape.reshape(self, other.shape)
T.reshape_as = T.view_as
T.T = property(lambda self: shape.permute(self, tuple(range(self.ndim - 1, -1, -1))))
T.mT = property(lambda self: shape.transpose(self, -2, -1))
T.matmul, T.mm, T.bmm = linalg.matmul, linalg.mm, linalg.bmm
T.gather, T.scatter_add = index.gather, index.scatter_add
T.index_select, T.masked_fill, T.erf = index.index_select, index.masked_fill, ew.erf
T.masked_fill_ = inplace.inplace(index.masked_fill, "masked_fill_")
for _name in ("masked_select", "argwhere", "nonzero", "count_nonzero", "take_along_dim"):
    setattr(T, _name, getattr(index, _name))
T.clamp_min, T.clamp_max = ew.clamp_min, ew.clamp_max
for _name in ("sort", "argsort", "topk", "kthvalue", "median"):
    setattr(T, _name, getattr(sorting, _name))
T.scatter, T.index_add = scatter.scatter, scatter.index_add
T.scatter_ = inplace.inplace(scatter.scatter, "scatter_")
T.index_add_ = inplace.inplace(scatter.index_add, "index_add_")
T.clamp_min_ = inplace.inplace(ew.clamp_min, "clamp_min_")
T.clamp_max_ = inplace.inplace(ew.clamp_max, "clamp_max_")
for _name in ("prod", "var", "std", "norm", "cumsum"):
    setattr(T, _name, getattr(statistics, _name))
T.any, T.all = reduce.any, reduce.all
for _name in ("flip", "fliplr", "flipud", "roll", "repeat", "tile", "movedim", "moveaxis", "split",
              "tensor_split", "chunk", "tril", "triu", "unbind", "narrow", "ravel", "repeat_interleave"):
    setattr(T, _name, getattr(movement, _name))
T.outer, T.ger, T.dot = linalg.outer, linalg.outer, linalg.dot
for _name in ("diag", "diagonal", "trace", "addmm"):
    setattr(T, _name, getattr(linalg, _name))
for _name in ("log2", "log10", "exp2", "sinh", "cosh", "trunc", "fix", "frac", "lerp"):
    setattr(T, _name, getattr(pointwise, _name))
T.cpu = lambda self: shape.to(self, "cpu")
T.float = lambda self: shape.cast(self, _dt("float32"))
T.double = lambda self: shape.cast(self, _dt("float64"))
T.long = lambda self: shape.cast(self, _dt("int64"))
T.int = lambda self: shape.cast(self, _dt("int32"))
T.bool = lambda self: shape.cast(self, _dt("bool"))
T.half = lambda self: shape.cast(self, _dt("float16"))
T.type_as = lambda self, other: shape.cast(self, other.dtype)


def _dt(name):
    from .dtypes import dtype_from_name
    return dtype_from_name(name)


def _full_like_scalar(self, value):
    """A 0-d tensor holding a Python number, already in the dtype ``self op value`` will have.

    Used for reversed scalar ops (``1 - x``): creating it in the result dtype keeps the
    op on the same-dtype fast path instead of promoting and casting afterwards.
    """
    b = self._backend
    return wrap(b.kernels["full"]((), value, result_type(self, value)), b)


def _tensor_like(self, data):
    return creation.tensor(data, device=self._backend.name)


T._full_like_scalar = _full_like_scalar
T._tensor_like = _tensor_like
T.new_tensor = lambda self, data, dtype=None: creation.tensor(data, dtype=dtype or self.dtype, device=self._backend.name)
T.new_zeros = lambda self, *size, dtype=None: creation.zeros(*size, dtype=dtype or self.dtype, device=self._backend.name)
T.new_ones = lambda self, *size, dtype=None: creation.ones(*size, dtype=dtype or self.dtype, device=self._backend.name)
T.new_full = lambda self, size, fill_value, dtype=None: creation.full(size, fill_value, dtype=dtype or self.dtype, device=self._backend.name)
T.new_empty = T.new_zeros


# -- alpha forms and in-place variants ------------------------------------------------

def add(input, other, *, alpha=1):
    return ew.add(input, other if alpha == 1 else other * alpha)


def sub(input, other, *, alpha=1):
    return ew.sub(input, other if alpha == 1 else other * alpha)


T.add, T.sub, T.subtract = add, sub, sub
for _name, _fn in (("add_", add), ("sub_", sub), ("mul_", ew.mul), ("div_", ew.div),
                   ("pow_", ew.pow), ("clamp_", ew.clamp), ("clip_", ew.clamp), ("neg_", ew.neg),
                   ("exp_", ew.exp), ("log_", ew.log), ("sqrt_", ew.sqrt), ("abs_", ew.abs),
                   ("tanh_", ew.tanh), ("sigmoid_", activation.sigmoid), ("relu_", activation.relu),
                   ("maximum_", ew.maximum), ("minimum_", ew.minimum), ("floor_", ew.floor),
                   ("ceil_", ew.ceil), ("round_", ew.round), ("sign_", ew.sign),
                   ("reciprocal_", ew.reciprocal), ("square_", ew.square)):
    setattr(T, _name, inplace.inplace(_fn, _name))
T.multiply_, T.divide_, T.subtract_ = T.mul_, T.div_, T.sub_
T.copy_, T.zero_, T.fill_ = inplace.copy_, inplace.zero_, inplace.fill_
T.__setitem__ = inplace.setitem
T.__iadd__, T.__isub__, T.__imul__, T.__itruediv__ = T.add_, T.sub_, T.mul_, T.div_
