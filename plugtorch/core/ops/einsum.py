"""einsum, decomposed into diagonal/sum/permute/reshape/matmul.

Each operand first loses its repeated labels (take the diagonal) and the labels no
one else needs (sum them out); operands are then contracted pairwise, left to
right, each pair as one batched matmul: (batch, left-only, shared) @ (batch,
shared, right-only). Autograd differentiates the pieces.
"""
from __future__ import annotations

import builtins

from ..optable import op
from ..tensor import Tensor
from .creation import arange

_ELLIPSIS_LABELS = "0123456789"  # stand-ins for '...' dims; never valid subscripts


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation"
                           if len(operands) > len(terms) else
                           "einsum(): fewer operands were provided than specified in the equation")
    n_ell = 0
    for t, x in zip(terms, operands):
        if "..." in t:
            n_ell = builtins.max(n_ell, x.ndim - (len(t) - 3))
    if n_ell > len(_ELLIPSIS_LABELS):
        raise RuntimeError("einsum(): '...' covers too many dimensions")
    labelled = []
    for i, (t, x) in enumerate(zip(terms, operands)):
        for c in t.replace("...", ""):
            if not c.isalpha():
                raise RuntimeError(f"einsum(): invalid subscript given at index {eq.index(c)} in the "
                                   f"equation string, subscripts must be in [a-zA-Z]")
        if "..." in t:
            k = x.ndim - (len(t) - 3)
            if k < 0:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(t) - 3}) "
                                   f"is more than the number of dimensions ({x.ndim}) for operand {i}")
            t = t.replace("...", _ELLIPSIS_LABELS[n_ell - k:n_ell])
        elif len(t) != x.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(t)}) does not "
                               f"match the number of dimensions ({x.ndim}) for operand {i} and no "
                               "ellipsis was given")
        labelled.append(t)
    ell = _ELLIPSIS_LABELS[:n_ell]
    if arrow:
        out = rhs.replace("...", ell)
        for c in out:
            if not any(c in t for t in labelled):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation "
                                   "for any input operand")
        if len(set(out)) != len(out):
            raise RuntimeError(f"einsum(): output subscript appears more than once in the output: {rhs}")
    else:
        counts: dict = {}
        for t in labelled:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return labelled, out


def _check_sizes(labelled, operands):
    seen: dict = {}
    for i, (t, x) in enumerate(zip(labelled, operands)):
        for c, s in zip(t, x.shape):
            prev = seen.get(c)
            if prev is not None and prev != s and 1 not in (prev, s):
                name = "..." if c in _ELLIPSIS_LABELS else c
                raise RuntimeError(f"einsum(): subscript {name} has size {s} for operand {i} which "
                                   f"does not broadcast with previously seen size {prev}")
            if prev is None or prev == 1:
                seen[c] = s
    return seen


def _diagonal(x, labels):
    """Collapse repeated labels of one operand onto their diagonal."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        rest = [k for k in range(len(labels)) if k not in (i, j)]
        x = x.permute(rest + [i, j])
        idx = arange(x.shape[-1], device=x._backend.name)
        x = x[(Ellipsis, idx, idx)]
        labels = "".join(labels[k] for k in rest) + c
    return x, labels


def _contract(a, la, b, lb, keep, sizes):
    batch = [c for c in la if c in lb and c in keep]
    shared = [c for c in la if c in lb and c not in keep]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]
    # a shared label of size 1 on one side broadcasts against the other
    for c in shared:
        if a.shape[la.index(c)] != b.shape[lb.index(c)]:
            if a.shape[la.index(c)] == 1:
                a = a.expand(*(sizes[d] if d == c else -1 for d in la))
            else:
                b = b.expand(*(sizes[d] if d == c else -1 for d in lb))
    a = a.permute([la.index(c) for c in batch + left + shared])
    b = b.permute([lb.index(c) for c in batch + shared + right])
    nb = len(batch)
    a_batch, b_batch = tuple(a.shape[:nb]), tuple(b.shape[:nb])
    k = _numel(a.shape[nb + len(left):])
    a = a.reshape(a_batch + (_numel(a.shape[nb:nb + len(left)]), k))
    b = b.reshape(b_batch + (k, _numel(b.shape[nb + len(shared):])))
    out = a @ b
    out_batch = tuple(builtins.max(p, q) for p, q in zip(a_batch, b_batch))
    out = out.reshape(out_batch + tuple(sizes[c] for c in left) + tuple(sizes[c] for c in right))
    return out, "".join(batch + left + right)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _einsum_args(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise TypeError(f"einsum(): operand {i} must be a Tensor, not {type(x).__name__}")
    _check_sizes(_parse(equation, operands)[0], operands)
    return tuple(operands), {"equation": equation}


@op(bind=_einsum_args, variadic=True, exposed=("plugtorch",))
def einsum(operands, *, equation):
    """Einstein summation, e.g. einsum('bij,bjk->bik', a, b); '...' broadcasts leading dims.

    A kernel receives the operands as a list of arrays and ``equation`` by keyword.
    """
    labelled, out = _parse(equation, operands)
    sizes = _check_sizes(labelled, operands)
    xs = []
    for k, (x, t) in enumerate(zip(operands, labelled)):
        x, t = _diagonal(x, t)
        needed = set(out).union(*(set(u) for j, u in enumerate(labelled) if j != k))
        drop = [i for i, c in enumerate(t) if c not in needed]
        if drop:
            x = x.sum(drop)
            t = "".join(c for c in t if c in needed)
        xs.append((x, t))
    acc, la = xs[0]
    for k in range(1, len(xs)):
        b, lb = xs[k]
        keep = set(out).union(*(set(u) for _, u in xs[k + 1:]))
        acc, la = _contract(acc, la, b, lb, keep, sizes)
    return acc.permute([la.index(c) for c in out]) if la != out else acc
