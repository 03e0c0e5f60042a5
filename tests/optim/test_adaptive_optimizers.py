"""Adadelta, Adagrad, Adamax, NAdam, RAdam and ASGD follow torch.optim step for step: the same
parameters and gradients give the same parameters and the same state after every step, and
their state dicts carry torch's keys and resume (from ours or from torch's) identically."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import optim

CONFIGS = [
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.05, initial_accumulator_value=0.3,
                     eps=1e-8)),
    ("Adagrad", dict(lr=0.05, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.3, 0.9), weight_decay=0.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, betas=(0.6, 0.9), weight_decay=0.1, decoupled_weight_decay=True,
                   maximize=True)),
    ("RAdam", dict()),  # rho_t > 5 from step 6 on: both branches of the rectification run
    ("RAdam", dict(lr=0.01, betas=(0.7, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=5, weight_decay=0.1)),  # averaging from step 6
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
]
SHAPES = [(3, 4), (4,), ()]
TOLERANCE = {np.float64: dict(rtol=1e-12, atol=1e-14), np.float32: dict(rtol=1e-5, atol=1e-6)}


def _ids(cfg):
    return cfg[0] + "-" + ",".join(f"{k}={v}" for k, v in cfg[1].items())


def _pair(torch, name, kwargs, dtype, rng, foreach=None):
    """Our optimizer (``foreach`` as given) and torch's single-tensor reference."""
    inits = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    ours = [plugtorch.tensor(a, requires_grad=True) for a in inits]
    theirs = [torch.tensor(a, requires_grad=True) for a in inits]
    return (ours, getattr(optim, name)(ours, foreach=foreach, **kwargs),
            theirs, getattr(torch.optim, name)(theirs, foreach=False, **kwargs))


def _feed(rng, dtype, ours, theirs):
    for p, q in zip(ours, theirs):
        g = rng.standard_normal(p.shape).astype(dtype)
        p.grad = plugtorch.tensor(g)
        q.grad = q.new_tensor(g)


def assert_state_matches(ours: dict, theirs: dict, rtol: float, atol: float, where: str = ""):
    """Same keys; tensors close; torch's 0-d bookkeeping tensors equal to our numbers."""
    assert sorted(ours) == sorted(theirs), where
    for key, want in theirs.items():
        got = ours[key]
        if getattr(want, "ndim", 0) == 0:
            assert float(got) == pytest.approx(float(want), rel=rtol, abs=atol), f"{where} {key}"
        else:
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"{where} {key}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_parameters_and_state_match_torch_step_for_step(torch, cfg, dtype):
    rng = np.random.default_rng(0)
    ours, opt, theirs, ref = _pair(torch, *cfg, dtype, rng)
    tol = TOLERANCE[dtype]
    for k in range(30):
        _feed(rng, dtype, ours, theirs)
        opt.step()
        ref.step()
        for i, (p, q) in enumerate(zip(ours, theirs)):
            assert p.detach().numpy().dtype == q.detach().numpy().dtype
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), **tol,
                                       err_msg=f"step {k} param {i}")
            assert_state_matches(opt.state[p], ref.state[q], where=f"step {k} param {i}", **tol)


@pytest.mark.parametrize("cfg", CONFIGS[::3], ids=_ids)
def test_foreach_is_accepted_as_a_hint(torch, cfg):
    # torch's multi-tensor path reorders some arithmetic (ASGD's differs in the 8th digit);
    # ours runs one update either way, the single-tensor one.
    rng = np.random.default_rng(1)
    ours, opt, theirs, ref = _pair(torch, *cfg, np.float64, rng, foreach=True)
    assert opt.param_groups[0]["foreach"] is True  # a speed hint: the same update either way
    for _ in range(5):
        _feed(rng, np.float64, ours, theirs)
        opt.step()
        ref.step()
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_default_float64_keeps_bookkeeping_scalars_in_float64(torch):
    # torch stores NAdam's mu_product and ASGD's eta/mu in the default dtype: float64 here,
    # so nothing is rounded to float32 along the way.
    before_ours, before_theirs = plugtorch.get_default_dtype(), torch.get_default_dtype()
    plugtorch.set_default_dtype(plugtorch.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for cfg in [("NAdam", dict(lr=0.01)), ("ASGD", dict(lr=0.1, t0=3))]:
            rng = np.random.default_rng(2)
            ours, opt, theirs, ref = _pair(torch, *cfg, np.float64, rng)
            for _ in range(8):
                _feed(rng, np.float64, ours, theirs)
                opt.step()
                ref.step()
            for p, q in zip(ours, theirs):
                assert_state_matches(opt.state[p], ref.state[q], rtol=1e-15, atol=0)
            scalar = "mu_product" if cfg[0] == "NAdam" else "eta"
            assert ref.state[theirs[0]][scalar].dtype == torch.float64
    finally:
        plugtorch.set_default_dtype(before_ours)
        torch.set_default_dtype(before_theirs)


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_state_dict_has_torchs_layout_and_resumes_from_torchs_state(torch, cfg):
    rng = np.random.default_rng(3)
    ours, opt, theirs, ref = _pair(torch, *cfg, np.float64, rng)
    for _ in range(7):
        _feed(rng, np.float64, ours, theirs)
        opt.step()
        ref.step()
    sd, tsd = opt.state_dict(), ref.state_dict()
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i in tsd["state"]:
        assert sorted(sd["state"][i]) == sorted(tsd["state"][i])
    for g, tg in zip(sd["param_groups"], tsd["param_groups"]):
        assert g == dict(tg, foreach=None)  # the reference was built with foreach=False

    # torch's checkpoint, converted tensor by tensor, continues in plugtorch as in torch
    converted = {"param_groups": tsd["param_groups"],
                 "state": {i: {k: plugtorch.tensor(v.numpy()) for k, v in s.items()}
                           for i, s in tsd["state"].items()}}
    resumed = [plugtorch.tensor(q.detach().numpy(), requires_grad=True) for q in theirs]
    opt2 = getattr(optim, cfg[0])(resumed, **cfg[1])
    opt2.load_state_dict(converted)
    for _ in range(5):
        _feed(rng, np.float64, resumed, theirs)
        opt2.step()
        ref.step()
    for p, q in zip(resumed, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14)
        assert_state_matches(opt2.state[p], ref.state[q], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cfg", CONFIGS[::2], ids=_ids)
def test_own_state_dict_resumes_identically(cfg):
    name, kwargs = cfg
    rng = np.random.default_rng(4)
    init = rng.standard_normal((2, 3))
    grads = [rng.standard_normal((2, 3)) for _ in range(8)]

    def run(p, opt, gs):
        for g in gs:
            p.grad = plugtorch.tensor(g)
            opt.step()

    p_full = plugtorch.tensor(init, requires_grad=True)
    run(p_full, getattr(optim, name)([p_full], **kwargs), grads)
    p_a = plugtorch.tensor(init, requires_grad=True)
    opt_a = getattr(optim, name)([p_a], **kwargs)
    run(p_a, opt_a, grads[:4])
    p_b = plugtorch.tensor(p_a.detach().numpy(), requires_grad=True)
    opt_b = getattr(optim, name)([p_b], **kwargs)
    opt_b.load_state_dict(opt_a.state_dict())
    run(p_a, opt_a, grads[:2])  # the loaded state must not alias the original's
    run(p_b, opt_b, grads[4:])
    np.testing.assert_allclose(p_b.detach().numpy(), p_full.detach().numpy(), rtol=1e-13)


def test_adagrad_has_state_from_construction_and_for_groups_added_later(torch):
    p, q = plugtorch.zeros(2, requires_grad=True), plugtorch.zeros(3, requires_grad=True)
    opt = optim.Adagrad([p], initial_accumulator_value=0.5)
    assert opt.state[p]["step"] == 0 and opt.state[p]["sum"].tolist() == [0.5, 0.5]
    opt.add_param_group({"params": [q], "initial_accumulator_value": 2.0})
    assert q not in opt.state
    q.grad = plugtorch.ones(3)
    opt.step()
    # as torch, the constructor's accumulator value seeds every parameter's sum
    tq = torch.zeros(3, requires_grad=True)
    ref = torch.optim.Adagrad([torch.zeros(2, requires_grad=True)], initial_accumulator_value=0.5)
    ref.add_param_group({"params": [tq], "initial_accumulator_value": 2.0})
    tq.grad = torch.ones(3)
    ref.step()
    np.testing.assert_allclose(opt.state[q]["sum"].numpy(), ref.state[tq]["sum"].numpy())
    np.testing.assert_allclose(q.detach().numpy(), tq.detach().numpy(), rtol=1e-6)


def test_training_a_model_with_each_optimizer_tracks_torch(torch):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((16, 5)), rng.integers(0, 3, 16)
    weights = [rng.standard_normal((8, 5)) * 0.3, rng.standard_normal(8) * 0.1,
               rng.standard_normal((3, 8)) * 0.3, rng.standard_normal(3) * 0.1]

    def run(lib, name):
        params = [lib.tensor(a, requires_grad=True) for a in weights]
        opt = getattr(lib.optim, name)(params, lr=0.05)
        xs, ys = lib.tensor(x), lib.tensor(y)
        for _ in range(8):
            h = (xs @ params[0].T + params[1]).relu()
            loss = lib.nn.functional.cross_entropy(h @ params[2].T + params[3], ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().numpy() for p in params]

    for name in ("Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "ASGD"):
        for ours, theirs in zip(run(plugtorch, name), run(torch, name)):
            np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name,kwargs,message", [
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
    ("Adadelta", dict(lr=-1), "Invalid learning rate: -1"),
    ("Adagrad", dict(lr_decay=-0.1), "Invalid lr_decay value: -0.1"),
    ("Adagrad", dict(initial_accumulator_value=-1), "Invalid initial_accumulator_value value: -1"),
    ("Adamax", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
    ("RAdam", dict(eps=-1), "Invalid epsilon value: -1"),
    ("ASGD", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
])
def test_invalid_options_raise_torchs_errors(torch, name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=message):
        getattr(optim, name)([plugtorch.zeros(1, requires_grad=True)], **kwargs)


@pytest.mark.parametrize("name", ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "ASGD"])
def test_defaults_and_refused_options_match_torch(torch, name):
    ours = getattr(optim, name)([plugtorch.zeros(1, requires_grad=True)])
    theirs = getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)])
    assert ours.defaults == theirs.defaults
    with pytest.raises(RuntimeError, match="differentiable=True"):
        getattr(optim, name)([plugtorch.zeros(1, requires_grad=True)], differentiable=True)
