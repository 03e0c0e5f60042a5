"""NumPy-style joins (hstack, vstack, dstack, column_stack) and the atleast_*d views they use."""
from __future__ import annotations

from ..optable import op, public
from ..tensor import Tensor
from .shape import cat


def _tensors(op, tensors):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{op} expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected a sequence of Tensors, but element {i} is "
                            f"{type(t).__name__}")
    return tensors


def _at_least(ndim):
    def one(t):
        if t.ndim >= ndim:
            return t
        if ndim == 3 and t.ndim == 2:  # NumPy's rule: a matrix becomes (rows, cols, 1)
            return t.unsqueeze(-1)
        if ndim == 3 and t.ndim == 1:  # and a vector (1, n, 1)
            return t.reshape(1, -1, 1)
        return t.reshape((1,) * (ndim - t.ndim) + tuple(t.shape))

    def fn(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(one(t) for t in _tensors(f"atleast_{ndim}d", tensors[0]))
        out = tuple(one(t) for t in _tensors(f"atleast_{ndim}d", tensors))
        return out[0] if len(out) == 1 else out
    fn.__name__ = fn.__qualname__ = f"atleast_{ndim}d"
    fn.__doc__ = (f"Each tensor viewed with at least {ndim} dims (leading size-1 dims, NumPy's "
                  "placement); one tensor in, one out, else a tuple.")
    return public("plugtorch")(fn)


atleast_1d, atleast_2d, atleast_3d = _at_least(1), _at_least(2), _at_least(3)


@op(variadic=True, exposed=("plugtorch",))
def hstack(tensors):
    """Join along dim 1 (dim 0 for 1-D tensors), after atleast_1d."""
    ts = [atleast_1d(t) for t in _tensors("hstack", tensors)]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


@op(variadic=True, exposed=("plugtorch",), aliases=("row_stack",))
def vstack(tensors):
    """Join along dim 0, after atleast_2d (1-D tensors become rows)."""
    return cat([atleast_2d(t) for t in _tensors("vstack", tensors)], 0)


row_stack = vstack


@op(variadic=True, exposed=("plugtorch",))
def dstack(tensors):
    """Join along dim 2, after atleast_3d."""
    return cat([atleast_3d(t) for t in _tensors("dstack", tensors)], 2)


@op(variadic=True, exposed=("plugtorch",))
def column_stack(tensors):
    """Join along dim 1, 0-d and 1-D tensors first made columns."""
    ts = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in _tensors("column_stack", tensors)]
    return cat(ts, 1)


__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack",
           "column_stack"]
