"""In-place ops (``add_``, ``mul_``, ``zero_``, ``x[i] = v``, ...) with version counters.

Two cases:

* No graph involved (grad mode off, or nothing requires grad — optimizer steps,
  initialisation): the result is written into the tensor's memory with the
  ``setitem`` primitive, so views see it and no memory is allocated.
* The graph is involved: the op is computed out of place from an alias of the
  old value, and the tensor is rebound to the result and its graph node. The
  old memory is never overwritten, so nodes that saved it stay correct.

Either way the version counter is bumped, so a backward that needs the old
value of a tensor modified since raises torch's "modified by an inplace
operation" error instead of computing a wrong gradient.
"""
from __future__ import annotations

from ..dispatch import record, wrap
from ..grad_mode import _state as _grad
from ..registry import OpDef
from ..tensor import Tensor

OPS: list[OpDef] = []


def _check_leaf(x, op):
    if _grad.enabled and x.requires_grad and x.grad_fn is None:
        raise RuntimeError(
            f"a leaf Variable that requires grad is being used in an in-place operation ({op}). "
            "Wrap the update in 'with plugtorch.no_grad():' or operate on x.detach()."
        )


def _tracking(x, *others) -> bool:
    if not _grad.enabled:
        return False
    return x.requires_grad or any(isinstance(o, Tensor) and o.requires_grad for o in others)


def _alias(x):
    """The old value of ``x`` as its own tensor: same memory and graph node, own version counter."""
    a = wrap(x._data, x._backend)
    a.grad_fn, a.requires_grad, a._accum = x.grad_fn, x.requires_grad, x._accum
    a._vc = [x._vc[0]]
    return a


def _commit(x, result, op, tracking):
    """Make ``result`` the new value of ``x``."""
    if result.shape != x.shape:
        raise RuntimeError(
            f"{op}: output with shape {list(x.shape)} doesn't match the broadcast shape {list(result.shape)}"
        )
    if result.dtype is not x.dtype:
        if result.dtype.category > x.dtype.category:
            raise RuntimeError(
                f"{op}: result type {result.dtype.name} can't be cast to the desired output type "
                f"{x.dtype.name}"
            )
        result = result.to(x.dtype)
    if tracking:
        x._data = result._data
        x.grad_fn = result.grad_fn
        x.requires_grad = result.requires_grad
    else:
        x._backend.kernels["setitem"](x._data, (Ellipsis,), result._data)
    x._vc[0] += 1
    return x


def inplace(fn, name):
    """``x.<name>(*args)``: ``x = fn(x, *args)`` done in place."""
    def method(x, *args, **kwargs):
        _check_leaf(x, name)
        tracking = _tracking(x, *args, *kwargs.values())
        result = fn(_alias(x) if tracking else x, *args, **kwargs)
        return _commit(x, result, name, tracking)
    method.__name__ = method.__qualname__ = name
    return method


def copy_(x, src, non_blocking=False):
    _check_leaf(x, "copy_")
    tracking = _tracking(x, src)
    if src._backend is not x._backend:
        from .shape import move
        src = move(src, x._backend)
    if src.dtype is not x.dtype:
        src = src.to(x.dtype)
    if src.shape != x.shape:
        src = src.expand(x.shape)
    if tracking:
        from .shape import clone
        return _commit(x, clone(src), "copy_", True)
    return _commit(x, src, "copy_", False)


def zero_(x):
    _check_leaf(x, "zero_")
    x._backend.kernels["setitem"](x._data, (Ellipsis,), 0)
    if _grad.enabled and x.grad_fn is not None:
        x.grad_fn, x.requires_grad = None, False  # zeros do not depend on anything
    x._vc[0] += 1
    return x


def fill_(x, value):
    _check_leaf(x, "fill_")
    if isinstance(value, Tensor):
        value = value.item()
    x._backend.kernels["setitem"](x._data, (Ellipsis,), value)
    if _grad.enabled and x.grad_fn is not None:
        x.grad_fn, x.requires_grad = None, False
    x._vc[0] += 1
    return x


# -- x[index] = value ----------------------------------------------------------------

def _index_put_rule(ctx, g):
    index = ctx.attrs
    gx = _index_fill(g, index, 0) if ctx.next[0] is not None else None
    gv = None
    if len(ctx.next) > 1 and ctx.next[1] is not None:
        from .index import getitem_native
        gv = getitem_native(g, index)  # the engine sums it down to value's shape
    return (gx, gv) if len(ctx.next) > 1 else gx


def _index_fill_rule(ctx, g):
    return _index_fill(g, ctx.attrs[0], 0)


def _index_fill(x, index, value):
    """A copy of ``x`` with ``x[index] = value`` (a Python number)."""
    b = x._backend
    data = b.kernels["copy"](x._data)
    b.kernels["setitem"](data, index, value)
    out = wrap(data, b)
    if x.requires_grad and _grad.enabled:
        record(out, "index_fill", _index_fill_rule, (x,), attrs=(index,))
    return out


OPS.append(OpDef("index_put", derivative=_index_put_rule, doc="x with x[index] = value (out of place)."))
OPS.append(OpDef("index_fill", derivative=_index_fill_rule, doc="x with x[index] = number (out of place)."))


def setitem(x, key, value):
    from .index import _native_index
    _check_leaf(x, "__setitem__")
    index, _ = _native_index(x, key)
    b = x._backend
    if isinstance(value, Tensor):
        if value._backend is not b:
            from ..errors import BackendMismatchError
            raise BackendMismatchError("__setitem__", b.name, value._backend.name)
        if value.dtype is not x.dtype:
            value = value.to(x.dtype)
    elif not isinstance(value, (int, float, bool)):
        from .creation import tensor
        value = tensor(value, dtype=x.dtype, device=b.name)
    tracking = _tracking(x, value)
    vdata = value._data if isinstance(value, Tensor) else value
    if not tracking:
        _put(b, x._data, index, vdata, value)
        x._vc[0] += 1
        return
    old = _alias(x)
    data = b.kernels["copy"](x._data)
    _put(b, data, index, vdata, value)
    out = wrap(data, b)
    inputs = (old, value) if isinstance(value, Tensor) else (old,)
    record(out, "index_put", _index_put_rule, inputs, attrs=index)
    x._data, x.grad_fn, x.requires_grad = out._data, out.grad_fn, True
    x._vc[0] += 1


def _put(b, data, index, vdata, value):
    try:
        b.kernels["setitem"](data, index, vdata)
    except IndexError as e:
        raise IndexError(f"x[index] = value on a tensor of shape {list(data.shape)}: {e}") from None
    except ValueError:
        target = b.kernels["getitem"](data, index).shape
        shape = list(value.shape) if isinstance(value, Tensor) else []
        raise RuntimeError(f"shape mismatch: value tensor of shape {shape} cannot be broadcast to "
                           f"indexing result of shape {list(target)}") from None
