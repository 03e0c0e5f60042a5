"""Forward derivatives (``OpDef.jvp``) that many ops share, each a few lines of plugtorch ops.

``jvp(primals, tangents, output, attrs)`` gives the output's tangent, ``tangents`` holding one
per operand (None where the operand has none). Most ops fall into one of three shapes:

* ``linear(name)``: the op is linear in its floating operands together (a view, a reduction by
  sum, a join, a cast), so its JVP is the op applied to the tangents (zeros where an operand has
  none; index, mask and number operands stay as they are);
* ``multilinear(name, bias=k)``: linear in each operand apart (matmul, conv): the sum of the op
  with one operand at a time replaced by its tangent, and an additive operand's (bias) tangent;
* ``diagonal(rule)``: an elementwise op, whose Jacobian for each operand is diagonal once the
  operand is broadcast: J t is its reverse rule applied to t.
"""
from __future__ import annotations

from collections.abc import Callable

from ..dispatch import call_op
from ..tensor import Tensor

__all__ = ["linear", "multilinear", "diagonal"]


def _zeros_where_none(primals, tangents):
    return tuple(t if t is not None else (p.new_zeros(p.shape) if _floating(p) else p)
                 for p, t in zip(primals, tangents))


def _floating(p) -> bool:
    return isinstance(p, Tensor) and p.dtype.is_floating_point


def linear(name: str) -> Callable:
    """The JVP of an op linear in its floating operands together: the op of the tangents."""
    def jvp(primals, tangents, out, attrs):
        return call_op(name, _zeros_where_none(primals, tangents), attrs)
    jvp.__qualname__ = f"linear({name!r})"
    return jvp


def multilinear(name: str, bias: int | None = None, channel_dim: int = -1) -> Callable:
    """The JVP of an op linear in each operand apart, and in operand ``bias`` (or None), which is
    added along the output's ``channel_dim`` (a conv's dim 1, a linear layer's last)."""
    def jvp(primals, tangents, out, attrs):
        total = None
        for i, t in enumerate(tangents):
            if t is None or i == bias:
                continue
            args = list(primals)
            args[i] = t
            if bias is not None:
                args[bias] = None
            term = call_op(name, tuple(args), attrs)
            total = term if total is None else total + term
        if bias is not None and tangents[bias] is not None:
            tb = tangents[bias]
            if channel_dim != -1:
                tb = tb.reshape((-1,) + (1,) * (out.ndim - 1 - channel_dim))
            total = tb.expand(out.shape) if total is None else total + tb
        return total
    jvp.__qualname__ = f"multilinear({name!r})"
    return jvp


class _Ctx:
    """What a reverse rule reads of its graph node, for :func:`diagonal`."""

    __slots__ = ("saved", "output", "attrs", "needs_input_grad", "meta", "next")

    def __init__(self, saved, output, attrs, needs):
        self.saved, self.output, self.attrs, self.needs_input_grad = saved, output, attrs, needs
        self.meta = tuple((p.shape, p.dtype) if isinstance(p, Tensor) else None for p in saved)
        self.next = needs


def diagonal(rule: Callable) -> Callable:
    """The JVP of an elementwise op from its reverse rule ``rule(ctx, grad)``: per operand, the
    rule applied to the operand's tangent broadcast to the output (a diagonal Jacobian is its own
    transpose), summed over the operands."""
    def jvp(primals, tangents, out, attrs):
        total = None
        for i, t in enumerate(tangents):
            if t is None:
                continue
            needs = tuple(j == i for j in range(len(primals)))
            if tuple(t.shape) != tuple(out.shape):
                t = t.expand(out.shape)
            term = rule(_Ctx(tuple(primals), out, attrs, needs), t)
            if isinstance(term, (tuple, list)):
                term = term[i]
            if term is not None:
                total = term if total is None else total + term
        return total
    jvp.__qualname__ = f"diagonal({getattr(rule, '__qualname__', 'rule')})"
    return jvp
