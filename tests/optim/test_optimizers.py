"""Optimizers match torch.optim step for step on the same gradients, and keep PyTorch's API."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import optim

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.5, weight_decay=1e-2)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.05, momentum=0.9, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=1e-2, amsgrad=True)),
    ("Adam", dict(lr=1e-2, maximize=True)),
    ("Adam", dict(lr=1e-2, betas=(0.3, 0.9))),  # lerp weight >= 0.5: torch's other formula
    ("AdamW", dict(lr=1e-2)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.3, amsgrad=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=1e-3, alpha=0.9, weight_decay=0.1, momentum=0.5)),
    ("RMSprop", dict(lr=1e-3, centered=True, momentum=0.9)),
    ("RMSprop", dict(lr=1e-3, centered=True, maximize=True)),
]
SHAPES = [(3, 4), (4,), ()]


def _ids(cfg):
    return cfg[0] + "-" + ",".join(f"{k}={v}" for k, v in cfg[1].items())


def _run_pair(torch, name, kwargs, steps, dtype, rng):
    inits = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]
    ours = [plugtorch.tensor(a, requires_grad=True) for a in inits]
    theirs = [torch.tensor(a, requires_grad=True) for a in inits]
    opt_ours = getattr(optim, name)(ours, **kwargs)
    opt_theirs = getattr(torch.optim, name)(theirs, foreach=False, **kwargs)
    for k in range(steps):
        for p, q, g in zip(ours, theirs, grads[k]):
            p.grad = plugtorch.tensor(g)
            q.grad = torch.tensor(g)
        opt_ours.step()
        opt_theirs.step()
        for p, q in zip(ours, theirs):
            yield k, p.detach().numpy(), q.detach().numpy()


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_matches_torch_step_for_step_float64(torch, cfg):
    rng = np.random.default_rng(0)
    for k, ours, theirs in _run_pair(torch, *cfg, steps=6, dtype=np.float64, rng=rng):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14, err_msg=f"step {k}")


@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c[0] != "SGD"][::2], ids=_ids)
def test_matches_torch_float32(torch, cfg):
    rng = np.random.default_rng(1)
    for k, ours, theirs in _run_pair(torch, *cfg, steps=4, dtype=np.float32, rng=rng):
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-7, err_msg=f"step {k}")


def test_param_groups_use_their_own_options_and_defaults(torch):
    a = np.ones(3)
    b = np.full(2, 2.0)
    pa, pb = plugtorch.tensor(a, requires_grad=True), plugtorch.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ours = optim.SGD([{"params": [pa]}, {"params": pb, "lr": 0.5}], lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD([{"params": [ta]}, {"params": tb, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert ours.param_groups[1]["lr"] == 0.5 and ours.param_groups[0]["momentum"] == 0.9
    for _ in range(3):
        pa.grad, pb.grad = plugtorch.ones(3, dtype=plugtorch.float64), plugtorch.ones(2, dtype=plugtorch.float64)
        ta.grad, tb.grad = torch.ones(3, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
        ours.step()
        theirs.step()
    np.testing.assert_allclose(pa.detach().numpy(), ta.detach().numpy())
    np.testing.assert_allclose(pb.detach().numpy(), tb.detach().numpy())


def test_add_param_group_later_and_refuses_duplicates():
    p, q = plugtorch.zeros(2, requires_grad=True), plugtorch.zeros(3, requires_grad=True)
    opt = optim.Adam([p], lr=1e-3)
    opt.add_param_group({"params": [q], "lr": 1e-2})
    assert [g["lr"] for g in opt.param_groups] == [1e-3, 1e-2]
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})


def test_constructor_errors_name_the_problem():
    p = plugtorch.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(RuntimeError, match="differentiable=True"):
        optim.Adam([p], differentiable=True)
    with pytest.raises(RuntimeError, match="fused=True"):
        optim.Adagrad([p], fused=True)  # Adam, AdamW and SGD serve fused=True
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {p}}], lr=0.1)


def test_zero_grad_sets_to_none_or_zeros():
    p = plugtorch.ones(3, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad.tolist() == [0.0, 0.0, 0.0]
    (p * 2).sum().backward()
    assert p.grad.tolist() == [2.0, 2.0, 2.0]
    opt.zero_grad()
    assert p.grad is None


def test_params_without_grad_are_skipped():
    p, q = plugtorch.ones(2, requires_grad=True), plugtorch.ones(2, requires_grad=True)
    opt = optim.Adam([p, q], lr=0.1)
    p.grad = plugtorch.ones(2)
    opt.step()
    assert q.tolist() == [1.0, 1.0] and p.tolist() != [1.0, 1.0]
    assert q not in opt.state


def test_step_with_closure_returns_loss_and_updates_in_place():
    p = plugtorch.tensor([3.0], requires_grad=True)
    data_before = p.detach()
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 9.0
    assert p.item() == pytest.approx(3.0 - 0.25 * 6.0)
    assert data_before.item() == p.item()  # the update wrote into the parameter's memory
    assert p.is_leaf and p.requires_grad


@pytest.mark.parametrize("cfg", [CONFIGS[1], CONFIGS[7], CONFIGS[13]], ids=_ids)
def test_state_dict_resume_continues_identically(cfg):
    name, kwargs = cfg
    rng = np.random.default_rng(2)
    init = rng.standard_normal((2, 3))
    grads = [rng.standard_normal((2, 3)) for _ in range(6)]

    def make():
        p = plugtorch.tensor(init, requires_grad=True)
        return p, getattr(optim, name)([p], **kwargs)

    p_full, opt_full = make()
    for g in grads:
        p_full.grad = plugtorch.tensor(g)
        opt_full.step()

    p_a, opt_a = make()
    for g in grads[:3]:
        p_a.grad = plugtorch.tensor(g)
        opt_a.step()
    saved = opt_a.state_dict()
    p_b, opt_b = make()
    with plugtorch.no_grad():
        p_b.copy_(p_a)
    opt_b.load_state_dict(saved)
    for g in grads[:3]:  # keep stepping the original: the loaded state must not alias it
        p_a.grad = plugtorch.tensor(g)
        opt_a.step()
    for g in grads[3:]:
        p_b.grad = plugtorch.tensor(g)
        opt_b.step()
    np.testing.assert_allclose(p_b.detach().numpy(), p_full.detach().numpy(), rtol=1e-13)


def test_state_dict_format_matches_torch(torch):
    p, q = plugtorch.zeros(2, requires_grad=True), plugtorch.zeros(1, requires_grad=True)
    tp, tq = torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)
    ours = optim.Adam([{"params": [p]}, {"params": [q], "lr": 0.5}])
    theirs = torch.optim.Adam([{"params": [tp]}, {"params": [tq], "lr": 0.5}])
    for x, y in ((p, tp), (q, tq)):
        x.grad, y.grad = plugtorch.ones_like(x), torch.ones_like(y)
    ours.step()
    theirs.step()
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert sorted(sd) == sorted(tsd)
    assert sorted(sd["state"]) == sorted(tsd["state"]) == [0, 1]
    assert sorted(sd["state"][0]) == sorted(tsd["state"][0])
    assert [g["params"] for g in sd["param_groups"]] == [g["params"] for g in tsd["param_groups"]]
    for g, tg in zip(sd["param_groups"], tsd["param_groups"]):
        assert set(g) <= set(tg)
        for key in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"):
            assert g[key] == tg[key]


def test_load_state_dict_checks_group_sizes():
    p, q = plugtorch.zeros(2, requires_grad=True), plugtorch.zeros(1, requires_grad=True)
    sd = optim.SGD([p, q], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.SGD([p], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD([{"params": [p]}, {"params": [q]}], lr=0.1).load_state_dict(sd)


def test_named_parameters_are_accepted():
    p = plugtorch.zeros(2, requires_grad=True)
    opt = optim.SGD([("weight", p)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight"]
    assert opt.param_groups[0]["params"][0] is p


@pytest.mark.parametrize("name,kwargs", [("Adam", dict(lr=1e-2)), ("SGD", dict(lr=0.1, momentum=0.9)),
                                         ("RMSprop", dict(lr=1e-3))])
def test_training_a_model_tracks_torch(torch, name, kwargs):
    # Gradients from backward through a real model feed the optimizer, as in training.
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((16, 5)), rng.integers(0, 3, 16)
    w1, b1 = rng.standard_normal((8, 5)) * 0.3, rng.standard_normal(8) * 0.1
    w2, b2 = rng.standard_normal((3, 8)) * 0.3, rng.standard_normal(3) * 0.1

    def run(lib):
        params = [lib.tensor(a, requires_grad=True) for a in (w1, b1, w2, b2)]
        opt = getattr(lib.optim, name)(params, **kwargs)
        xs, ys = lib.tensor(x), lib.tensor(y)
        for _ in range(5):
            h = (xs @ params[0].T + params[1]).relu()
            loss = lib.nn.functional.cross_entropy(h @ params[2].T + params[3], ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().numpy() for p in params]

    for ours, theirs in zip(run(plugtorch), run(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_custom_optimizer_with_a_required_option_and_repr():
    from plugtorch.optim.optimizer import required

    class SignSGD(optim.Optimizer):
        def __init__(self, params, lr=required):
            super().__init__(params, dict(lr=lr))

        def step(self, closure=None):
            with plugtorch.no_grad():
                for group in self.param_groups:
                    for p in group["params"]:
                        p.sub_(p.grad.sign() * group["lr"])

    p = plugtorch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        SignSGD([p])
    opt = SignSGD([{"params": [p], "lr": 0.5}])
    p.grad = plugtorch.tensor([3.0, -1.0])
    opt.step()
    assert p.tolist() == [-0.5, 0.5]
    assert "Parameter Group 0" in repr(opt) and "lr: 0.5" in repr(opt)
