"""Learning-rate schedules follow torch.optim.lr_scheduler epoch by epoch and resume from state dicts."""
from __future__ import annotations

import pytest

import plugtorch
from plugtorch import optim
from plugtorch.optim import lr_scheduler

SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("CosineAnnealingLR", dict(T_max=5, eta_min=1e-3)),
    ("LinearLR", dict(start_factor=0.1, total_iters=4)),
    ("LinearLR", dict(start_factor=1.0, end_factor=0.2, total_iters=3)),
]


def _optimizer(lib, param):
    return lib.optim.SGD([{"params": [param]}, {"params": [], "lr": 0.3}], lr=0.1, momentum=0.9)


@pytest.mark.parametrize("name,kwargs", SCHEDULES, ids=[s[0] + str(s[1]) for s in SCHEDULES])
def test_schedule_matches_torch(torch, name, kwargs):
    ours_opt = _optimizer(plugtorch, plugtorch.zeros(1, requires_grad=True))
    theirs_opt = _optimizer(torch, torch.zeros(1, requires_grad=True))
    ours = getattr(lr_scheduler, name)(ours_opt, **kwargs)
    theirs = getattr(torch.optim.lr_scheduler, name)(theirs_opt, **kwargs)
    for epoch in range(14):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12), epoch
        assert [g["lr"] for g in ours_opt.param_groups] == pytest.approx(
            [g["lr"] for g in theirs_opt.param_groups], rel=1e-12)
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()


def test_lambda_lr_matches_torch_with_one_function_per_group(torch):
    fns = [lambda e: 0.95 ** e, lambda e: 1.0 / (e + 1)]
    ours_opt = _optimizer(plugtorch, plugtorch.zeros(1, requires_grad=True))
    theirs_opt = _optimizer(torch, torch.zeros(1, requires_grad=True))
    ours = lr_scheduler.LambdaLR(ours_opt, fns)
    theirs = torch.optim.lr_scheduler.LambdaLR(theirs_opt, fns)
    for _ in range(6):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
        ours_opt.step(), theirs_opt.step(), ours.step(), theirs.step()
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas"):
        lr_scheduler.LambdaLR(ours_opt, [fns[0]])


def test_linear_warmup_then_constant():
    opt = optim.Adam([plugtorch.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    seen = []
    for _ in range(6):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("name,kwargs", SCHEDULES, ids=[s[0] + str(s[1]) for s in SCHEDULES])
def test_state_dict_resumes_the_schedule(name, kwargs):
    def make():
        opt = optim.SGD([plugtorch.zeros(1, requires_grad=True)], lr=0.1)
        return opt, getattr(lr_scheduler, name)(opt, **kwargs)

    opt, sched = make()
    for _ in range(4):
        opt.step()
        sched.step()
    opt2, sched2 = make()
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sched.state_dict())
    assert "optimizer" not in sched.state_dict()
    for _ in range(6):
        assert sched2.get_last_lr() == pytest.approx(sched.get_last_lr(), rel=1e-12)
        assert opt2.param_groups[0]["lr"] == pytest.approx(opt.param_groups[0]["lr"], rel=1e-12)
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()


def test_step_with_epoch_uses_the_closed_form(torch):
    ours_opt = _optimizer(plugtorch, plugtorch.zeros(1, requires_grad=True))
    theirs_opt = _optimizer(torch, torch.zeros(1, requires_grad=True))
    ours = lr_scheduler.StepLR(ours_opt, step_size=2, gamma=0.1)
    theirs = torch.optim.lr_scheduler.StepLR(theirs_opt, step_size=2, gamma=0.1)
    with pytest.warns(UserWarning):
        ours.step(5)
    with pytest.warns(UserWarning):
        theirs.step(5)
    assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)


def test_resuming_needs_initial_lr():
    opt = optim.SGD([plugtorch.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(opt, step_size=2, last_epoch=3)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt, start_factor=0)
