"""Activations whose ``nn.functional`` form differs from the op: ``relu`` and ``tanh`` take
``inplace`` / are spelled here, the op itself is ``plugtorch.relu``.

The in-place forms compute from an alias of the old value (``core.ops.inplace``), so
autograd stays correct; they save no memory here.
"""
from __future__ import annotations

from ...core.ops import activation as _act
from ...core.ops import elementwise as _ew
from ...core.ops.inplace import inplace as _inplace

__all__ = ["relu", "relu_", "tanh"]


def relu(input, inplace: bool = False):
    """max(x, 0), optionally written into ``input``."""
    if inplace:
        return _inplace(_act.relu, "relu_")(input)
    return _act.relu(input)


def relu_(input):
    return relu(input, inplace=True)


def tanh(input):
    return _ew.tanh(input)
