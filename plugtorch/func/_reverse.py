"""Reverse-mode transforms: ``grad``, ``grad_and_value``, ``vjp`` and ``jacrev``, as torch.func's.

Each is built on ``plugtorch.autograd.grad``. The function runs on *fresh* inputs: a detached
leaf that requires grad, or, where the input already requires grad (an outer transform's input,
or the user's graph), an alias of it, so the outer graph sees through this transform and
``grad(grad(f))`` nests. The inner gradient is taken with ``create_graph`` whenever something
outside may differentiate it again.

Autograd works on physical tensors, whatever vmap levels are in force: the graph is recorded
below every vmap mode. A fresh input is therefore *materialised per example* at every vmap level
in force (an input a vmap does not map is expanded along its batch): the gradient of the sum of
the examples' outputs with respect to per-example copies is each example's own gradient, which
is what ``vmap(grad(f))`` must return. ``vjp``'s cotangents may be batched by a vmap started
after it (``jacrev`` is ``vmap`` of a ``vjp``): the engine then runs under that vmap with a
batched gradient, as torch's ``is_grads_batched``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..autograd.functional import grad as _autograd_grad
from ..core.grad_mode import enable_grad
from ..core.tensor import Tensor
from ._batched import peel, wrap
from ._pytree import flatten, unflatten
from ._vmap import active_levels, vmap

__all__ = ["grad", "grad_and_value", "vjp", "jacrev"]

_DEPTH = [0]  # reverse transforms whose function is running: their graph must stay differentiable


# -- layouts: a tensor batched at vmap levels <-> its physical tensor ------------------------

def _physical(t: Tensor, levels: list[tuple[int, int]]) -> Tensor:
    """``t`` as a physical tensor whose leading dims are ``levels``' batches (outermost first),
    expanded where ``t`` is not batched at one; batched at its other (newer) levels still."""
    phys, have = peel(t)
    want = [lvl for lvl, _ in levels]
    keep = [lvl for lvl in have if lvl not in want]
    names = list(have)
    for lvl in want:
        if lvl not in names:
            phys = phys.unsqueeze(len(names))
            names.append(lvl)
    perm = [names.index(k) for k in keep] + [names.index(lvl) for lvl in want]
    perm += list(range(len(names), phys.dim()))
    if perm != list(range(phys.dim())):
        phys = phys.permute(perm)
    shape = list(phys.shape)
    for i, (_, size) in enumerate(levels):
        shape[len(keep) + i] = size
    if shape != list(phys.shape):
        phys = phys.expand(shape)
    for k in keep:
        phys = wrap(phys, k)
    return phys


def _logical(t: Tensor, levels: list[tuple[int, int]]) -> Tensor:
    """The inverse of :func:`_physical`: ``t``'s leading dims after its own levels are ``levels``'."""
    phys, keep = peel(t)
    names = keep + [lvl for lvl, _ in levels]
    order = sorted(names)
    perm = [names.index(lvl) for lvl in order] + list(range(len(names), phys.dim()))
    if perm != list(range(phys.dim())):
        phys = phys.permute(perm)
    for lvl in order:
        phys = wrap(phys, lvl)
    return phys


def _fresh(t: Any, levels) -> Tensor:
    if not isinstance(t, Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
    p = _physical(t, levels)
    if p.requires_grad:
        return p.view_as(p)  # an alias: the outer graph runs through it
    if not p.dtype.is_floating_point:
        raise RuntimeError(f"only Tensors of floating point dtype can require gradients (a {p.dtype.name} input "
                           "was given to a reverse transform)")
    return p.detach().requires_grad_()


def _argnums(argnums, n: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(nums, tuple) or not all(isinstance(a, int) for a in nums):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    if len(set(nums)) != len(nums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    for a in nums:
        if not -n <= a < n:
            raise RuntimeError(f"Got argnum={a}, but only {n} positional inputs")
    return tuple(a % n for a in nums)


class _Prepared:
    """A call's differentiated inputs: the fresh physical leaves and the arguments built on them."""

    def __init__(self, args: tuple, nums: tuple[int, ...]):
        self.levels = active_levels()
        self.create = _DEPTH[0] > 0
        self.leaves: list[Tensor] = []
        self.specs = []
        new_args = list(args)
        for i in nums:
            leaves, spec = flatten(args[i])
            if any(isinstance(x, Tensor) and x.requires_grad for x in leaves):
                self.create = True
            fresh = [_fresh(x, self.levels) for x in leaves]
            self.leaves.extend(fresh)
            self.specs.append((spec, len(fresh)))
            new_args[i] = unflatten([_logical(f, self.levels) for f in fresh], spec)
        self.args = tuple(new_args)

    def call(self, func, kwargs):
        _DEPTH[0] += 1
        try:
            with enable_grad():
                return func(*self.args, **kwargs)
        finally:
            _DEPTH[0] -= 1

    def gradients(self, outputs: list[Tensor], cotangents: list[Tensor] | None) -> list[Tensor]:
        """d(outputs)/d(inputs), each weighted by its cotangent (ones where None), per input leaf."""
        from .._ops import zeros_like
        outs = [_physical(o, self.levels) for o in outputs]
        if cotangents is None:
            from .._ops import ones_like
            cts = [ones_like(o) for o in outs]
        else:
            cts = [_physical(c, self.levels) for c in cotangents]
        pairs = [(o, c) for o, c in zip(outs, cts) if o.requires_grad]
        grads: list = [None] * len(self.leaves)
        if pairs:
            with enable_grad():
                grads = list(_autograd_grad([o for o, _ in pairs], self.leaves, [c for _, c in pairs],
                                            retain_graph=True, create_graph=self.create, allow_unused=True))
        out = []
        for g, leaf in zip(grads, self.leaves):
            if g is None:
                g = zeros_like(leaf) if not cts else _zeros_batched_like(leaf, cts)
            out.append(_logical(g, self.levels))
        return out

    def structured(self, flat: list, single: bool):
        """``flat`` (one per input leaf) in the structure of the differentiated arguments."""
        parts, i = [], 0
        for spec, n in self.specs:
            parts.append(unflatten(flat[i:i + n], spec))
            i += n
        return parts[0] if single else tuple(parts)


def _zeros_batched_like(leaf, cts):
    """Zeros for an input the outputs do not depend on, batched like the cotangents' newer levels."""
    from .._ops import zeros_like
    z = zeros_like(leaf)
    for c in cts:
        _, levels = peel(c)
        for lvl in levels:  # a cotangent batched by a later vmap: the zeros too (so vmap can stack them)
            z = wrap(z.unsqueeze(0).expand((c._data.inner.shape[0],) + tuple(z.shape)), lvl)
        break
    return z


# -- the transforms ----------------------------------------------------------------------------

def grad_and_value(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """``func``'s gradient with respect to ``args[argnums]``, and its value: torch.func.grad_and_value."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args))
        prep = _Prepared(args, nums)
        output = prep.call(func, kwargs)
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                   "(output, aux) if has_aux is True")
            output, aux = output
        if not isinstance(output, Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(output)}")
        if output.dim() != 0:
            raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
                               f"with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
        grads = prep.structured(prep.gradients([output], None), isinstance(argnums, int))
        if not prep.create:
            output = output.detach()
        return (grads, (output, aux)) if has_aux else (grads, output)
    return wrapper


def grad(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """``func``'s gradient with respect to ``args[argnums]``: torch.func.grad (``func`` returns a
    scalar tensor, or ``(scalar, aux)`` with ``has_aux``)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func: Callable, *primals, has_aux: bool = False):
    """(``func(*primals)``, ``vjp_fn``): ``vjp_fn(cotangents)`` gives the cotangents' products with
    the Jacobian, one per primal (torch.func.vjp; ``(output, vjp_fn, aux)`` with ``has_aux``)."""
    prep = _Prepared(primals, tuple(range(len(primals))))
    output = prep.call(func, {})
    aux = None
    if has_aux:
        if not (isinstance(output, tuple) and len(output) == 2):
            raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: (output, aux) if "
                               "has_aux is True")
        output, aux = output
    outs, out_spec = flatten(output)
    for o in outs:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported "
                               f"type {type(o)}")
        if not o.dtype.is_floating_point:
            raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor "
                               f"with dtype {o.dtype}")

    def vjp_fn(cotangents, retain_graph: bool = True, create_graph: bool | None = None):
        cts, ct_spec = flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               "outputs to the function.")
        for c, o in zip(cts, outs):
            if not isinstance(c, Tensor):
                raise RuntimeError(f"vjp_fn: expected the cotangents to be tensors, got {type(c)}")
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {c.shape} and output[0] has a "
                                   f"shape of {o.shape}.")
        create = prep.create
        prep.create = create or _DEPTH[0] > 0 or any(c.requires_grad for c in cts) or bool(create_graph)
        try:
            flat = prep.gradients(outs, cts)
        finally:
            prep.create = create
        return prep.structured(flat, False)

    if not prep.create:
        output = unflatten([o.detach() for o in outs], out_spec)
    return (output, vjp_fn, aux) if has_aux else (output, vjp_fn)


def jacrev(func: Callable, argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
           chunk_size: int | None = None, _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian of ``func`` with respect to ``args[argnums]``, by reverse mode: torch.func.jacrev.

    Each output's Jacobian is one batched vjp (``vmap`` over the rows of an identity), ``chunk_size``
    rows at a time; its shape is the output's followed by the input's.
    """
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from .._ops import eye
        nums = _argnums(argnums, len(args))

        def restricted(*diff):
            full = list(args)
            for i, d in zip(nums, diff):
                full[i] = d
            return func(*full, **kwargs)
        result = vjp(restricted, *(args[i] for i in nums), has_aux=has_aux)
        output, vjp_fn = result[0], result[1]
        outs, out_spec = flatten(output)
        per_output = []
        for k, o in enumerate(outs):
            n = o.numel()
            basis = eye(n, dtype=o.dtype, device=o.device).reshape((n,) + tuple(o.shape))

            def row(ct, k=k):
                cts = [ct if j == k else _zeros_for(outs[j]) for j in range(len(outs))]
                return vjp_fn(unflatten(cts, out_spec))
            rows = vmap(row, chunk_size=chunk_size)(basis) if n else _empty_rows(vjp_fn, outs, out_spec, k)
            jac = [r.reshape(tuple(o.shape) + tuple(r.shape[1:])) for r in flatten(rows)[0]]
            parts, i = [], 0
            for a in nums:
                leaves, spec = flatten(args[a])
                parts.append(unflatten(jac[i:i + len(leaves)], spec))
                i += len(leaves)
            per_output.append(parts[0] if isinstance(argnums, int) else tuple(parts))
        jacobian = unflatten(per_output, out_spec)
        return (jacobian, result[2]) if has_aux else jacobian
    return wrapper


def _zeros_for(o):
    from .._ops import zeros_like
    return zeros_like(o)


def _empty_rows(vjp_fn, outs, out_spec, k):
    """The rows of an empty output's Jacobian: none, each shaped like its input."""
    grads = vjp_fn(unflatten([_zeros_for(o) for o in outs], out_spec))
    return tuple(g.unsqueeze(0)[:0] for g in flatten(grads)[0])
