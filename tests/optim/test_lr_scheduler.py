"""Learning-rate schedules follow torch.optim.lr_scheduler epoch by epoch (rates, momentum,
``get_last_lr``, ``last_epoch``), keep torch's state-dict layout, and resume from it."""
from __future__ import annotations

import warnings

import pytest

import plugtorch
from plugtorch import optim
from plugtorch.optim import lr_scheduler


def _optimizer(lib, kind="SGD"):
    """Two groups with different rates (one of them empty), as schedules treat groups apart."""
    groups = [{"params": [lib.zeros(1, requires_grad=True)]}, {"params": [], "lr": 0.3}]
    if kind == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return lib.optim.Adam(groups, lr=0.1)


# name -> builder(lr_scheduler module, optimizer); the same call for both libraries
SCHEDULES = {
    "StepLR": lambda L, o: L.StepLR(o, step_size=3, gamma=0.5),
    "StepLR-default-gamma": lambda L, o: L.StepLR(o, 2),
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda L, o: L.ExponentialLR(o, gamma=0.9),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, lambda e: 0.95 if e % 2 else 0.9),
    "ConstantLR": lambda L, o: L.ConstantLR(o, factor=0.25, total_iters=4),
    "ConstantLR-defaults": lambda L, o: L.ConstantLR(o),
    "LinearLR": lambda L, o: L.LinearLR(o, start_factor=0.1, total_iters=4),
    "LinearLR-decay": lambda L, o: L.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=3),
    "PolynomialLR": lambda L, o: L.PolynomialLR(o, total_iters=7, power=2.0),
    "LambdaLR": lambda L, o: L.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (1 + e)]),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, T_max=4, eta_min=1e-3),
    "CosineAnnealingWarmRestarts": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3),
    "CosineAnnealingWarmRestarts-Tmult": lambda L, o: L.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=1e-3),
    "CyclicLR": lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "CyclicLR-triangular2": lambda L, o: L.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1,
                                                    step_size_up=3, step_size_down=2,
                                                    mode="triangular2"),
    "CyclicLR-exp_range": lambda L, o: L.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                  mode="exp_range", gamma=0.9),
    "CyclicLR-no-momentum": lambda L, o: L.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                    cycle_momentum=False),
    "CyclicLR-scale_fn": lambda L, o: L.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                 scale_fn=lambda x: 0.5 ** x,
                                                 scale_mode="iterations"),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, max_lr=[0.5, 1.0], total_steps=20),
    "OneCycleLR-three-phase": lambda L, o: L.OneCycleLR(o, max_lr=0.5, epochs=4, steps_per_epoch=5,
                                                        pct_start=0.25, anneal_strategy="linear",
                                                        three_phase=True),
    "SequentialLR": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.1, total_iters=3), L.ExponentialLR(o, gamma=0.8),
            L.StepLR(o, 2)], milestones=[4, 9]),
    "ChainedScheduler": lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.5, total_iters=3), L.ExponentialLR(o, gamma=0.9)]),
    "ChainedScheduler-of-sequential": lambda L, o: L.ChainedScheduler(
        [L.SequentialLR(o, [L.ConstantLR(o, factor=0.5, total_iters=2), L.StepLR(o, 3)],
                        milestones=[3]),
         L.ExponentialLR(o, gamma=0.9)]),
}
EPOCHS = 20


def _assert_same(ours_opt, theirs_opt, ours, theirs, where):
    assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-13, abs=1e-16), where
    assert getattr(ours, "last_epoch", None) == getattr(theirs, "last_epoch", None), where
    for g, h in zip(ours_opt.param_groups, theirs_opt.param_groups):
        assert sorted(g) == sorted(h), where
        for key in ("lr", "initial_lr", "momentum", "betas", "max_lr", "min_lr",
                    "max_momentum", "base_momentum"):
            if key in h:
                assert g[key] == pytest.approx(h[key], rel=1e-13), (where, key)


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_matches_torch_epoch_by_epoch(torch, name, kind):
    ours_opt, theirs_opt = _optimizer(plugtorch, kind), _optimizer(torch, kind)
    ours = SCHEDULES[name](lr_scheduler, ours_opt)
    theirs = SCHEDULES[name](torch.optim.lr_scheduler, theirs_opt)
    for epoch in range(EPOCHS):
        _assert_same(ours_opt, theirs_opt, ours, theirs, f"epoch {epoch}")
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())


@pytest.mark.parametrize("name", SCHEDULES)
def test_state_dict_resumes_the_schedule_as_torch_continues(torch, name):
    ours_opt, theirs_opt = _optimizer(plugtorch), _optimizer(torch)
    ours = SCHEDULES[name](lr_scheduler, ours_opt)
    theirs = SCHEDULES[name](torch.optim.lr_scheduler, theirs_opt)
    for _ in range(7):
        for o in (ours_opt, theirs_opt, ours, theirs):
            o.step()
    saved_opt, saved = ours_opt.state_dict(), ours.state_dict()
    assert "optimizer" not in saved
    # as torch documents: build the scheduler first, then load both states over it
    opt2 = _optimizer(plugtorch)
    sched2 = SCHEDULES[name](lr_scheduler, opt2)
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved)
    for epoch in range(7, EPOCHS):
        _assert_same(opt2, theirs_opt, sched2, theirs, f"epoch {epoch}")
        for o in (opt2, theirs_opt, sched2, theirs):
            o.step()


CLOSED_FORMS = ["StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR", "PolynomialLR",
                "CosineAnnealingLR", "CosineAnnealingWarmRestarts-Tmult", "LambdaLR"]


@pytest.mark.parametrize("name", CLOSED_FORMS)
def test_step_with_an_epoch_jumps_there_and_warns(torch, name):
    ours_opt, theirs_opt = _optimizer(plugtorch), _optimizer(torch)
    ours = SCHEDULES[name](lr_scheduler, ours_opt)
    theirs = SCHEDULES[name](torch.optim.lr_scheduler, theirs_opt)
    ours_opt.step()
    theirs_opt.step()
    for epoch in (5, 2, 11, 3):
        for sched in (ours, theirs):
            if "Warm" in name:  # epochs are its documented use: no deprecation warning
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    sched.step(epoch)
            else:
                with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step"):
                    sched.step(epoch)
        _assert_same(ours_opt, theirs_opt, ours, theirs, f"epoch {epoch}")


def test_cosine_warm_restarts_takes_fractional_epochs_within_an_epoch(torch):
    ours_opt, theirs_opt = _optimizer(plugtorch), _optimizer(torch)
    ours = lr_scheduler.CosineAnnealingWarmRestarts(ours_opt, T_0=2, T_mult=3)
    theirs = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(theirs_opt, T_0=2, T_mult=3)
    iters = 4
    for epoch in range(10):
        for i in range(iters):
            ours_opt.step()
            theirs_opt.step()
            ours.step(epoch + i / iters)
            theirs.step(epoch + i / iters)
            _assert_same(ours_opt, theirs_opt, ours, theirs, f"epoch {epoch} + {i}/{iters}")
            assert (ours.T_cur, ours.T_i) == pytest.approx((theirs.T_cur, theirs.T_i))
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        ours.step(-1)


PLATEAUS = [
    dict(),
    dict(mode="max", factor=0.5, patience=2, threshold=0.05, cooldown=1),
    dict(mode="min", threshold_mode="abs", threshold=0.1, patience=1, min_lr=[0.02, 0.05]),
    dict(mode="max", threshold_mode="abs", patience=0, factor=0.3, min_lr=0.001, eps=1e-3),
]
METRICS = [1.0, 0.9, 0.95, 0.93, 0.97, 0.96, 0.96, 0.8, 0.81, 0.82, 0.82, 0.83, 0.7, 0.71, 0.72,
           0.73, 0.74, 0.75, 0.76, 0.77, 0.78, 0.79, 0.8, 0.81] * 2


@pytest.mark.parametrize("kwargs", PLATEAUS, ids=str)
def test_reduce_on_plateau_matches_torch(torch, kwargs):
    ours_opt, theirs_opt = _optimizer(plugtorch), _optimizer(torch)
    ours = lr_scheduler.ReduceLROnPlateau(ours_opt, **kwargs)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs_opt, **kwargs)
    for k, metric in enumerate(METRICS):
        ours_opt.step()
        theirs_opt.step()
        ours.step(plugtorch.tensor(metric) if k % 2 else metric)  # a number or a 0-d tensor
        theirs.step(torch.tensor(metric) if k % 2 else metric)
        _assert_same(ours_opt, theirs_opt, ours, theirs, f"epoch {k}")
        assert (ours.best, ours.num_bad_epochs, ours.cooldown_counter) == \
            (theirs.best, theirs.num_bad_epochs, theirs.cooldown_counter)
        if k == 20:
            saved = ours.state_dict()
            assert sorted(saved) == sorted(theirs.state_dict())
            ours = lr_scheduler.ReduceLROnPlateau(ours_opt, **kwargs)
            ours.load_state_dict(saved)


def test_reduce_on_plateau_errors_and_new_groups(torch):
    opt = _optimizer(plugtorch)
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode sideways is unknown!"):
        lr_scheduler.ReduceLROnPlateau(opt, mode="sideways")
    with pytest.raises(ValueError, match="threshold mode x is unknown!"):
        lr_scheduler.ReduceLROnPlateau(opt, threshold_mode="x")
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1])
    listed = lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=[0.0, 0.0])
    shared = lr_scheduler.ReduceLROnPlateau(_optimizer(plugtorch), patience=0)
    for sched in (listed, shared):
        sched.optimizer.add_param_group({"params": [plugtorch.zeros(1, requires_grad=True)]})
        sched.step(1.0)
    with pytest.raises(RuntimeError, match="number of param groups in the `optimizer` \\(3\\)"):
        listed.step(2.0)
    shared.step(2.0)  # a single min_lr extends to the new group
    assert shared.min_lrs == [0, 0, 0]


def test_warns_when_stepped_before_the_optimizer_or_read_outside_step(torch):
    for lib in (plugtorch, torch):
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.StepLR(opt, 2)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
            sched.step()
        with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
            sched.get_lr()
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.ExponentialLR(opt, 0.5)
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()
    # an optimizer subclass with its own step() counts as stepped too
    class Custom(optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    opt = Custom([plugtorch.zeros(1, requires_grad=True)], lr=0.1)
    sched = lr_scheduler.StepLR(opt, 2)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()


def test_resuming_with_last_epoch_continues_from_initial_lr(torch):
    def run(lib):
        opt = _optimizer(lib)
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"] * 2
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, last_epoch=3)
        lrs = list(sched.get_last_lr())
        for _ in range(5):
            opt.step()
            sched.step()
            lrs.extend(sched.get_last_lr())
        return lrs

    assert run(plugtorch) == pytest.approx(run(torch), rel=1e-13)


def test_constructor_errors_match_torch(torch):
    def both(build, error, match):
        for lib in (plugtorch, torch):
            with pytest.raises(error, match=match):
                build(lib.optim.lr_scheduler, _optimizer(lib))

    both(lambda L, o: L.StepLR(o, step_size=2, last_epoch=3), KeyError, "initial_lr")
    both(lambda L, o: L.LinearLR(o, start_factor=0), ValueError, "Starting multiplicative factor")
    both(lambda L, o: L.LinearLR(o, end_factor=2), ValueError, "Ending multiplicative factor")
    both(lambda L, o: L.ConstantLR(o, factor=2), ValueError, "Constant multiplicative factor")
    both(lambda L, o: L.LambdaLR(o, [lambda e: 1.0]), ValueError, "Expected 2 lr_lambdas, but got 1")
    both(lambda L, o: L.MultiplicativeLR(o, 0.9), TypeError, "lr_lambda should be a function")
    both(lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=0), ValueError,
         "Expected positive integer T_0, but got 0")
    both(lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), ValueError,
         "Expected integer T_mult >= 1, but got 0")
    both(lambda L, o: L.CyclicLR(o, 0.1, [0.1], 2), ValueError,
         "max_lr must have the same length as optimizer.param_groups")
    both(lambda L, o: L.CyclicLR(o, 0.1, 0.2, mode="zigzag"), ValueError,
         "mode is invalid and scale_fn is None")
    both(lambda L, o: L.OneCycleLR(o, 0.1), ValueError,
         "You must define either total_steps OR \\(epochs AND steps_per_epoch\\)")
    both(lambda L, o: L.OneCycleLR(o, 0.1, total_steps=10, pct_start=1.5), ValueError,
         "Expected float between 0 and 1 pct_start")
    both(lambda L, o: L.OneCycleLR(o, 0.1, total_steps=10, anneal_strategy="step"), ValueError,
         "anneal_strategy must be one of 'cos' or 'linear'")
    both(lambda L, o: L.SequentialLR(o, [L.StepLR(o, 2), L.StepLR(o, 3)], milestones=[]),
         ValueError, "expects number of schedulers provided to be one more")
    both(lambda L, o: L.SequentialLR(o, [L.StepLR(o, 2), L.ReduceLROnPlateau(o)], milestones=[2]),
         ValueError, "does not support `ReduceLROnPlateau`")
    both(lambda L, o: L.ChainedScheduler([]), ValueError, "expects at least one scheduler")
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        lr_scheduler.OneCycleLR(optim.Adagrad([plugtorch.zeros(1, requires_grad=True)]), 0.1,
                                total_steps=4)


def test_one_cycle_refuses_steps_past_total(torch):
    for lib in (plugtorch, torch):
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=3)
        for _ in range(3):
            opt.step()
            sched.step()
        with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of "
                                             "total steps is 3"):
            sched.step()


def test_callable_objects_keep_their_state_through_the_state_dict():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, epoch):
            return self.rate ** epoch

    opt = _optimizer(plugtorch)
    fn = Decay()
    sched = lr_scheduler.LambdaLR(opt, [fn, lambda e: 1.0])
    fn.rate = 0.25
    saved = sched.state_dict()
    assert saved["lr_lambdas"] == [{"rate": 0.25}, None]
    other = Decay()
    sched2 = lr_scheduler.LambdaLR(_optimizer(plugtorch), [other, lambda e: 1.0])
    sched2.load_state_dict(saved)
    assert other.rate == 0.25


def test_linear_warmup_then_constant():
    opt = optim.Adam([plugtorch.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    seen = []
    for _ in range(6):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
