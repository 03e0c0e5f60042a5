"""The sparse COO tensor: int64 indices ``(sparse_dim, nnz)``, values ``(nnz, *dense_shape)``
and a size, all of it built on dense tensors and the op table's index ops.

It subclasses ``Tensor`` as torch's does (``isinstance(s, Tensor)`` holds, and code such as
``torch.spmm(adj, x)`` takes it where a tensor goes), but it holds no array of its own: its
array slot is a ``_SparseData`` that refuses every use, so a dense op handed a sparse tensor
stops with an error naming the op instead of computing on something that is not its data.
What does work on it is written here (shape, conversions, ``+``, ``@``, ``t``, ...) or in
:mod:`plugtorch.sparse`. Gradients flow through the values, which are an ordinary tensor of
the graph: ``sparse_coo_tensor(i, v)`` with ``v`` requiring grad passes them on to ``v``.
"""
from __future__ import annotations

import math
import sys
from typing import Any

from ..core import printing
from ..core.dtypes import bool_, float32, float64, get_default_dtype, int64, result_type
from ..core.optable import TABLE
from ..core.tensor import Size, Tensor, _wrap_dim


class layout:
    """A tensor's memory layout, as ``torch.layout``: ``plugtorch.strided`` or ``plugtorch.sparse_coo``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"plugtorch.{self.name}"

    def __reduce__(self):
        return self.name


strided = layout("strided")
sparse_coo = layout("sparse_coo")


def _op_name() -> str:
    """The op that reached a sparse tensor's array: the nearest caller frame that knows its op's
    name (dispatch's ``call_op``, the elementwise fronts). Only an error's message reads it."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        name = frame.f_locals.get("name")
        if type(name) is str and name in TABLE:
            return name
        fn = frame.f_code.co_name.lstrip("_")
        if fn in TABLE and frame.f_globals.get("__name__", "").startswith("plugtorch."):
            return fn  # a public function named as its op (view's ``_view``, ...)
        frame = frame.f_back
    return "this dense op"


class _SparseData:
    """What a sparse tensor holds where a dense one holds its array: any use of it is a dense
    op running on a sparse tensor, which is refused with the op's name."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(
            f"{_op_name()} does not support sparse tensors (layout=plugtorch.sparse_coo); "
            "call .to_dense() on the sparse operand first")

    def __getattr__(self, attr):
        self._refuse()

    __array__ = __array_ufunc__ = __array_function__ = __len__ = __iter__ = __getitem__ = _refuse
    __float__ = __int__ = __index__ = __bool__ = __add__ = __radd__ = __mul__ = __rmul__ = _refuse
    __sub__ = __rsub__ = __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __neg__ = _refuse


_NO_DATA = _SparseData()


def _shape_error(op: str, a, b) -> RuntimeError:
    return RuntimeError(f"{op}: expected 'self' and 'other' to have same size, but self has size "
                        f"{list(a.shape)} while other has size {list(b.shape)} (FYI: dense-sparse "
                        "addition does not currently support broadcasting)")


class SparseTensor(Tensor):
    """A sparse COO tensor (``layout=plugtorch.sparse_coo``); make one with
    ``plugtorch.sparse_coo_tensor`` or ``Tensor.to_sparse()``."""

    __slots__ = ("_idx", "_vals", "_shape", "_coal")
    _idx: Tensor
    _vals: Tensor
    _shape: tuple
    _coal: bool

    def __new__(cls, *args, **kwargs):
        raise TypeError("make a sparse tensor with plugtorch.sparse_coo_tensor(indices, values, size) "
                        "or dense.to_sparse()")

    @classmethod
    def _make(cls, indices: Tensor, values: Tensor, size, coalesced: bool) -> SparseTensor:
        s = object.__new__(cls)
        s._idx, s._vals, s._shape, s._coal = indices, values, tuple(size), coalesced
        s._data = _NO_DATA
        s._backend = values._backend
        s.dtype = values.dtype
        s._vc = [0]
        s._accum = None
        s._retains_grad = False
        for slot in Tensor.__slots__:  # any other field a dense tensor has, unset
            if slot != "__weakref__" and not hasattr(s, slot):
                setattr(s, slot, None)
        return s

    # -- autograd state lives in the values -------------------------------------------------
    @property  # type: ignore[override]
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._vals.requires_grad = value

    @property  # type: ignore[override]
    def grad_fn(self):
        return self._vals.grad_fn

    @grad_fn.setter
    def grad_fn(self, value) -> None:
        raise RuntimeError("a sparse tensor's graph is its values': it cannot be given a grad_fn")

    @property  # type: ignore[override]
    def grad(self):
        g = self._vals.grad
        if g is None or self._coal:
            return None if g is None else SparseTensor._make(self._idx, g, self._shape, self._coal)
        # the gradient at each position, which every duplicate entry there received whole
        from ..core.ops.creation import ones
        total = SparseTensor._make(self._idx, g, self._shape, False).coalesce()
        count = SparseTensor._make(self._idx, ones(g.shape[0], dtype=g.dtype, device=g.device),
                                   self._shape[:self.sparse_dim()], False).coalesce()._vals
        return SparseTensor._make(total._idx, total._vals / count.reshape(-1, *[1] * (g.ndim - 1)),
                                  self._shape, True)

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            value = value._vals if isinstance(value, SparseTensor) else value.to_sparse()._vals
        self._vals.grad = value

    def detach(self):
        return SparseTensor._make(self._idx, self._vals.detach(), self._shape, self._coal)

    # -- metadata ---------------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._shape)
        return self._shape[_wrap_dim(dim, len(self._shape), "size")]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    @property
    def is_sparse(self) -> bool:
        return True

    @property
    def layout(self):
        return sparse_coo

    def sparse_dim(self) -> int:
        return self._idx.shape[0]

    def dense_dim(self) -> int:
        return self._vals.ndim - 1

    def _nnz(self) -> int:
        return self._vals.shape[0]

    def is_coalesced(self) -> bool:
        return self._coal

    def _indices(self) -> Tensor:
        return self._idx

    def _values(self) -> Tensor:
        return self._vals

    def indices(self) -> Tensor:
        if not self._coal:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._idx

    def values(self) -> Tensor:
        if not self._coal:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._vals

    # -- conversions ------------------------------------------------------------------------
    def _linear(self) -> Tensor:
        """Each entry's row-major position among the sparse dims."""
        lin = None
        for d, n in enumerate(self._shape[:self.sparse_dim()]):
            lin = self._idx[d] if lin is None else lin * n + self._idx[d]
        assert lin is not None
        return lin

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        from ..core.ops.creation import zeros
        sd = self.sparse_dim()
        vals = self._vals if dtype is None else self._vals.to(dtype)
        flat = zeros((math.prod(self._shape[:sd]), *self._shape[sd:]), dtype=vals.dtype,
                     device=vals.device)
        if self._nnz():
            flat = flat.index_add(0, self._linear(), vals)  # sums duplicates, as torch's does
        return flat.reshape(self._shape)

    def coalesce(self) -> SparseTensor:
        """Indices sorted and unique, duplicates' values summed (a differentiable index_add)."""
        if self._coal:
            return self
        from ..core.ops.creation import zeros
        sd = self.sparse_dim()
        if self._nnz() == 0:
            return SparseTensor._make(self._idx, self._vals, self._shape, True)
        uniq, inverse = self._linear().unique(sorted=True, return_inverse=True)
        vals = zeros((uniq.shape[0], *self._vals.shape[1:]), dtype=self.dtype, device=self.device)
        vals = vals.index_add(0, inverse, self._vals)
        rows = []
        for n in reversed(self._shape[:sd]):  # unravel the linear positions, last dim first
            rows.append(uniq % n)
            uniq = uniq.div(n, rounding_mode="floor")
        from ..core.ops.shape import stack
        return SparseTensor._make(stack(rows[::-1]), vals, self._shape, True)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout not in (None, sparse_coo):
            raise NotImplementedError(f"to_sparse: only layout=plugtorch.sparse_coo is supported, got {layout}")
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim argument "
                               "!=self.sparse_dim() is not supported")
        return self

    to_sparse_coo = to_sparse

    def to(self, *args, **kwargs):
        vals = self._vals.to(*args, **kwargs)
        idx = self._idx.to(vals.device)
        if vals is self._vals and idx is self._idx:
            return self
        return SparseTensor._make(idx, vals, self._shape, self._coal)

    def cpu(self):
        return self.to("cpu")

    def clone(self, *, memory_format=None):
        return SparseTensor._make(self._idx.clone(), self._vals.clone(), self._shape, self._coal)

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def long(self):
        return self.to(int64)

    # -- what torch computes on a sparse COO tensor -----------------------------------------
    def transpose(self, dim0: int, dim1: int) -> SparseTensor:
        sd, n = self.sparse_dim(), self.ndim
        d0, d1 = _wrap_dim(dim0, n, "transpose"), _wrap_dim(dim1, n, "transpose")
        if d0 >= sd or d1 >= sd:
            raise RuntimeError(f"transpose: a sparse tensor's dense dims cannot be transposed "
                               f"(dims {dim0} and {dim1}, sparse_dim={sd}); call .to_dense() first")
        order = list(range(sd))
        order[d0], order[d1] = order[d1], order[d0]
        shape = list(self._shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        return SparseTensor._make(self._idx[order], self._vals, shape, self._coal and d0 == d1)

    def t(self) -> SparseTensor:
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but self is "
                               f"{self.sparse_dim()} sparse and {self.dense_dim()} dense")
        return self.transpose(0, 1) if self.ndim == 2 else self

    def __add__(self, other):
        if isinstance(other, Tensor) and not other.is_sparse:
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        return add(self, other)

    def __radd__(self, other):
        return add(other, self)

    def __sub__(self, other):
        if isinstance(other, Tensor) and not other.is_sparse:
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")  # torch's words
        return add(self, other, alpha=-1)

    def __rsub__(self, other):
        return add(other, self, alpha=-1)

    def __neg__(self):
        return SparseTensor._make(self._idx, -self._vals, self._shape, self._coal)

    def __mul__(self, other):
        if isinstance(other, Tensor) and (other.is_sparse or other.ndim):
            raise NotImplementedError("mul: a sparse tensor multiplies by a number or a 0-d tensor here; "
                                      "call .to_dense() on the sparse operand first")
        return SparseTensor._make(self._idx, self._vals * other, self._shape, self._coal)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, Tensor) and (other.is_sparse or other.ndim):
            raise NotImplementedError("div: a sparse tensor divides by a number or a 0-d tensor here; "
                                      "call .to_dense() on the sparse operand first")
        return SparseTensor._make(self._idx, self._vals / other, self._shape, self._coal)

    def __matmul__(self, other):
        from . import _matmul
        return _matmul(self, other)

    def __rmatmul__(self, other):
        from . import _matmul
        return _matmul(other, self)

    def sum(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
        """``Tensor.sum`` of a sparse tensor: :func:`plugtorch.sparse.sum`."""
        dim = dim if axis is None else axis
        if keepdim or keepdims:
            raise NotImplementedError("sum: keepdim=True of a sparse tensor is not supported here; "
                                      "call .to_dense() first")
        from . import sum as sparse_sum
        return sparse_sum(self, dim, dtype)

    def mm(self, mat2):
        from . import mm
        return mm(self, mat2)

    matmul = __matmul__

    def _no_host(self, *args, **kwargs):
        raise RuntimeError("a sparse tensor has no dense host copy: call .to_dense() first "
                           "(or read .indices() and .values())")

    numpy = tolist = item = __array__ = __bool__ = __float__ = __int__ = __index__ = _no_host  # type: ignore[assignment]

    def __repr__(self) -> str:
        return _sparse_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        return repr(self) if not spec else format(repr(self), spec)

    def __deepcopy__(self, memo):
        return self.clone()


def add(a, b, alpha=1):
    """``a + alpha * b`` where either is sparse: sparse + sparse stays sparse, a dense operand
    makes the sum dense, as in torch."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise NotImplementedError(f"add: a sparse tensor adds only to a tensor of its size, not to "
                                  f"{type(b if isinstance(a, Tensor) else a).__name__}; call .to_dense() first")
    if tuple(a.shape) != tuple(b.shape):
        raise _shape_error("add", a, b)
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        if a.sparse_dim() != b.sparse_dim():
            raise RuntimeError(f"add: expected sparse_dim of both operands to match, got "
                               f"{a.sparse_dim()} and {b.sparse_dim()}")
        from ..core.ops.shape import cat
        dt = result_type(a._vals, b._vals)
        bv = b._vals.to(dt) if alpha == 1 else b._vals.to(dt) * alpha
        s = SparseTensor._make(cat([a._idx, b._idx], 1), cat([a._vals.to(dt), bv]), a.shape, False)
        return s.coalesce() if a._coal and b._coal else s  # torch merges coalesced operands
    da = a.to_dense() if isinstance(a, SparseTensor) else a
    db = b.to_dense() if isinstance(b, SparseTensor) else b
    return da + db if alpha == 1 else da + db * alpha


def _sparse_repr(s: SparseTensor) -> str:
    """torch's layout of a sparse COO tensor's repr, its parts printed as dense tensors."""
    def shown(t: Tensor, indent: int) -> str:
        # the parts print without a dtype: it is said once, after the size
        import numpy as np
        host = np.asarray(t.detach().numpy())
        if host.size == 0:
            return printing._with_suffixes("tensor([]", [f"size={tuple(host.shape)}"], 7 + indent)
        # laid out where it is printed: wrapped and aligned after ``values=tensor(``
        return "tensor(" + printing._body(host, t.dtype.is_floating_point, 7 + indent) + ")"

    text = ("tensor(indices=" + shown(s._idx, 15) + ",\n       values=" + shown(s._vals, 14) + ",\n       "
            + f"size={tuple(s._shape)}, nnz={s._nnz()}")
    suffixes = []
    if s.dtype not in (get_default_dtype(), int64, bool_):
        suffixes.append(f"dtype={s.dtype!r}")
    suffixes.append("layout=plugtorch.sparse_coo")
    if s.grad_fn is not None:
        suffixes.append(f"grad_fn={s.grad_fn!r}")
    elif s.requires_grad:
        suffixes.append("requires_grad=True")
    return printing._with_suffixes(text, suffixes, 7)


# -- the dense side: conversions to and from the sparse layout, as torch's Tensor has them -------
def _dense_to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """The nonzero entries (rows of dims past ``sparse_dim`` with any nonzero) in row-major
    order: a coalesced sparse tensor whose values index ``self``, so gradients flow back."""
    if layout not in (None, sparse_coo):
        raise NotImplementedError(f"to_sparse: only layout=plugtorch.sparse_coo is supported, got {layout}")
    sd = self.ndim if sparse_dim is None else sparse_dim
    if dense_dim is not None:
        sd = self.ndim - dense_dim
    if not 0 < sd <= self.ndim:
        raise RuntimeError(f"to_sparse: sparse_dim must be in [1, {self.ndim}] for a {self.ndim}-D tensor, "
                           f"got {sd}")
    mask = self != 0
    if sd < self.ndim:
        mask = mask.reshape(*self.shape[:sd], -1).any(-1)
    idx = mask.nonzero().t()
    vals = self[tuple(idx[d] for d in range(sd))]
    return SparseTensor._make(idx, vals, self.shape, True)


def _dense_to_sparse_coo(self):
    return _dense_to_sparse(self)


def _dense_only(name: str, layout: str = "sparse coordinate tensor"):
    def refuse(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected {layout} layout but got Strided")
    refuse.__name__ = name
    return refuse


def _attach() -> None:
    for name, fn in {"to_sparse": _dense_to_sparse, "to_sparse_coo": _dense_to_sparse_coo,
                     "to_dense": lambda self, dtype=None, *, masked_grad=None: self if dtype is None
                     else self.to(dtype),
                     "sparse_dim": lambda self: 0, "dense_dim": lambda self: self.ndim,
                     "coalesce": _dense_only("coalesce"), "is_coalesced": _dense_only("is_coalesced"),
                     "indices": _dense_only("indices"), "values": _dense_only("values", "sparse tensor"),
                     "_indices": _dense_only("_indices"), "_values": _dense_only("_values", "sparse tensor"),
                     "_nnz": _dense_only("_nnz")}.items():
        setattr(Tensor, name, fn)

    def dense_layout(self) -> layout:
        return strided
    setattr(Tensor, "layout", property(dense_layout))  # noqa: B010  (a property over the bound name)


_attach()
