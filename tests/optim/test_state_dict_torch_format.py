"""Optimizer state_dicts in torch's format: step (and NAdam's mu_product, ASGD's eta and mu) as
0-d tensors of torch's scalar dtype, so a checkpoint moves between the two libraries through
files (plugtorch.save / torch.load and torch.save / plugtorch.load) and training continues as
in the other. Inside the optimizer the scalars stay Python numbers (no item() per step)."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import optim

CONFIGS = [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, amsgrad=True)),
           ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01)),
           ("ASGD", dict(lr=0.1, t0=2)), ("Adagrad", dict(lr=0.1)), ("Adadelta", dict(lr=0.5)),
           ("RMSprop", dict(lr=0.01, momentum=0.5))]
_ids = [c[0] for c in CONFIGS]


def _pair(torch, name, kwargs, init):
    p = plugtorch.tensor(init, requires_grad=True)
    q = torch.tensor(init, requires_grad=True)
    return p, getattr(optim, name)([p], **kwargs), q, getattr(torch.optim, name)([q], foreach=False, **kwargs)


def _feed(torch, opts, g):
    for p, opt in opts:
        p.grad = plugtorch.tensor(g) if isinstance(p, plugtorch.Tensor) else torch.tensor(g)
        opt.step()


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_state_dict_scalars_are_torchs_0d_tensors(torch, cfg):
    rng = np.random.default_rng(0)
    p, opt, q, ref = _pair(torch, *cfg, rng.standard_normal(3))  # float64 parameters, float32 scalars
    for _ in range(3):
        _feed(torch, [(p, opt), (q, ref)], rng.standard_normal(3))
    ours, theirs = opt.state_dict()["state"][0], ref.state_dict()["state"][0]
    assert sorted(ours) == sorted(theirs)
    for key, want in theirs.items():
        got = ours[key]
        assert isinstance(got, plugtorch.Tensor), key
        assert (got.dtype.name, tuple(got.shape)) == (str(want.dtype).removeprefix("torch."), tuple(want.shape)), key
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, err_msg=key)
    # the optimizer's own state keeps Python numbers, which its update reads for free
    assert all(type(opt.state[p][k]) in (int, float) for k in ("step", "mu_product", "eta", "mu") if k in opt.state[p])


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_checkpoints_move_between_plugtorch_and_torch_through_files(torch, cfg, tmp_path):
    rng = np.random.default_rng(1)
    init = rng.standard_normal((2, 3))
    grads = [rng.standard_normal((2, 3)) for _ in range(8)]
    p, opt, q, ref = _pair(torch, *cfg, init)
    for g in grads[:4]:
        _feed(torch, [(p, opt), (q, ref)], g)

    # plugtorch's checkpoint resumed by torch, torch's by plugtorch
    plugtorch.save(opt.state_dict(), tmp_path / "ours.pt")
    torch.save(ref.state_dict(), tmp_path / "theirs.pt")
    q2 = torch.tensor(p.detach().numpy(), requires_grad=True)
    ref2 = getattr(torch.optim, cfg[0])([q2], foreach=False, **cfg[1])
    ref2.load_state_dict(torch.load(tmp_path / "ours.pt"))
    p2 = plugtorch.tensor(q.detach().numpy(), requires_grad=True)
    opt2 = getattr(optim, cfg[0])([p2], **cfg[1])
    opt2.load_state_dict(plugtorch.load(tmp_path / "theirs.pt"))
    assert type(opt2.state[p2].get("step", 0)) is int

    for g in grads[4:]:
        _feed(torch, [(p, opt), (q, ref), (q2, ref2), (p2, opt2)], g)
    want = q.detach().numpy()
    for got in (p, q2, p2):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-10, atol=1e-14)
