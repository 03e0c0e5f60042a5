"""Fusing chains of elementwise calls in a captured trace into one kernel, where a backend
offers a fuser (``Backend.elementwise_fuser``; the CuPy backend compiles each chain to one
CUDA kernel, the CPU counterpart of which is ``reuse.py``'s in-place chains).

A chain is a run of consecutive elementwise primitive calls of one result shape whose array
operands are either earlier links of the chain or C-contiguous arrays of that shape (or 0-d
arrays), and whose other operands are numbers. Every link but the last is a temporary only
the chain reads: the fused kernel computes it in registers and never stores it. A link that
something after the chain reads ends a chain of its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy

from .trace import _CONST, _SLOT, liveness


@dataclass(frozen=True)
class Chain:
    """What a fuser compiles. ``inputs``: (dtype name, is 0-d) of each array operand;
    ``ops``: (primitive name, operands, result dtype name) per link, the operands being the
    call's positional arguments, then its keyword arguments' values in order, each
    ``("in", k)`` (input k), ``("op", m)`` (link m's result) or ``("const", value)`` (a number,
    or a plugtorch dtype for ``cast``). The fused function takes the input arrays in order and
    returns a new C-contiguous array of ``shape`` holding the last link's result."""
    shape: tuple
    inputs: tuple
    ops: tuple


def _skipped():
    return None


def _link(step, call, slot_of_link, shape, inputs: list, input_specs: list):
    """The chain link for one recorded call, or None if it cannot be one (appending its new
    array operands to ``inputs``/``input_specs``)."""
    _fn, args, kwargs, refresh = step
    name, _, raw_args, raw_kwargs, result, _, _ = call
    if refresh is not None or not hasattr(result, "shape") or tuple(result.shape) != shape:
        return None
    if any(spec[0] != _CONST for _, spec in kwargs):
        return None
    operands: list[tuple[str, Any]] = []
    new_inputs: list[tuple[str, bool]] = []  # (dtype name, 0-d)
    new_specs: list = []
    for spec, value in zip(tuple(args) + tuple(s for _, s in kwargs), tuple(raw_args) + tuple(raw_kwargs.values())):
        if spec[0] == _SLOT and spec[2] is None and spec[1] in slot_of_link:
            operands.append(("op", slot_of_link[spec[1]]))
        elif spec[0] == _CONST and (not hasattr(value, "shape") or isinstance(value, numpy.generic)):
            operands.append(("const", value))
        elif hasattr(value, "shape") and hasattr(value, "flags"):
            if tuple(value.shape) not in (shape, ()) or not value.flags.c_contiguous:
                return None
            operands.append(("in", len(inputs) + len(new_inputs)))
            new_inputs.append((value.dtype.name, value.shape == ()))
            new_specs.append(spec)
        else:
            return None
    inputs.extend(new_inputs)
    input_specs.extend(new_specs)
    return (name, tuple(operands), result.dtype.name)


def fuse_elementwise(steps: list, calls: list, kept: list, names: list) -> tuple[list, list, int]:
    """``steps`` with each fusable chain replaced by one fused call at its last link's place
    (the other links do nothing), the step names updated, and how many chains were fused."""
    _, dies_at, forever = liveness(steps, kept)
    out, names, fused = list(steps), list(names), 0
    i = 0
    while i < len(steps):
        backend = calls[i][6]
        fuser = getattr(backend, "elementwise_fuser", None) if backend is not None else None
        if fuser is None:
            i += 1
            continue
        chain_end, chain = _longest_chain(steps, calls, i, backend, fuser, dies_at, forever)
        if chain is None:
            i += 1
            continue
        fn = fuser.build(chain[0])
        if fn is None:
            i += 1
            continue
        for j in range(i, chain_end):
            out[j] = (_skipped, (), (), None)
            names[j] = "-"
        out[chain_end] = (fn, tuple(chain[1]), (), None)
        names[chain_end] = "fused(" + ",".join(op[0] for op in chain[0].ops) + ")"
        fused += 1
        i = chain_end + 1
    return out, names, fused


def _longest_chain(steps, calls, start, backend, fuser, dies_at, forever):
    """(index of the last link, (Chain, input specs)) of the longest chain of at least two links
    starting at ``start``, or (start, None)."""
    result = calls[start][4]
    if not hasattr(result, "shape"):
        return start, None
    shape = tuple(result.shape)
    slot_of_link: dict[int, int] = {}
    inputs: list = []
    input_specs: list = []
    ops: list = []
    best = None
    i = start
    while i < len(steps) and calls[i][6] is backend:
        link = _link(steps[i], calls[i], slot_of_link, shape, inputs, input_specs)
        if link is None or not fuser.fusable(link[0], [_dtype_of(o, inputs, ops) for o in link[1]], link[2]):
            break
        slot_of_link[i] = len(ops)
        ops.append(link)
        # every link before i must be read by links up to i only
        if len(ops) >= 2 and all(dies_at.get(j, j) <= i and j not in forever for j in range(start, i)):
            best = (i, (Chain(shape, tuple(inputs), tuple(ops)), list(input_specs)))
        i += 1
    return (best[0], best[1]) if best is not None else (start, None)


def _dtype_of(operand, inputs, ops):
    kind, ref = operand
    if kind == "in":
        return inputs[ref][0]
    if kind == "op":
        return ops[ref][2]
    return operand  # ("const", value): a number takes the other operand's dtype, as NumPy's weak scalars do
