"""The CuPy backend's lstm_layer and lstm_layer_backward (one GEMM and one ``kernels/lstm.cu``
launch a step), the step kernels run on the CPU from the same CUDA source (``cpu_load``),
against the NumPy backend's kernels for the ops in their packed layouts: both directions, with
and without bias_hh, ragged sizes (N * H not a multiple of a block, odd H, a grid of several
blocks), float32 and float64 within rounding (the GEMMs and tanh are other implementations),
float16, no steps, and nn.LSTM's training step through the registered ops."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import rnn_kernels

import plugtorch as pt

NUMPY = pt.get_registry().backends["numpy"].kernels
TOL = {np.float32: dict(rtol=1e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


@pytest.fixture(scope="module")
def kernels(cpu_load):
    return rnn_kernels.make_kernels(np, cpu_load)


def _operands(rng, steps, batch, hidden, dtype, bias=True):
    ig = rng.standard_normal((steps, batch, 4 * hidden)).astype(dtype)
    h0 = rng.standard_normal((batch, hidden)).astype(dtype)
    c0 = rng.standard_normal((batch, hidden)).astype(dtype)
    w = (rng.standard_normal((4 * hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
    b = rng.standard_normal(4 * hidden).astype(dtype) if bias else None
    return ig, h0, c0, w, b


# (T, N, H): one element; odd H; N * H = 35 (one ragged block); N * H = 561 (three blocks of 256)
SHAPES = [(1, 1, 1), (4, 3, 5), (3, 7, 5), (2, 3, 187)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_the_layer_and_its_gradient_equal_the_numpy_backend(kernels, dtype, reverse):
    rng = np.random.default_rng(0)
    for k, (steps, batch, hidden) in enumerate(SHAPES):
        ig, h0, c0, w, b = _operands(rng, steps, batch, hidden, dtype, bias=k % 2 == 0)
        got = kernels["lstm_layer"](ig, h0, c0, w, b, reverse=reverse)
        want = NUMPY["lstm_layer"](ig, h0, c0, w, b, reverse=reverse)
        assert got.dtype == want.dtype and got.shape == want.shape == (6, steps, batch, hidden)
        np.testing.assert_allclose(got, want, err_msg=f"lstm_layer {steps, batch, hidden}", **TOL[dtype])
        grad = rng.standard_normal(want.shape).astype(dtype)
        got = kernels["lstm_layer_backward"](grad, c0, w, want, reverse=reverse)
        want = NUMPY["lstm_layer_backward"](grad, c0, w, want, reverse=reverse)
        assert got.dtype == want.dtype and got.shape == want.shape == (steps + 1, batch, 4 * hidden)
        np.testing.assert_allclose(got, want, err_msg=f"lstm_layer_backward {steps, batch, hidden}", **TOL[dtype])


def test_strided_float16_and_empty_operands(kernels):
    rng = np.random.default_rng(1)
    ig, h0, c0, w, b = _operands(rng, 3, 2, 4, np.float64)
    # a (T, N, 4H) view of a batch-first array, and a transposed weight's transpose
    ig_view = np.ascontiguousarray(ig.swapaxes(0, 1)).swapaxes(0, 1)
    w_view = np.ascontiguousarray(w.T).T
    np.testing.assert_allclose(kernels["lstm_layer"](ig_view, h0, c0, w_view, b, reverse=False),
                               NUMPY["lstm_layer"](ig, h0, c0, w, b, reverse=False), rtol=1e-12, atol=1e-13)
    half = [a.astype(np.float16) for a in (ig, h0, c0, w, b)]
    got = kernels["lstm_layer"](*half, reverse=True)
    assert got.dtype == np.float16  # computed in float32, rounded once
    want = NUMPY["lstm_layer"](*[a.astype(np.float32) for a in half], reverse=True)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    state = kernels["lstm_layer"](ig[:0], h0, c0, w, b, reverse=False)
    assert state.shape == (6, 0, 2, 4)
    back = kernels["lstm_layer_backward"](state, c0, w, state, reverse=False)
    np.testing.assert_array_equal(back, np.zeros((1, 2, 16)))
    with pytest.raises(TypeError, match="lstm_layer: no CUDA kernel for int64"):
        kernels["lstm_layer"](*[a.astype(np.int64) for a in (ig, h0, c0, w)], None, reverse=False)


def test_nn_lstm_runs_on_these_kernels_as_registered(kernels, monkeypatch):
    """A 2-layer bidirectional nn.LSTM's outputs and gradients through the registered ops (keyword
    attrs as dispatch passes them) on these kernels equal the NumPy kernels'."""
    backend = pt.get_registry().backends["numpy"]

    def step():
        pt.manual_seed(0)
        lstm = pt.nn.LSTM(5, 7, num_layers=2, bidirectional=True)
        out, (h, c) = lstm(pt.randn(4, 3, 5))
        ((out * out).sum() + h.sum() + (c * c).sum()).backward()
        return [out.detach().numpy(), h.detach().numpy()] + [p.grad.numpy().copy() for p in lstm.parameters()]

    want = step()
    called = set()
    for name, fn in kernels.items():
        monkeypatch.setitem(backend.kernels, name, lambda *a, _f=fn, _n=name, **k: called.add(_n) or _f(*a, **k))
    got = step()
    assert called == {"lstm_layer", "lstm_layer_backward"}
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
