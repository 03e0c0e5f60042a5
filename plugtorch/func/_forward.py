"""``jvp``, ``jacfwd`` and ``hessian``: torch.func's forward-mode transforms, on
``plugtorch.autograd.forward_ad``.

``jvp`` runs the function once on dual tensors. ``jacfwd`` runs one ``jvp`` per element of the
differentiated inputs (a basis tangent each) and stacks the columns. ``hessian`` is ``jacfwd`` of
a reverse-mode Jacobian: the backward pass runs under the dual level, so its ops carry the
tangents (forward-over-reverse).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..autograd import forward_ad as fwad
from ..autograd.functional import grad
from ..core.grad_mode import enable_grad
from ..core.tensor import Tensor

__all__ = ["jvp", "jacfwd", "hessian"]


# -- nested tuples, lists and dicts of tensors --------------------------------------------------

def _flatten(tree: Any, leaves: list) -> Any:
    if isinstance(tree, (tuple, list)):
        return (type(tree), tuple(_flatten(x, leaves) for x in tree))
    if isinstance(tree, dict):
        return (type(tree), tuple(tree), tuple(_flatten(v, leaves) for v in tree.values()))
    leaves.append(tree)
    return None


def _unflatten(leaves, spec: Any) -> Any:
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        if issubclass(s[0], dict):
            return s[0](zip(s[1], (build(x) for x in s[2])))
        items = [build(x) for x in s[1]]
        return s[0](*items) if hasattr(s[0], "_fields") else s[0](items)
    return build(spec)


def _leaves(tree: Any) -> tuple[list, Any]:
    leaves: list = []
    return leaves, _flatten(tree, leaves)


# -- jvp ------------------------------------------------------------------------------------------

def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J t)`` (and ``aux`` with ``has_aux``), the Jacobian-vector product of
    ``func`` at ``primals`` along ``tangents`` (the same structure), in one forward pass."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    flat_p, spec_p = _leaves(primals)
    flat_t, spec_t = _leaves(tangents)
    if not isinstance(tangents, tuple) or spec_p != spec_t:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, tangents also must be. "
                           f"Got {len(flat_p)} primals and {len(flat_t)} tangents in different structures")
    for what, leaves in (("primals", flat_p), ("tangents", flat_t)):
        for leaf in leaves:
            if not isinstance(leaf, Tensor):
                raise RuntimeError(f"jvp(f, primals, tangents): Expected {what} to be only Tensors, got unsupported "
                                   f"type {type(leaf)}")
    with fwad.dual_level():
        duals = [fwad.make_dual(p, t) for p, t in zip(flat_p, flat_t)]
        result = func(*_unflatten(duals, spec_p))
        aux = None
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError("jvp(f, primals, tangents): output of function f should be a tuple: (output, aux) "
                                   "if has_aux is True")
            result, aux = result
            aux_leaves, aux_spec = _leaves(aux)
            aux = _unflatten([_primal(a, "Expected tensors, got unsupported type") for a in aux_leaves], aux_spec)
        flat_o, spec_o = _leaves(result)
        outs, tans = [], []
        for o in flat_o:
            primal = _primal(o, "jvp(f, primals, tangents): expected f(*primals) to return only tensors, got "
                                "unsupported type")
            tangent = fwad.unpack_dual(o).tangent
            outs.append(primal)
            tans.append(tangent if tangent is not None else primal.new_zeros(primal.shape))
    if not any(x.requires_grad for x in flat_p + flat_t):  # a graph built inside (hessian's backward passes)
        outs, tans = [o.detach() for o in outs], [t.detach() for t in tans]
    if has_aux:
        return _unflatten(outs, spec_o), _unflatten(tans, spec_o), aux
    return _unflatten(outs, spec_o), _unflatten(tans, spec_o)


def _primal(x: Any, message: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise RuntimeError(f"{message} {type(x)}")
    return fwad.unpack_dual(x).primal


# -- Jacobians --------------------------------------------------------------------------------------

def _argnums(argnums, n: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"{name}: argnums must be an int or a tuple of ints, got {type(a).__name__}")
        if not -n <= a < n:
            raise RuntimeError(f"Got argnum={a}, but only {n} positional inputs")
    return tuple(a % n for a in nums)


def _jacobian_of(columns_for, inputs, args_spec, outs, spec_o, single: bool):
    """The Jacobian's structure: per output leaf, per argnum, the argnum's structure of blocks of
    shape out.shape + input.shape, from ``columns_for(k, i)`` (input leaf i's columns of output k)."""
    result = []
    for k, o in enumerate(outs):
        per_arg = []
        for positions, spec in args_spec:
            blocks = []
            for i in positions:
                x = inputs[i]
                cols = columns_for(k, i)
                if not cols:
                    blocks.append(o.new_zeros(tuple(o.shape) + tuple(x.shape)))
                    continue
                from ..core.ops.shape import stack
                blocks.append(stack(cols, -1).reshape(tuple(o.shape) + tuple(x.shape)))
            per_arg.append(_unflatten(blocks, spec))
        result.append(per_arg[0] if single else tuple(per_arg))
    return _unflatten(result, spec_o)


def _split_args(args, nums):
    """The flat tensor inputs of the differentiated args, with (their positions, their spec) per arg."""
    inputs: list = []
    args_spec = []
    for a in nums:
        leaves, spec = _leaves(args[a])
        args_spec.append((list(range(len(inputs), len(inputs) + len(leaves))), spec))
        inputs.extend(leaves)
    for x in inputs:
        if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
            raise RuntimeError("jacfwd: the differentiated arguments must be floating point Tensors (or nested "
                               f"tuples, lists and dicts of them), got {type(x).__name__}"
                               + (f" of dtype {x.dtype}" if isinstance(x, Tensor) else ""))
    return inputs, args_spec


def _rebuild(args, nums, args_spec, flat):
    new = list(args)
    for a, (positions, spec) in zip(nums, args_spec):
        new[a] = _unflatten([flat[i] for i in positions], spec)
    return new


def jacfwd(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """The Jacobian of ``func`` with respect to the arguments ``argnums``, by forward mode: one
    ``jvp`` per element of those arguments. Each block has shape ``output.shape + input.shape``."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")

    def wrapper(*args):
        nums = _argnums(argnums, len(args), "jacfwd")
        inputs, args_spec = _split_args(args, nums)

        def call(*flat):
            return func(*_rebuild(args, nums, args_spec, flat))
        columns: list[list] = []  # columns[c]: every output leaf's tangent for basis vector c
        owner: list[int] = []  # which input leaf each basis vector belongs to
        base = tuple(x.new_zeros(x.shape) for x in inputs)
        for i, x in enumerate(inputs):
            for e in range(x.numel()):
                tangents = list(base)
                one = x.new_zeros(x.numel())
                one[e] = 1.0
                tangents[i] = one.reshape(x.shape)
                res = jvp(call, tuple(inputs), tuple(tangents), has_aux=has_aux)
                columns.append(_leaves(res[1])[0])
                owner.append(i)
        out = jvp(call, tuple(inputs), base, has_aux=has_aux) if not columns else res
        outs, spec_o = _leaves(out[0])

        def columns_for(k, i):
            return [col[k] for col, o in zip(columns, owner) if o == i]
        jac = _jacobian_of(columns_for, inputs, args_spec, outs, spec_o, not isinstance(argnums, tuple))
        return (jac, out[2]) if has_aux else jac
    return wrapper


def _jacrev(func: Callable, argnums: int | tuple[int, ...]) -> Callable:
    """The Jacobian by reverse mode, one ``autograd.grad`` per output element (for ``hessian``:
    under an enclosing dual level its backward passes carry tangents)."""
    def wrapper(*args):
        nums = _argnums(argnums, len(args), "jacrev")
        inputs, args_spec = _split_args(args, nums)
        with enable_grad():
            live = [x.clone() for x in inputs]
            for x in live:
                if not x.requires_grad:
                    x.requires_grad_()
            out = func(*_rebuild(args, nums, args_spec, live))
            outs, spec_o = _leaves(out)
            rows: list[list[list]] = []  # rows[k][i]: output k's gradient rows for input leaf i
            for o in outs:
                per_input: list[list] = [[] for _ in live]
                flat = o.reshape(-1)
                for e in range(o.numel()):
                    if not flat.requires_grad:
                        grads = [None] * len(live)
                    else:
                        # create_graph: grad detaches its results otherwise, and a detached tensor has no
                        # tangent (jvp detaches what it returns where its inputs need no graph)
                        grads = grad(flat[e], live, retain_graph=True, create_graph=True, allow_unused=True)
                    for i, (g, x) in enumerate(zip(grads, live)):
                        per_input[i].append((g if g is not None else x.new_zeros(x.shape)).reshape(-1))
                rows.append(per_input)

        def columns_for(k, i):
            # the rows of output k for input i, as the columns _jacobian_of stacks along the last dim
            o, x = outs[k], inputs[i]
            if not rows[k][i] or x.numel() == 0:
                return []
            from ..core.ops.shape import stack
            block = stack(rows[k][i], 0)  # (out numel, in numel)
            return list(block.reshape((o.numel(), x.numel())).t().unbind(0)) if o.numel() else []
        return _jacobian_of(lambda k, i: [c.reshape(outs[k].shape) for c in columns_for(k, i)], inputs,
                            args_spec, outs, spec_o, not isinstance(argnums, tuple))
    return wrapper


def hessian(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """The Hessian of ``func`` (a function returning a scalar tensor): ``jacfwd(jacrev(func))``."""
    return jacfwd(_jacrev(func, argnums), argnums)
