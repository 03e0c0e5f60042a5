"""RNN, LSTM and GRU against torch: a torch state_dict loads (same names and shapes) and gives
torch's outputs, final states and gradients, for every option combination below."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import plugtorch
from plugtorch import nn

from .helpers import copy_weights

OPTIONS = [dict(zip(("num_layers", "bidirectional", "batch_first", "bias"), v))
           for v in itertools.product((1, 2), (False, True), (False, True), (True, False))]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


def _states(kind, hx):
    return list(hx) if kind == "LSTM" else [hx]


def run_both(torch, kind, kwargs, batched=True, with_hx=True, L=4, N=3, seed=0):
    """Forward both modules on the same input (and initial states), backprop one upstream gradient;
    return (ours, theirs) output tensors, inputs and parameters for the caller to compare."""
    rng = np.random.default_rng(seed)
    theirs = getattr(torch.nn, kind)(5, 4, **kwargs).double()
    ours = getattr(nn, kind)(5, 4, **kwargs, dtype=plugtorch.float64)
    copy_weights(ours, theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    x = rng.standard_normal(((N, L, 5) if kwargs.get("batch_first") else (L, N, 5)) if batched else (L, 5))
    d = 2 if kwargs.get("bidirectional") else 1
    layers = d * kwargs.get("num_layers", 1)
    out = kwargs.get("proj_size") or 4
    states = []
    if with_hx:
        states.append(rng.standard_normal((layers, N, out) if batched else (layers, out)))
        if kind == "LSTM":
            states.append(rng.standard_normal((layers, N, 4) if batched else (layers, 4)))
    ins_p = [plugtorch.tensor(a, requires_grad=True) for a in [x] + states]
    ins_t = [torch.tensor(a, requires_grad=True) for a in [x] + states]
    hx_p = None if not states else (tuple(ins_p[1:]) if kind == "LSTM" else ins_p[1])
    hx_t = None if not states else (tuple(ins_t[1:]) if kind == "LSTM" else ins_t[1])
    y_p, h_p = ours(ins_p[0], hx_p)
    y_t, h_t = theirs(ins_t[0], hx_t)
    outs_p, outs_t = [y_p] + _states(kind, h_p), [y_t] + _states(kind, h_t)
    ups = [rng.standard_normal(tuple(o.shape)) for o in outs_t]
    sum((o * plugtorch.tensor(u)).sum() for o, u in zip(outs_p, ups)).backward()
    sum((o * torch.tensor(u)).sum() for o, u in zip(outs_t, ups)).backward()
    return ours, theirs, outs_p, outs_t, ins_p, ins_t


def check(torch, kind, kwargs, **kw):
    ours, theirs, outs_p, outs_t, ins_p, ins_t = run_both(torch, kind, kwargs, **kw)
    for a, b in zip(outs_p, outs_t):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-10)
    for a, b in zip(ins_p, ins_t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), atol=1e-10, err_msg=name)


@pytest.mark.parametrize("kwargs", OPTIONS, ids=_ids)
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_matches_torch(torch, kind, kwargs):
    check(torch, kind, kwargs, with_hx=kwargs["num_layers"] == 2)  # default and given initial states


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("with_hx", [False, True])
def test_unbatched(torch, kind, with_hx):
    check(torch, kind, dict(num_layers=2, bidirectional=True), batched=False, with_hx=with_hx)


def test_rnn_relu(torch):
    check(torch, "RNN", dict(nonlinearity="relu", num_layers=2, bidirectional=True))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_projection(torch, bidirectional):
    check(torch, "LSTM", dict(proj_size=2, num_layers=2, bidirectional=bidirectional))


def test_state_dict_names_and_shapes_are_torchs(torch):
    for kind, kw in [("LSTM", dict(num_layers=2, bidirectional=True, proj_size=3)), ("GRU", dict(bias=False))]:
        ours, theirs = getattr(nn, kind)(5, 4, **kw), getattr(torch.nn, kind)(5, 4, **kw)
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
            k: tuple(v.shape) for k, v in theirs.state_dict().items()}
        assert repr(ours) == repr(theirs)


def test_init_is_uniform_in_plus_minus_one_over_sqrt_hidden():
    m = nn.LSTM(3, 16, num_layers=2, generator=plugtorch.Generator().manual_seed(0))
    bound = 1 / 4
    for name, p in m.named_parameters():
        v = p.detach().numpy()
        assert v.min() >= -bound and v.max() <= bound and v.std() > bound / 3, name


def test_dropout_between_layers_only_in_training():
    x = plugtorch.randn(5, 2, 3)
    m = nn.GRU(3, 4, num_layers=3, dropout=0.5, generator=plugtorch.Generator().manual_seed(1))
    m.eval()
    a, b = m(x)[0], m(x)[0]
    assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    c = m(x)[0]
    assert not np.allclose(c.detach().numpy(), a.detach().numpy())
    # the mask comes from the module's generator: reseeding it replays the same masks
    m.generator.manual_seed(7)
    d = m(x)[0]
    m.generator.manual_seed(7)
    assert np.array_equal(m(x)[0].detach().numpy(), d.detach().numpy())


def test_dropout_with_one_layer_warns_as_torch_does():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells(torch, kind, batched):
    rng = np.random.default_rng(0)
    theirs = getattr(torch.nn, kind)(5, 4).double()
    ours = getattr(nn, kind)(5, 4, dtype=plugtorch.float64)
    copy_weights(ours, theirs)
    x = rng.standard_normal((3, 5) if batched else (5,))
    h = rng.standard_normal((3, 4) if batched else (4,))
    states = (h, h * 0.5) if kind == "LSTMCell" else (h,)
    xp, xt = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for hx in (None, "given"):
        hp = None if hx is None else tuple(plugtorch.tensor(s) for s in states)
        ht = None if hx is None else tuple(torch.tensor(s) for s in states)
        if hp is not None and kind != "LSTMCell":
            hp, ht = hp[0], ht[0]
        yp, yt = ours(xp, hp), theirs(xt, ht)
        yp, yt = (yp, yt) if kind != "LSTMCell" else (yp[0] + yp[1] * 2, yt[0] + yt[1] * 2)
        np.testing.assert_allclose(yp.detach().numpy(), yt.detach().numpy(), atol=1e-12)
    yp.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), atol=1e-12)
    assert repr(ours) == repr(theirs)


def test_errors_are_torchs():
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 5, got 3"):
        nn.GRU(5, 4)(plugtorch.randn(2, 1, 3))
    with pytest.raises(RuntimeError, match="Expected hidden size \\(2, 1, 4\\), got \\[1, 1, 4\\]"):
        nn.RNN(5, 4, num_layers=2)(plugtorch.randn(2, 1, 5), plugtorch.zeros(1, 1, 4))
    with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx should also be 2-D"):
        nn.RNN(5, 4)(plugtorch.randn(2, 5), plugtorch.zeros(1, 1, 4))
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(5, 4, proj_size=4)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(5, 4, nonlinearity="gelu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="dropout should be a number in range"):
            nn.GRU(5, 4, num_layers=2, dropout=1.5)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_an_empty_sequence_is_refused_as_torch(mode, batch_first):
    import torch
    shape = (2, 0, 3) if batch_first else (0, 2, 3)
    messages = []
    for lib in (plugtorch, torch):
        layer = getattr(lib.nn, mode)(3, 4, batch_first=batch_first)
        with pytest.raises(RuntimeError) as e:
            layer(lib.zeros(shape))
        messages.append(str(e.value))
    assert messages[0] == messages[1]
