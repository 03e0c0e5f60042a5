"""Sample inputs for the conformance kit: what an op is called with, and what it should give.

An op's samples are a function ``samples(g) -> list`` (``OpDef.samples`` for a plugin's
own ops, or the built-in table in :mod:`plugtorch.testing.samples`). ``g`` is a
:class:`SampleGen` seeded from the op's name, so samples are the same on every run.
The list holds :class:`Sample` items and, where a check cannot apply to the op,
:class:`Waiver` items that say why.

Inputs are NumPy arrays (float64 for real values): the kit turns them into tensors
on the backend under test, and into ``torch`` tensors for the reference.
"""
from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..core.opdef import OpDef


@dataclass
class Sample:
    """One call of an op, with its expected behaviour.

    inputs:     positional inputs. NumPy arrays become tensors (lists/tuples of arrays become
                lists of tensors); anything else is passed through unchanged.
    call:       ``call(m, *inputs)``, where ``m`` is the ``plugtorch`` module or the ``torch``
                module, so one lambda usually serves both (``lambda m, x: m.exp(x)``). Default:
                ``m.<op name>(*inputs, **kwargs)``.
    kwargs:     keyword arguments for the default call.
    torch_call: ``torch_call(torch, *inputs)`` where the torch spelling differs from ``call``;
                returning ``NotImplemented`` (torch has no such op) leaves the NumPy ``ref``.
    ref:        NumPy reference ``ref(*inputs) -> array or tuple of arrays`` on the float64
                inputs, used when torch is absent (and checked as well when it is present).
    grad:       the op is differentiable with respect to this sample's floating inputs:
                gradcheck in float64, compared with torch's gradient, and the output must
                require grad.
    grad_inputs: which positional inputs to differentiate (default: every floating array).
    gradgrad:   also run gradgradcheck on this (small) sample; False at points where the op is
                differentiable once but not twice (ties of max, a zero norm).
    numerical:  check the gradient by finite differences; False where they cannot resolve it
                (a cast to float32), leaving the comparison with torch's gradient.
    raises:     the inputs are invalid; the op must raise this exception type (and torch,
                where installed, must raise too).
    mutates:    positions of inputs the op writes into by design (batch_norm's running
                statistics in training): they are compared with torch's inputs after torch's
                call instead of with their old values (unchecked without torch).
    """

    inputs: tuple
    call: Callable | None = None
    kwargs: dict = field(default_factory=dict)
    torch_call: Callable | None = None
    ref: Callable | None = None
    grad: bool = True
    grad_inputs: tuple | None = None
    gradgrad: bool = True
    numerical: bool = True
    raises: type | tuple | None = None
    mutates: tuple = ()
    atol: float = 1e-9
    rtol: float = 1e-7
    desc: str = ""

    def __post_init__(self) -> None:
        # NumPy scalars (np.floor(0-d array)) would pass through as numbers, not tensors
        self.inputs = tuple(np.asarray(v) if isinstance(v, np.generic) else v for v in self.inputs)

    def arrays(self) -> list:
        """Every NumPy array among the inputs (one level of lists included)."""
        out = []
        for v in self.inputs:
            if isinstance(v, np.ndarray):
                out.append(v)
            elif isinstance(v, (list, tuple)):
                out.extend(a for a in v if isinstance(a, np.ndarray))
        return out

    @property
    def zero_dim(self) -> bool:
        return any(a.ndim == 0 for a in self.arrays())

    @property
    def empty(self) -> bool:
        return any(a.size == 0 for a in self.arrays())

    def label(self) -> str:
        if self.desc:
            return self.desc
        shapes = ",".join("x".join(map(str, a.shape)) or "0d" for a in self.arrays())
        return f"{shapes}{'-raises' if self.raises else ''}"


@dataclass
class Waiver:
    """A check that cannot apply to this op, and why (e.g. an op defined only on 4-D input)."""

    check: str  # "zero_dim", "empty" or "grad"
    reason: str


class SampleGen:
    """Deterministic input arrays for one op's samples."""

    def __init__(self, op_name: str) -> None:
        self._rng = np.random.default_rng(zlib.crc32(op_name.encode()))

    def randn(self, *shape: int) -> np.ndarray:
        return np.asarray(self._rng.standard_normal(shape), dtype=np.float64)

    def uniform(self, *shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
        return np.asarray(self._rng.uniform(low, high, shape), dtype=np.float64)

    def positive(self, *shape: int, low: float = 0.2, high: float = 2.0) -> np.ndarray:
        return self.uniform(*shape, low=low, high=high)

    def away(self, *shape: int, low: float = 0.2, high: float = 1.5) -> np.ndarray:
        """Values with |x| in [low, high]: away from the kinks of abs, relu, sign, ..."""
        mag = self.uniform(*shape, low=low, high=high)
        sign = np.where(self._rng.random(shape) < 0.5, -1.0, 1.0)
        return np.asarray(mag * sign, dtype=np.float64)

    def distinct(self, *shape: int) -> np.ndarray:
        """Values with no ties (for max/min/sort-like ops whose gradient splits ties)."""
        n = int(np.prod(shape)) if shape else 1
        vals = (self._rng.permutation(n) + self._rng.uniform(0.1, 0.4, n)) / n * 2 - 1
        return np.asarray(vals.reshape(shape), dtype=np.float64)

    def ints(self, *shape: int, low: int = 0, high: int = 5) -> np.ndarray:
        return np.asarray(self._rng.integers(low, high, shape), dtype=np.int64)

    def bools(self, *shape: int) -> np.ndarray:
        return np.asarray(self._rng.random(shape) < 0.5)


def samples_for(opdef: OpDef, table: dict | None = None) -> list:
    """The op's samples: ``opdef.samples`` if the op brings its own, else the built-in table's."""
    fn = opdef.samples
    if fn is None:
        if table is None:
            from .samples import SAMPLES
            table = SAMPLES
        fn = table.get(opdef.name)
    if fn is None:
        return []
    return list(fn(SampleGen(opdef.name)))


def is_torch(m: Any) -> bool:
    """True when a sample's ``call`` is running against the torch reference."""
    return getattr(m, "__name__", "") == "torch"
