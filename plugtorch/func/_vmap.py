"""``vmap``: run a function written for one example over a batch.

Each ``vmap`` call is a *level*: a dispatch mode (:class:`VmapLevel`) in force while the
function runs, and the ``BatchedTensor`` s (``_batched.py``) that carry its batch dim. An op
called on a batched tensor reaches the innermost mode; the level that owns it unwraps its own
operands (leaving those of outer levels, which its ``call_op`` hands on to the next mode down),
applies the op's batching rule (``_batching.py``) and wraps the result. Ops without a rule run
once per example and are stacked, which is right for every op and slower.
"""
from __future__ import annotations

import functools
import itertools
import warnings
from collections.abc import Callable
from typing import Any

from ..core.dispatch import call_op
from ..core.ops import index as _index
from ..core.optable import DispatchMode
from ..core.tensor import Tensor
from . import _batching
from ._batched import BatchedTensor, level_of, wrap
from ._pytree import flatten, unflatten

__all__ = ["vmap", "VmapLevel", "active_levels"]

_COUNTER = itertools.count(1)
_ACTIVE: list[VmapLevel] = []  # the vmap levels in force, outermost first
_LIVE: set[int] = set()  # their levels
LOOPED: set[str] = set()  # ops that ran per example for want of a batching rule (a warning each, once)


def active_levels() -> list[tuple[int, int]]:
    """(level, batch size) of each vmap in force, outermost first."""
    return [(v.level, v.size) for v in _ACTIVE]


class VmapLevel(DispatchMode):
    """The dispatch mode of one vmap call: ops on its batched tensors run by batching rules."""

    def __init__(self, level: int, size: int, randomness: str):
        self.level, self.size, self.randomness = level, size, randomness

    def dispatch(self, opdef, operands, attrs):
        level = self.level
        inner: list[Any] = []
        bdims: list[int | None] = []
        batched = False
        for o in operands:
            if type(o) is BatchedTensor:
                lg = o._data
                if lg.level == level:
                    inner.append(lg.inner)
                    bdims.append(0)
                    batched = True
                    continue
                if lg.level > level or lg.level not in _LIVE:
                    raise RuntimeError(
                        f"vmap: {opdef.name}(): a tensor batched by a vmap that has already returned was used "
                        "(it escaped the vmapped function, through a closure or a global); return it from "
                        "that function instead")
            inner.append(o)
            bdims.append(None)
        if not batched:
            return call_op(opdef, operands, attrs)
        rule = _batching.RULES.get(opdef.name)
        if rule is None:
            out, out_bdims = loop(opdef, tuple(inner), tuple(bdims), attrs, self.size)
        else:
            out, out_bdims = rule(tuple(inner), tuple(bdims), attrs)
        return _wrap_result(out, out_bdims, level)


def loop(opdef, operands, bdims, attrs, size):
    """The op run once per example and stacked: the batching rule of every op without one."""
    name = opdef.name
    if name not in LOOPED:
        LOOPED.add(name)
        warnings.warn(f"There is a performance drop because we have not yet implemented the batching rule for "
                      f"{name}. It runs once per example under vmap; plugtorch.func.register_batching_rule "
                      "adds one.", UserWarning, stacklevel=4)
    if size == 0:
        raise RuntimeError(f"vmap: {name}() has no batching rule and the batch is empty, so it cannot be run "
                           "once per example; give the op a batching rule or a non-empty batch")
    results = []
    for i in range(size):
        args = tuple(o[i] if bd is not None else o for o, bd in zip(operands, bdims))
        results.append(call_op(opdef, args, attrs))
    first = results[0]
    if isinstance(first, Tensor):
        return _stack(name, results), 0
    if isinstance(first, (tuple, list)):
        parts = [[r[j] for r in results] for j in range(len(first))]
        stacked = [_stack(name, p) if isinstance(p[0], Tensor) else _same(name, p) for p in parts]
        bd = tuple(0 if isinstance(p[0], Tensor) else None for p in parts)
        return _rebuild(first, stacked), bd
    return _same(name, results), None


def _stack(name, tensors):
    from .._ops import stack
    shape = tuple(tensors[0].shape)
    if any(tuple(t.shape) != shape for t in tensors[1:]):
        raise RuntimeError(f"vmap: We do not support batching operators that can output dynamic shape. Attempted "
                           f"to vmap over {name}: its result's shape differs between examples ({list(shape)} and "
                           "others); compute it outside vmap, or with a shape every example shares")
    return stack(tensors, 0)


def _same(name, values):
    if any(v != values[0] for v in values[1:]):
        raise RuntimeError(f"vmap: {name}() returned a value that is not a tensor and differs between examples "
                           f"({values[0]!r} and others); it cannot be batched")
    return values[0]


def _rebuild(like, items):
    if hasattr(like, "_fields"):  # a named tuple (return_types)
        return type(like)(*items)
    return type(like)(items)


def _wrap_result(out, bdims, level):
    if isinstance(out, Tensor):
        return wrap(out, level) if bdims == 0 else out
    if isinstance(out, (tuple, list)):
        if not isinstance(bdims, (tuple, list)):
            bdims = (bdims,) * len(out)
        return _rebuild(out, [_wrap_result(o, b, level) for o, b in zip(out, bdims)])
    return out


# -- vmap ----------------------------------------------------------------------------------

def _name(func) -> str:
    return getattr(func, "__name__", repr(func))


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` mapped over a dim of its inputs: torch.func.vmap.

    ``in_dims`` (an int, None, or a structure matching the positional arguments) says which dim
    of each input to map over (None: not mapped); ``out_dims`` where the mapped dim goes in each
    output. ``randomness`` says what random draws under the map do: raise (``'error'``), differ
    per example (``'different'``) or repeat (``'same'``). ``chunk_size`` runs the batch that
    many examples at a time.
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)
    return wrapped


def _in_dims_per_leaf(func, in_dims, args):
    if isinstance(in_dims, int) or in_dims is None:
        leaves, spec = flatten(args)
        return leaves, [in_dims] * len(leaves), spec
    if not isinstance(in_dims, tuple):
        raise ValueError(f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int "
                         f"or a (potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if len(in_dims) != len(args):
        raise ValueError(f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
                         f"the structure of `inputs`. in_dims has {len(in_dims)} entries but inputs has "
                         f"{len(args)}.")
    leaves, dims = [], []
    for a, d in zip(args, in_dims):
        sub, _ = flatten(a)
        leaves.extend(sub)
        dims.extend(_broadcast(func, d, a, sub, "in_dims", in_dims))
    return leaves, dims, flatten(args)[1]


def _broadcast(func, d, tree, leaves, what, whole):
    """One entry of in_dims/out_dims spread over the leaves of ``tree``."""
    if d is None or isinstance(d, int):
        return [d] * len(leaves)
    dl, dspec = flatten(d)
    _, tspec = flatten(tree)
    if dspec != tspec:
        raise ValueError(f"vmap({_name(func)}, {what}={whole}, ...)(<inputs>): {what} is not compatible with the "
                         f"structure of the {'inputs' if what == 'in_dims' else 'outputs'}.")
    return dl


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    if not args:
        raise ValueError(f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
                         "are trying to vmap over a function with no inputs. The latter is unsupported.")
    leaves, dims, spec = _in_dims_per_leaf(func, in_dims, args)
    sizes = []
    for leaf, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                             "but in_dim must be either an integer dimension or None.")
        if not isinstance(leaf, Tensor):
            raise ValueError(f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                             f"but the input is of type {type(leaf)}. We cannot vmap over non-Tensor arguments, "
                             "please use None as the respective in_dim")
        n = leaf.dim()
        if not -n <= d < n:
            raise ValueError(f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some "
                             f"input, but that input is a Tensor of dimensionality {n} so expected in_dim to "
                             f"satisfy -{n} <= in_dim < {n}.")
        sizes.append(leaf.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    size = sizes[0]
    if chunk_size is None or chunk_size >= size:
        return _run(func, leaves, dims, spec, kwargs, size, out_dims, randomness)
    chunks = []
    for start in range(0, size, chunk_size):
        n = min(chunk_size, size - start)
        part = [leaf.narrow(d, start, n) if d is not None else leaf for leaf, d in zip(leaves, dims)]
        chunks.append(_run(func, part, dims, spec, kwargs, n, out_dims, randomness))
    return _concat_chunks(func, chunks, out_dims)


def _concat_chunks(func, chunks, out_dims):
    from .._ops import cat
    ospec = flatten(chunks[0])[1]
    per_leaf = _out_dims_per_leaf(func, out_dims, chunks[0])
    flat = [flatten(c)[0] for c in chunks]
    joined = [cat([f[i] for f in flat], d) if d is not None else flat[0][i] for i, d in enumerate(per_leaf)]
    return unflatten(joined, ospec)


def _out_dims_per_leaf(func, out_dims, out):
    leaves, _ = flatten(out)
    if isinstance(out_dims, int) or out_dims is None:
        return [out_dims] * len(leaves)
    if isinstance(out, tuple) and isinstance(out_dims, tuple) and len(out_dims) == len(out):
        dims = []
        for o, d in zip(out, out_dims):
            dims.extend(_broadcast(func, d, o, flatten(o)[0], "out_dims", out_dims))
        return dims
    if not isinstance(out_dims, tuple):
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
                         "python collection of ints representing where in the outputs the vmapped dimension "
                         "should appear.")
    if len(out_dims) == 1 and len(leaves) == 1:
        return list(out_dims)
    raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with "
                     "the structure of `outputs`.")


def _run(func, leaves, dims, spec, kwargs, size, out_dims, randomness):
    level = next(_COUNTER)
    mode = VmapLevel(level, size, randomness)
    batched = [wrap(leaf.movedim(d, 0), level) if d is not None else leaf for leaf, d in zip(leaves, dims)]
    args = unflatten(batched, spec)
    from . import _random
    _ACTIVE.append(mode)
    _LIVE.add(level)
    hooked = _index.VMAP_INDEX[0]
    _index.VMAP_INDEX[0] = per_example_index
    try:
        with mode, _random.under(_ACTIVE):
            out = func(*args, **kwargs)
    finally:
        _ACTIVE.remove(mode)
        _LIVE.discard(level)
        _index.VMAP_INDEX[0] = hooked
    outs, ospec = flatten(out)
    per_leaf = _out_dims_per_leaf(func, out_dims, out)
    name = _name(func)
    results = []
    for o, d in zip(outs, per_leaf):
        if not isinstance(o, Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(o)}. "
                             "Did you mean to set out_dims= to None for output?")
        if level_of(o) == level:
            if d is None:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            inner = o._data.inner
        else:
            if d is None:
                results.append(o)
                continue
            inner = o.unsqueeze(0).expand((size,) + tuple(o.shape))
        results.append(inner.movedim(0, d) if d != 0 else inner)
    return unflatten(results, ospec)


def per_example_index(x, key):
    """``x[key]`` where an index tensor in ``key`` differs per example: no native index holds it,
    so each example indexes its own slice and the results are stacked (NotImplemented where no
    index tensor is batched: the op's own rule serves)."""
    items = key if isinstance(key, tuple) else (key,)
    index_levels = [lvl for i in items if (lvl := level_of(i)) is not None]
    if not index_levels:
        return NotImplemented
    level = max(index_levels + ([lvl] if (lvl := level_of(x)) is not None else []))
    size = next(t._data.inner.shape[0] for t in (x, *items) if level_of(t) == level)

    def pick(t, i):
        return t._data.inner[i] if level_of(t) == level else t
    rows = [pick(x, i)[tuple(pick(k, i) for k in items)] for i in range(size)]
    return wrap(_stack("indexing (x[index])", rows), level)
