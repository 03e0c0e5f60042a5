"""Eager per-op overhead: plugtorch vs raw NumPy vs PyTorch on tiny (8, 8) float32 tensors.

The target: plugtorch's per-op time at most 1.5x PyTorch's on the same machine
(benchmarks/RESULTS.md has the figures).
"""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch

SHAPE = (8, 8)


def _torch():
    return pytest.importorskip("torch", reason="PyTorch is the comparison peer; pip install torch==2.13.0")


@pytest.mark.benchmark(group="add (8,8) requires_grad")
def test_add_plugtorch(benchmark):
    a = plugtorch.randn(*SHAPE, requires_grad=True)
    b = plugtorch.randn(*SHAPE, requires_grad=True)
    benchmark(lambda: a + b)


@pytest.mark.benchmark(group="add (8,8) requires_grad")
def test_add_numpy(benchmark):
    a = np.random.randn(*SHAPE).astype(np.float32)
    b = np.random.randn(*SHAPE).astype(np.float32)
    benchmark(lambda: a + b)


@pytest.mark.benchmark(group="add (8,8) requires_grad")
def test_add_torch(benchmark):
    torch = _torch()
    a = torch.randn(*SHAPE, requires_grad=True)
    b = torch.randn(*SHAPE, requires_grad=True)
    benchmark(lambda: a + b)


@pytest.mark.benchmark(group="add_ (8,8) in place, no graph")
def test_add_inplace_plugtorch(benchmark):
    a = plugtorch.zeros(*SHAPE)
    b = plugtorch.randn(*SHAPE) * 1e-3
    benchmark(a.add_, b)


@pytest.mark.benchmark(group="add_ (8,8) in place, no graph")
def test_add_inplace_numpy(benchmark):
    a = np.zeros(SHAPE, np.float32)
    b = (np.random.randn(*SHAPE) * 1e-3).astype(np.float32)
    benchmark(lambda: np.add(a, b, out=a))


@pytest.mark.benchmark(group="add_ (8,8) in place, no graph")
def test_add_inplace_torch(benchmark):
    torch = _torch()
    a = torch.zeros(*SHAPE)
    b = torch.randn(*SHAPE) * 1e-3
    benchmark(a.add_, b)


def _chain(a, b):
    """10 ops (alternating add and mul+tanh), a sum, and backward."""
    y = a
    for i in range(10):
        y = (y * b).tanh() if i % 2 else y + b
    y.sum().backward()


@pytest.mark.benchmark(group="10-op chain fwd+bwd (8,8)")
def test_chain_plugtorch(benchmark):
    a = plugtorch.randn(*SHAPE, requires_grad=True)
    b = plugtorch.randn(*SHAPE, requires_grad=True)
    benchmark(_chain, a, b)


@pytest.mark.benchmark(group="10-op chain fwd+bwd (8,8)")
def test_chain_torch(benchmark):
    torch = _torch()
    a = torch.randn(*SHAPE, requires_grad=True)
    b = torch.randn(*SHAPE, requires_grad=True)
    benchmark(_chain, a, b)


def _numpy_chain(a, b):
    """The same computation with a hand-written backward in raw NumPy (the floor)."""
    tape = []
    y = a
    for i in range(10):
        if i % 2:
            m = y * b
            t = np.tanh(m)
            tape.append(("mt", y, t))
            y = t
        else:
            tape.append(("add", None, None))
            y = y + b
    g = np.ones_like(y)
    ga, gb = None, np.zeros_like(b)
    for kind, inp, out in reversed(tape):
        if kind == "add":
            gb += g
        else:
            gm = g * (1 - out * out)
            gb += gm * inp
            g = gm * b
    ga = g
    return ga, gb


@pytest.mark.benchmark(group="10-op chain fwd+bwd (8,8)")
def test_chain_numpy(benchmark):
    a = np.random.randn(*SHAPE).astype(np.float32)
    b = np.random.randn(*SHAPE).astype(np.float32)
    benchmark(_numpy_chain, a, b)
