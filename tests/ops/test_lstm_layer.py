"""lstm_layer and lstm_layer_backward: the NumPy backend's kernels (the time loop as one call;
each step's gate arithmetic in NumPy passes or one C pass) against the ops' decompositions,
the loop written in plugtorch ops. nn.LSTM against torch is tests/nn/test_rnn.py; the
conformance kit checks both ops against torch's ops and by gradcheck."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import rnn
from plugtorch_backends.numpy_backend.native import enabled as native_enabled

import plugtorch
from plugtorch.core.ops import recurrent

STEPS = {"numpy": rnn.make_kernels()}
if native_enabled():
    from plugtorch_backends.numpy_backend.native import rnn as native_rnn
    if native_rnn.make_kernels() is not None:
        STEPS["C"] = native_rnn.make_kernels()


def _operands(dtype, t=5, n=3, h=4, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in ((t, n, 4 * h), (n, h), (n, h), (4 * h, h), (4 * h,))]
    arrays[3] *= 0.5
    arrays = [a.astype(dtype) for a in arrays]
    if not bias:
        arrays[4] = None
    return arrays


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("steps", sorted(STEPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_kernels_equal_the_decompositions(steps, dtype, reverse, bias):
    kernels = STEPS[steps]
    arrays = _operands(dtype, bias=bias)
    state = kernels["lstm_layer"](*arrays, reverse=reverse)
    tensors = [None if a is None else plugtorch.tensor(a) for a in arrays]
    want = plugtorch.get_registry().ops["lstm_layer"].decompose(*tensors, reverse=reverse)
    np.testing.assert_allclose(state, want.numpy(), **_tol(dtype))

    grad = np.random.default_rng(1).standard_normal(state.shape).astype(dtype)  # every row, the gates' too
    got = kernels["lstm_layer_backward"](grad, arrays[2], arrays[3], state, reverse=reverse)
    want = plugtorch.get_registry().ops["lstm_layer_backward"].decompose(
        plugtorch.tensor(grad), tensors[2], tensors[3], plugtorch.tensor(state), reverse=reverse)
    np.testing.assert_allclose(got, want.numpy(), **_tol(dtype))


def test_the_layer_is_one_node_and_its_gradients_are_the_decompositions():
    arrays = _operands(np.float64)
    ours = [plugtorch.tensor(a, requires_grad=True) for a in arrays]
    ref = [plugtorch.tensor(a, requires_grad=True) for a in arrays]
    state = recurrent.lstm_layer(*ours, reverse=False)
    assert state.grad_fn.name() == "LstmLayerBackward0"
    want = plugtorch.get_registry().ops["lstm_layer"].decompose(*ref, reverse=False)
    up = plugtorch.tensor(np.random.default_rng(2).standard_normal(tuple(state.shape)))
    (state * up).sum().backward()
    (want * up).sum().backward()
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_bad_operands_are_named():
    xw, h0, c0, w, b = (plugtorch.tensor(a) for a in _operands(np.float64))
    with pytest.raises(RuntimeError, match=r"lstm_layer: weight_hh must be \(4 \* hidden_size, hidden_size\)"):
        recurrent.lstm_layer(xw, h0, c0, w.t(), b)
    with pytest.raises(RuntimeError, match="lstm_layer: input and parameter tensors are not the same dtype"):
        recurrent.lstm_layer(xw.float(), h0, c0, w, b)
    with pytest.raises(RuntimeError, match=r"lstm_layer: h0 must be \(N, hidden_size\)"):
        recurrent.lstm_layer(xw, h0[:2], c0, w, b)
    with pytest.raises(RuntimeError, match=r"lstm_layer: c0 must be \(N, hidden_size\)"):
        recurrent.lstm_layer(xw, h0, c0[:2], w, b)
    with pytest.raises(TypeError, match="argument 'c0' must be Tensor"):
        recurrent.lstm_layer(xw, h0, None, w, b)


@pytest.mark.skipif("C" not in STEPS, reason="the C steps (the _rnn extension) are not built here")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_c_steps_split_over_two_threads_give_the_same_bits(dtype, two_threads):
    """A step's batch rows split over the native kernels' pool (_rnn's run_step): the same values
    with one thread and two, and the two-thread call did split."""
    from plugtorch_backends.numpy_backend import native
    from threadpoolctl import threadpool_limits
    r = np.random.default_rng(3)
    steps, batch, hidden = 4, 16, 256  # 4096 cells a step: two jobs' worth
    ig = r.standard_normal((steps, batch, 4 * hidden)).astype(dtype)
    h0, c0 = (r.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    w = (r.standard_normal((4 * hidden, hidden)) / 16).astype(dtype)
    grad = r.standard_normal((6, steps, batch, hidden)).astype(dtype)

    def both():
        state = STEPS["C"]["lstm_layer"](ig, h0, c0, w, None, reverse=False)
        return state, STEPS["C"]["lstm_layer_backward"](grad, c0, w, state, reverse=False)

    with threadpool_limits(limits=1, user_api="blas"):
        one = both()
    with two_threads():
        calls = native._kernels.pool_info()[2]
        two = both()
        assert native._kernels.pool_info()[2] - calls >= 2 * steps  # every step split (and the products)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def _counted(fn, calls):
    def counted(*args):
        calls.append(fn.__name__)
        return fn(*args)
    return counted


@pytest.mark.skipif("C" not in STEPS, reason="the C steps (the _rnn extension) are not built here")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_the_c_layer_loops_give_the_bits_of_the_loop_over_c_steps(dtype, reverse, bias):
    """Where the native product takes a step's products (gemm.takes), the whole time loop runs in C
    (_rnn.lstm_forward_layer / lstm_backward_layer, the input gates and bias added in the gate pass):
    the same bits as the Python loop over the C steps, and the decompositions' values."""
    from plugtorch_backends.numpy_backend.native import _rnn, gemm
    t, n, h = 6, 16, 128  # both products ~1M multiply-adds: the native kernel's (gemm.MIN_MACS)
    plugtorch.zeros(1)  # the NumPy backend registered: OpenBLAS's jobs on the native pool (gemm.takes asks)
    if not (gemm.takes(n, h, 4 * h) and gemm.takes(n, 4 * h, h)):
        pytest.skip(f"the native product does not take these shapes here ({gemm.STATUS})")
    calls: list = []
    layers = rnn.make_kernels(_rnn.lstm_forward_step, _rnn.lstm_backward_step,
                              _counted(_rnn.lstm_forward_layer, calls), _counted(_rnn.lstm_backward_layer, calls))
    steps = rnn.make_kernels(_rnn.lstm_forward_step, _rnn.lstm_backward_step)
    arrays = _operands(dtype, t=t, n=n, h=h, bias=bias, seed=4)
    arrays[3] /= 8  # weight_hh: keep the gates off saturation, so every gradient term counts
    state = layers["lstm_layer"](*arrays, reverse=reverse)
    np.testing.assert_array_equal(state, steps["lstm_layer"](*arrays, reverse=reverse))
    grad = np.random.default_rng(5).standard_normal(state.shape).astype(dtype)
    got = layers["lstm_layer_backward"](grad, arrays[2], arrays[3], state, reverse=reverse)
    np.testing.assert_array_equal(got, steps["lstm_layer_backward"](grad, arrays[2], arrays[3], state, reverse=reverse))
    assert calls == ["lstm_forward_layer", "lstm_backward_layer"]

    tensors = [None if a is None else plugtorch.tensor(a) for a in arrays]
    ops = plugtorch.get_registry().ops
    np.testing.assert_allclose(state, ops["lstm_layer"].decompose(*tensors, reverse=reverse).numpy(), **_tol(dtype))
    want = ops["lstm_layer_backward"].decompose(plugtorch.tensor(grad), tensors[2], tensors[3], plugtorch.tensor(state),
                                                reverse=reverse)
    np.testing.assert_allclose(got, want.numpy(), **_tol(dtype))


@pytest.mark.skipif("C" not in STEPS, reason="the C steps (the _rnn extension) are not built here")
def test_the_c_layer_loops_refuse_operands_that_do_not_fit():
    from plugtorch_backends.numpy_backend.native import _rnn
    ig, h0, c0, w, b = _operands(np.float32, t=2, n=3, h=4)
    state = np.empty((6, 2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"lstm_forward_layer: shapes do not match state \(6, T, N, H\)"):
        _rnn.lstm_forward_layer(ig, h0, c0, w, b, state, False)  # w, not its transpose
    with pytest.raises(ValueError, match="lstm kernel: bias_hh must be a 1-d C-contiguous float32/float64 array "
                                         "of the others' dtype"):
        _rnn.lstm_forward_layer(ig, h0, c0, np.ascontiguousarray(w.T), b.astype(np.float64), state, False)
    out = np.empty((3, 3, 16), np.float32)
    with pytest.raises(ValueError, match=r"lstm_backward_layer: shapes do not match state \(6, T, N, H\)"):
        _rnn.lstm_backward_layer(state, state, c0, w, out[:2], False)
    with pytest.raises(ValueError, match="not C-contiguous"):  # the buffer protocol's refusal
        _rnn.lstm_backward_layer(state, state, c0, w.T, out, False)
