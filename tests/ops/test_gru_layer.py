"""gru_layer and gru_layer_backward: the NumPy backend's kernels (the time loop as one call)
against the ops' decompositions, the layer's rule against autograd through its decomposition,
and nn.GRU, which runs on the op, against torch's nn.GRU (outputs, final state, every
gradient). The conformance kit checks both ops against torch's ops and by gradcheck."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from plugtorch_backends.numpy_backend import rnn

import plugtorch
from plugtorch.core.ops import recurrent


def _operands(dtype, t=5, n=3, h=4, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in ((t, n, 3 * h), (n, h), (3 * h, h), (3 * h,))]
    arrays[2] *= 0.5
    arrays = [a.astype(dtype) for a in arrays]
    if not bias:
        arrays[3] = None
    return arrays


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


def _decompose(name, *args, **attrs):
    return plugtorch.get_registry().ops[name].decompose(*args, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_kernels_equal_the_decompositions(dtype, reverse, bias):
    arrays = _operands(dtype, bias=bias)
    state = rnn.RNN_KERNELS["gru_layer"](*arrays, reverse=reverse)
    tensors = [None if a is None else plugtorch.tensor(a) for a in arrays]
    want = _decompose("gru_layer", *tensors, reverse=reverse)
    np.testing.assert_allclose(state, want.numpy(), **_tol(dtype))

    grad = np.random.default_rng(1).standard_normal(state.shape).astype(dtype)  # every row, the gates' too
    got = rnn.RNN_KERNELS["gru_layer_backward"](grad, arrays[1], arrays[2], state, reverse=reverse)
    want = _decompose("gru_layer_backward", plugtorch.tensor(grad), tensors[1], tensors[2],
                      plugtorch.tensor(state), reverse=reverse)
    np.testing.assert_allclose(got, want.numpy(), **_tol(dtype))


@pytest.mark.parametrize("reverse", [False, True])
def test_the_layer_is_one_node_and_its_gradients_are_autograds_through_the_loop(reverse):
    arrays = _operands(np.float64)
    ours = [plugtorch.tensor(a, requires_grad=True) for a in arrays]
    ref = [plugtorch.tensor(a, requires_grad=True) for a in arrays]
    state = recurrent.gru_layer(*ours, reverse=reverse)
    assert state.grad_fn.name() == "GruLayerBackward0"
    want = _decompose("gru_layer", *ref, reverse=reverse)  # differentiated op by op
    np.testing.assert_allclose(state.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-13)
    up = plugtorch.tensor(np.random.default_rng(2).standard_normal(tuple(state.shape)))
    (state * up).sum().backward()
    (want * up).sum().backward()
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("layers, bidirectional", [(1, False), (2, False), (1, True), (2, True)])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
def test_nn_gru_matches_torch_values_and_gradients(layers, bidirectional, batch_first, with_h0):
    torch.manual_seed(0)
    ref = torch.nn.GRU(3, 5, layers, bidirectional=bidirectional, batch_first=batch_first)
    ours = plugtorch.nn.GRU(3, 5, layers, bidirectional=bidirectional, batch_first=batch_first)
    ours.load_state_dict({k: plugtorch.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6, 3) if batch_first else (6, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((layers * (1 + bidirectional), 2, 5)).astype(np.float32)
    tx, px = torch.tensor(x, requires_grad=True), plugtorch.tensor(x, requires_grad=True)
    th, ph = torch.tensor(h0, requires_grad=True), plugtorch.tensor(h0, requires_grad=True)
    t_out, t_h = ref(tx, th) if with_h0 else ref(tx)
    p_out, p_h = ours(px, ph) if with_h0 else ours(px)
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p_out.detach().numpy(), t_out.detach().numpy(), **tol)
    np.testing.assert_allclose(p_h.detach().numpy(), t_h.detach().numpy(), **tol)
    up_out = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    up_h = rng.standard_normal(tuple(t_h.shape)).astype(np.float32)
    ((t_out * torch.tensor(up_out)).sum() + (t_h * torch.tensor(up_h)).sum()).backward()
    ((p_out * plugtorch.tensor(up_out)).sum() + (p_h * plugtorch.tensor(up_h)).sum()).backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), **tol)
    if with_h0:
        np.testing.assert_allclose(ph.grad.numpy(), th.grad.numpy(), **tol)
    named = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), named[name].grad.numpy(), **tol, err_msg=name)


def test_nn_gru_runs_the_op(monkeypatch):
    import plugtorch.nn.modules.rnn as rnn_module
    calls = []
    real = rnn_module.gru_layer
    monkeypatch.setattr(rnn_module, "gru_layer", lambda *a, **k: (calls.append(k["reverse"]), real(*a, **k))[1])
    plugtorch.nn.GRU(3, 4, 2, bidirectional=True)(plugtorch.randn(5, 2, 3))
    assert calls == [False, True, False, True]


def test_bad_operands_are_named():
    xw, h0, w, b = (plugtorch.tensor(a) for a in _operands(np.float64))
    with pytest.raises(RuntimeError, match=r"gru_layer: weight_hh must be \(3 \* hidden_size, hidden_size\)"):
        recurrent.gru_layer(xw, h0, w.t(), b)
    with pytest.raises(RuntimeError, match="gru_layer: input and parameter tensors are not the same dtype"):
        recurrent.gru_layer(xw.float(), h0, w, b)
    with pytest.raises(RuntimeError, match=r"h0 must be \(N, hidden_size\) = \[3, 4\], got \[2, 4\]"):
        recurrent.gru_layer(xw, h0[:2], w, b)
    with pytest.raises(RuntimeError, match=r"input_gates must be \(T, N, 3 \* hidden_size\)"):
        recurrent.gru_layer(xw[..., :-1], h0, w, b)
    with pytest.raises(TypeError, match="argument 'h0' must be Tensor"):
        recurrent.gru_layer(xw, None, w, b)
    state = recurrent.gru_layer(xw, h0, w, b)
    with pytest.raises(RuntimeError, match=r"gru_layer_backward: state and grad_state must be one \(5, T, N, H\)"):
        recurrent.gru_layer_backward(state[:4], h0, w, state)


def test_second_derivatives_by_gradgradcheck():
    rng = np.random.default_rng(5)
    operands = [plugtorch.tensor(rng.standard_normal(s), requires_grad=True)
                for s in ((3, 2, 6), (2, 2), (6, 2), (6,))]
    assert plugtorch.autograd.gradgradcheck(lambda *a: recurrent.gru_layer(*a, reverse=True), operands)


def test_a_compiled_gru_training_step_replays_eagers_values_bitwise():
    def train(compiled):
        plugtorch.manual_seed(0)
        gru, head = plugtorch.nn.GRU(4, 6, 2, bidirectional=True), plugtorch.nn.Linear(12, 1)
        params = [*gru.parameters(), *head.parameters()]
        opt = plugtorch.optim.AdamW(params, lr=1e-2)
        x, y = plugtorch.randn(5, 3, 4), plugtorch.randn(5, 3, 1)

        def step():
            opt.zero_grad()
            loss = ((head(gru(x)[0]) - y) ** 2).mean()
            loss.backward()
            opt.step()
        run = plugtorch.compile(step) if compiled else step
        for _ in range(5):
            run()
        return [p.detach().numpy().copy() for p in params], run

    eager, _ = train(False)
    compiled, run = train(True)
    assert run.captures == 1 and run.replays == 3
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)
