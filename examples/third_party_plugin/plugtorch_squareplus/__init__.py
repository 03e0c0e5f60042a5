"""squareplus(x, b=4) = (x + sqrt(x*x + b)) / 2, added to plugtorch by a separately installed package.

A smooth ReLU (So, 2021) that plugtorch itself does not ship, written on the public
plugin API, ``plugtorch.library``: the op is a function on the backend's arrays, so it
runs on every backend whose arrays follow the array API standard; its derivative is
written with plugtorch ops, so gradients of every order work; its samples let
``pytest --plugtorch-conformance`` check it; and a fused kernel serves it on NumPy.

Installed, it is ``plugtorch.ops.squareplus.squareplus`` (and ``squareplus`` here).
"""
from __future__ import annotations

import numpy as np

import plugtorch
from plugtorch import library

__version__ = "0.2.0"

# The plugin contract this package was written for (a number, not library.CONTRACT_VERSION,
# which is whatever the installed plugtorch implements): a plugtorch implementing another
# refuses the package, saying so, instead of failing somewhere inside it.
PLUGTORCH_CONTRACT = 1
lib = library.Library("squareplus", contract=PLUGTORCH_CONTRACT)


@lib.custom_op("squareplus", mutates_args=())
def squareplus(x: plugtorch.Tensor, b: float = 4.0) -> plugtorch.Tensor:
    """(x + sqrt(x*x + b)) / 2, a smooth ReLU."""
    xp = x.__array_namespace__()  # the backend's own array namespace (NumPy, CuPy, array_api_strict, ...)
    return (x + xp.sqrt(x * x + b)) / 2


@squareplus.register_autograd
def _squareplus_backward(ctx, grad):
    x, b = ctx.inputs["x"], ctx.inputs["b"]
    return grad * (1 + x / (x * x + b).sqrt()) / 2, None  # no gradient for b, a number


@squareplus.register_kernel("numpy")
def _squareplus_numpy(x, b=4.0):
    # one array, updated in place, instead of the four temporaries the expression above makes
    out = np.square(x, out=np.empty_like(x))
    out += b
    np.sqrt(out, out=out)
    out += x
    out *= 0.5
    return out


def _reference(x, b=4.0):
    return (x + np.sqrt(x * x + b)) / 2


@squareplus.register_samples
def _samples(g):
    """What the conformance kit calls the op with: torch has no squareplus, so NumPy is the reference."""
    from plugtorch.testing import Sample
    return [
        Sample((g.randn(3, 4),), ref=_reference),
        Sample((g.randn(2, 5),), kwargs={"b": 0.5}, ref=lambda x: _reference(x, 0.5), desc="b=0.5"),
        Sample((np.asarray(-1.5),), ref=_reference, desc="0-d"),
        Sample((np.zeros((0, 2)),), ref=_reference, desc="empty"),
    ]


class Squareplus(plugtorch.nn.Module):
    """squareplus as a layer, for ``nn.Sequential``."""

    def __init__(self, b: float = 4.0):
        super().__init__()
        self.b = b

    def forward(self, x):
        return squareplus(x, self.b)

    def extra_repr(self) -> str:
        return f"b={self.b}"


__all__ = ["PLUGTORCH_CONTRACT", "Squareplus", "lib", "squareplus"]
