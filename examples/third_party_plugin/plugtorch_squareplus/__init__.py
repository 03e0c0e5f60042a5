"""squareplus(x, b=4) = (x + sqrt(x*x + b)) / 2, added to plugtorch by a separately installed package.

A smooth ReLU (So, 2021) that plugtorch itself does not ship. The package defines
the op once (a decomposition into plugtorch ops plus its derivative, so every
backend can run and differentiate it), gives the conformance kit its samples, and
registers a fused kernel for the NumPy backend, which dispatch then prefers there.
"""
from __future__ import annotations

import numpy as np

from plugtorch.core.dispatch import call_op
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl
from plugtorch.core.registry import OpDef

PLUGTORCH_CONTRACT = CONTRACT_VERSION


def _decompose(x, *, b):
    return (x + (x * x + b).sqrt()) / 2


def _derivative(ctx, g):
    (x,) = ctx.saved
    b = ctx.attrs["b"]
    return g * (1 + x / (x * x + b).sqrt()) / 2


def _reference(x, b=4.0):
    return (x + np.sqrt(x * x + b)) / 2


def _samples(g):
    """Inputs for plugtorch's conformance kit (torch has no squareplus: NumPy is the reference)."""
    from plugtorch.testing import Sample
    ours = lambda m, x: squareplus(x)
    no_torch = lambda m, x: NotImplemented
    return [
        Sample((g.randn(3, 4),), ref=_reference, call=ours, torch_call=no_torch),
        Sample((np.asarray(-1.5),), ref=_reference, call=ours, torch_call=no_torch, desc="0-d"),
        Sample((np.zeros((0, 2)),), ref=_reference, call=ours, torch_call=no_torch, desc="empty"),
    ]


def squareplus(input, b=4.0):
    """(x + sqrt(x*x + b)) / 2, a smooth ReLU."""
    # dispatch reads the op's current definition: an override by another plugin applies here too
    return call_op("squareplus", (input,), {"b": float(b)})


# The whole op, declared once: its function, its decomposition (what runs on a backend
# without a kernel of its own), its derivative and what that reads, its samples.
SQUAREPLUS = OpDef("squareplus", function=squareplus, decompose=_decompose, derivative=_derivative,
                   save=("inputs",), samples=_samples)


def _numpy_squareplus(x, *, b):
    # a kernel receives the operand as a native array and the attrs by keyword
    return ((x + np.sqrt(x * x + b)) / 2).astype(x.dtype, copy=False)


@hookimpl
def plugtorch_register(registrar):
    registrar.add_op(SQUAREPLUS)
    registrar.add_kernel("squareplus", "numpy", _numpy_squareplus)
