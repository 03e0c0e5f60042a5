"""softsign(x) = x / (1 + |x|), added to plugtorch by a separately installed package.

It defines the op once (a decomposition into plugtorch ops plus its derivative,
so every backend can run and differentiate it) and a fused kernel for the NumPy
backend, which dispatch then prefers there.
"""
from __future__ import annotations

import plugtorch
from plugtorch.core.dispatch import call_op
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl
from plugtorch.core.registry import OpDef

PLUGTORCH_CONTRACT = CONTRACT_VERSION


def _decompose(x):
    return x / (1 + x.abs())


def _derivative(ctx, g):
    (x,) = ctx.saved
    d = 1 + x.abs()
    return g / (d * d)


def _samples(backend):
    """Inputs for plugtorch's conformance kit: (args, kwargs) pairs."""
    yield (plugtorch.tensor([[-2.0, -0.5, 0.25, 3.0]], dtype=plugtorch.float64, device=backend),), {}


SOFTSIGN = OpDef("softsign", decompose=_decompose, derivative=_derivative, save=("inputs",),
                 doc="x / (1 + |x|)", samples=_samples)


def softsign(x):
    return call_op(SOFTSIGN, (x,), {})


def _numpy_softsign(x):
    import numpy as np
    return x / (1 + np.abs(x))


@hookimpl
def plugtorch_register(registrar):
    registrar.add_op(SOFTSIGN)
    registrar.add_kernel("softsign", "numpy", _numpy_softsign)
