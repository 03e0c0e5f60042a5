"""Batched tensors: what a function under ``vmap`` sees, one example at a time.

A :class:`BatchedTensor` is a ``Tensor`` whose ``_data`` is a :class:`Logical` record instead of
an array: the tensor one level down (``inner``, its batch dim first) and the vmap level. Every
metadata query of ``Tensor`` reads ``_data.shape``, so ``shape``, ``size()``, ``dim()``,
``numel()`` and ``len()`` report the per-example (logical) shape without code of their own, and
every op call reaches the vmap level's dispatch mode (``_vmap.VmapLevel``), which computes it on
``inner``. Levels nest: the tensor one level down may be batched at an outer vmap, and its
physical array then holds the outer batch dims first (outermost vmap first).

Reading values on the host (``item()``, ``bool()``, ``tolist()``, ``numpy()``, printing the
values) would see one element or the whole batch, never the example the function is running:
each raises torch's error instead, and ``Logical`` refuses every array attribute it does not
define, so a reader of ``_data`` that slipped through fails loudly rather than silently.
"""
from __future__ import annotations

from typing import Any

from ..core import dispatch
from ..core.tensor import Tensor

__all__ = ["BatchedTensor", "Logical", "wrap", "peel", "level_of", "DATA_DEPENDENT", "ITEM"]

DATA_DEPENDENT = ("vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
                  "flow. We don't support that yet, please shout over at "
                  "https://github.com/pytorch/functorch/issues/257 .")
ITEM = ("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling "
        ".item() on a Tensor, please try to rewrite what you're doing with other operations. If error "
        "is occurring somewhere inside PyTorch internals, please file a bug report.")


class Logical:
    """A batched tensor's ``_data``: its logical shape, and the tensor one level down."""

    __slots__ = ("inner", "level", "shape", "dtype")

    def __init__(self, inner: Tensor, level: int):
        self.inner = inner
        self.level = level
        self.shape = tuple(inner.shape)[1:]
        self.dtype = inner._data.dtype  # the backend's dtype, for code that asks the array

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        # a contiguous layout of the logical shape: code that checks for overlapping memory before
        # writing in place reads it (the write itself goes through __setitem__)
        step, out = self.dtype.itemsize, []
        for s in reversed(self.shape):
            out.append(step)
            step *= max(s, 1)
        return tuple(reversed(out))

    def __setitem__(self, index, value) -> None:
        # an in-place op without a graph writes its result with the backend's setitem primitive
        # (``a[...] = result``): write the result's values one level down, batch dim included
        if index not in ((Ellipsis,), Ellipsis) or not isinstance(value, Logical) or value.level != self.level:
            raise RuntimeError("vmap: an in-place write into a batched tensor must write a whole batched "
                               "result of the same vmap level; write out of place instead")
        from ..core.grad_mode import no_grad
        with no_grad():  # the caller writes without a graph (with one, it rebinds instead)
            self.inner.copy_(value.inner)

    def __array__(self, *args: Any, **kwargs: Any):
        raise RuntimeError(DATA_DEPENDENT)

    def __getattr__(self, name: str):
        raise RuntimeError(f"{DATA_DEPENDENT} (a batched tensor's values were read through '{name}': if it escaped "
                           "its vmapped function, through a closure or a global, return it instead; if an in-place "
                           "op on a tensor vmap does not map was given one it maps, use the out-of-place op, as "
                           "torch requires)")


class BatchedTensor(Tensor):
    """A tensor under ``vmap``: one example's view of a batch (see the module docstring)."""

    __slots__ = ()
    vmap_batched = True  # value checks (core.debug.checks_values) skip it: its values cannot be read

    # -- host reads: never one element of the batch ---------------------------------------
    def item(self):
        raise RuntimeError(ITEM)

    def tolist(self):
        raise RuntimeError(DATA_DEPENDENT)

    def numpy(self, *, force: bool = False):
        raise RuntimeError(DATA_DEPENDENT)

    def __bool__(self):
        raise RuntimeError(DATA_DEPENDENT)

    def __float__(self):
        raise RuntimeError(DATA_DEPENDENT)

    def __int__(self):
        raise RuntimeError(DATA_DEPENDENT)

    def __index__(self):
        raise RuntimeError(DATA_DEPENDENT)

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError(DATA_DEPENDENT)

    def __format__(self, spec):
        if spec:
            raise RuntimeError(DATA_DEPENDENT)
        return repr(self)

    def __reduce_ex__(self, protocol):
        raise RuntimeError("vmap: a batched tensor cannot be pickled or saved; return it from the "
                           "vmapped function instead")

    def __deepcopy__(self, memo):
        raise RuntimeError("vmap: a batched tensor cannot be deep-copied; clone() it instead")

    def __dlpack__(self, *args: Any, **kwargs: Any):
        raise RuntimeError(DATA_DEPENDENT)

    def __repr__(self) -> str:
        lg = self._data
        return f"BatchedTensor(lvl={lg.level}, bdim=0, value=\n{lg.inner!r}\n)"

    __str__ = __repr__

    # -- what Tensor answers from the array itself --------------------------------------
    @property
    def device(self):
        return self._data.inner.device

    def detach(self):
        lg = self._data
        return wrap(lg.inner.detach(), lg.level)

    def __setitem__(self, index, value) -> None:
        # written one level down, the batch dim kept whole: x[i] = v of every example at once
        lg = self._data
        items = index if isinstance(index, tuple) else (index,)
        if any(type(i) is BatchedTensor and i._data.level == lg.level for i in items):
            raise RuntimeError("vmap: an assignment indexed by a tensor that differs per example is not supported; "
                               "use where(), scatter() or index_put() instead")
        if type(value) is BatchedTensor and value._data.level == lg.level:
            rank = self[index].dim()  # the example's rank of the written part
            inner_value = value._data.inner
            missing = rank - (inner_value.dim() - 1)
            if missing > 0:
                inner_value = inner_value.reshape((inner_value.shape[0],) + (1,) * missing
                                                  + tuple(inner_value.shape[1:]))
            value = inner_value
        inner = lg.inner
        inner[(slice(None),) + items] = value
        self._data = Logical(inner, lg.level)
        self.grad_fn, self.requires_grad = inner.grad_fn, inner.requires_grad

    def requires_grad_(self, requires_grad: bool = True):
        inner = self._data.inner
        inner.requires_grad_(requires_grad)
        self.requires_grad = inner.requires_grad
        self._accum = dispatch.edge(inner) if inner.requires_grad and inner.grad_fn is None else None
        return self


def wrap(inner: Tensor, level: int) -> BatchedTensor:
    """``inner`` (batch dim first) seen one example at a time at vmap ``level``. Its graph state
    is ``inner``'s: a graph node or a leaf's gradient accumulator is shared, not copied."""
    t = object.__new__(BatchedTensor)
    t._data = Logical(inner, level)
    t._backend = inner._backend
    t.dtype = inner.dtype
    t.requires_grad = inner.requires_grad
    t.grad = None
    t.grad_fn = inner.grad_fn
    t._vc = inner._vc
    t._accum = dispatch.edge(inner) if inner.requires_grad and inner.grad_fn is None else None
    t._retains_grad = False
    t._view = None
    return t


def level_of(t: Any) -> int | None:
    """The vmap level ``t`` is batched at (its outermost wrapper), or None."""
    return t._data.level if type(t) is BatchedTensor else None


def peel(t: Tensor) -> tuple[Tensor, list[int]]:
    """``t``'s physical tensor and the levels it is batched at, outermost vmap first (the order
    of the physical tensor's leading dims)."""
    levels = []
    while type(t) is BatchedTensor:
        lg = t._data
        levels.append(lg.level)
        t = lg.inner
    levels.reverse()
    return t, levels
