"""What a replay checks before it runs (compiler/guards.py): each case below is a change between
calls after which replaying the old trace would give a wrong number. Each must give eager's
result — by another trace, a new capture, or an eager run."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn
from plugtorch.compiler import CaptureError


def _bits(t) -> bytes:
    return t.detach().numpy().tobytes()


def test_aliased_arguments_are_part_of_the_guard():
    f = plugtorch.compile(lambda x, y: x + 2 * y)
    a, b = plugtorch.tensor(3.0), plugtorch.tensor(9.0)
    for _ in range(3):
        assert f(a, a).item() == 9.0
    assert f(a, b).item() == 21.0  # the trace of f(a, a) reads one input for both


@pytest.mark.parametrize("first, then", [(1, 1.0), (1.0, True), (0.0, -0.0), (2, np.float32(2)),
                                         (np.float32(2), np.float64(2))])
def test_number_arguments_are_guarded_by_type_and_bits(first, then):
    f = plugtorch.compile(lambda x, s: x * s)
    x = plugtorch.tensor([1, 2, 3]) if isinstance(first, int) else plugtorch.tensor([1.0, -2.0])
    for _ in range(3):
        f(x, first)
    got, want = f(x, then), x * then
    assert got.dtype == want.dtype and _bits(got) == _bits(want)


def test_a_nan_argument_replays():
    f = plugtorch.compile(lambda x, s: x + s, fullgraph=True)
    x = plugtorch.ones(2)
    for _ in range(4):
        out = f(x, float("nan"))
    assert f.replays == 2 and np.isnan(out.numpy()).all()


def test_an_argument_holding_a_parameters_array_is_pinned():
    """``f(w.detach())`` computes with the argument and the parameter as one array; replaying
    that for another argument would read the argument where the model reads its weight."""
    m = nn.Linear(6, 3)
    f = plugtorch.compile(lambda x: m(x).sum() + x.sum(), fullgraph=True)
    with plugtorch.no_grad():
        for arg in [m.weight.detach(), m.weight.detach(), plugtorch.randn(3, 6), plugtorch.randn(3, 6)]:
            assert f(arg).item() == (m(arg).sum() + arg.sum()).item()
    assert f.captures == 2


def test_eval_is_guarded_for_a_function_calling_a_module():
    plugtorch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    f = plugtorch.compile(lambda x: model(x) * 1.0, fullgraph=True)
    x = plugtorch.ones(2, 4)
    with plugtorch.no_grad():
        for _ in range(3):
            f(x)
        model.eval()
        assert _bits(f(x)) == _bits(model(x))  # no dropout
        model.train()
        assert f.captures == 2
        f(x)
        assert f.captures == 2 and f.replays == 2  # the training trace is kept and replays again


def test_module_attributes_replaced_submodules_and_parameters_are_guarded():
    plugtorch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    f = plugtorch.compile(lambda x: model(x) * 1.0, fullgraph=True)
    x = plugtorch.ones(3, 4)

    def same():
        plugtorch.manual_seed(7)
        got = f(x)
        plugtorch.manual_seed(7)
        return _bits(got) == _bits(model(x))
    with plugtorch.no_grad():
        f(x), f(x)
        model[1].p = 0.1  # a plain attribute the kernels depend on
        assert same()
        model[2] = nn.Linear(4, 2)  # a new submodule
        assert same()
        model[0].bias = nn.Parameter(plugtorch.full((4,), 5.0))  # a new parameter
        assert same()


def test_a_parameter_read_without_calling_its_module_is_guarded():
    model = nn.Sequential(nn.Linear(4, 3))
    f = plugtorch.compile(lambda x: F.linear(x, model[0].weight), fullgraph=True)
    x = plugtorch.ones(2, 4)
    with plugtorch.no_grad():
        f(x), f(x)
        model[0].weight = nn.Parameter(plugtorch.zeros(3, 4))
        assert (f(x).numpy() == 0).all()
        model[0] = nn.Linear(4, 3)
        assert _bits(f(x)) == _bits(F.linear(x, model[0].weight))


def _linear_step(opt_cls, **kw):
    plugtorch.manual_seed(0)
    model = nn.Linear(5, 3)
    opt = opt_cls(model.parameters(), **kw)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, opt, step


@pytest.mark.parametrize("opt_cls, kw", [(plugtorch.optim.Adam, {"lr": 0.1}),
                                         (plugtorch.optim.SGD, {"lr": 0.1, "momentum": 0.9})])
def test_load_state_dict_between_compiled_steps(opt_cls, kw):
    rng = np.random.default_rng(0)
    data = [(plugtorch.from_numpy(rng.standard_normal((4, 5)).astype(np.float32)),
             plugtorch.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))) for _ in range(8)]
    results = []
    for compiled in (False, True):
        model, opt, step = _linear_step(opt_cls, **kw)
        run = plugtorch.compile(step, fullgraph=True) if compiled else step
        for x, y in data[:3]:
            run(x, y)
        snapshot = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
        for x, y in data[3:5]:
            run(x, y)
        model.load_state_dict(snapshot[0])
        opt.load_state_dict(snapshot[1])
        for x, y in data[5:]:
            run(x, y)
        results.append((model.weight.detach().numpy().tobytes(), opt.state_dict()))
    assert results[0][0] == results[1][0]
    if opt_cls is plugtorch.optim.Adam:
        assert results[1][1]["state"][0]["step"] == results[0][1]["state"][0]["step"] == 6


def _edited_sgd_run(compiled: bool, x, y) -> list[bytes]:
    plugtorch.manual_seed(0)
    model, extra = nn.Linear(5, 3), nn.Parameter(plugtorch.ones(3))
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        F.mse_loss(model(x) + extra, y).backward()
        opt.step()
    run = plugtorch.compile(step, fullgraph=True) if compiled else step
    for i in range(12):
        if i == 3:
            opt.param_groups[0]["momentum"] = 0.0  # a step without the buffer
        if i == 5:
            opt.param_groups[0]["momentum"] = 0.5
            opt.param_groups[0]["weight_decay"] = 0.01
        if i == 7:
            model.bias.requires_grad_(False)  # no gradient, no update
        if i == 9:
            opt.add_param_group({"params": [extra], "lr": 0.5})
        run(x, y)
    return [p.detach().numpy().tobytes() for p in [*model.parameters(), extra]]


def test_optimizer_edits_between_steps():
    rng = np.random.default_rng(1)
    x = plugtorch.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    y = plugtorch.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))
    assert _edited_sgd_run(False, x, y) == _edited_sgd_run(True, x, y)


def test_adam_over_new_parameters_captures_again_after_making_its_state():
    """A capture that meets Adam making moment buffers (a new parameter group) runs eagerly and
    tries again next call, rather than leaving these arguments eager for good."""
    model, opt, step = _linear_step(plugtorch.optim.Adam, lr=0.1)
    extra = nn.Parameter(plugtorch.ones(3))

    def step2(x, y):
        opt.zero_grad()
        F.mse_loss(model(x) + extra, y).backward()
        opt.step()
    run = plugtorch.compile(step2)
    x, y = plugtorch.ones(4, 5), plugtorch.zeros(4, 3)
    for _ in range(3):
        run(x, y)
    opt.add_param_group({"params": [extra]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            run(x, y)
    assert run.captures == 2 and run.replays == 2


@pytest.mark.parametrize("grads_before", ["kept", "none"])
@pytest.mark.parametrize("opt_cls", [plugtorch.optim.Adam, plugtorch.optim.AdamW])
def test_adam_fused_over_one_step_count_is_not_replayed_once_the_counts_differ(opt_cls, grads_before):
    """A parameter frozen for a step lags one step behind the others, so Adam updates each alone
    (one count each) where it had updated all in one _fused_adam_ call (one count for all).
    Replaying that earlier capture gave the others the lagging count's bias correction. The
    guard is read before the call, where the gradients may all be None (``grads_before``)."""
    def world(compiled):
        plugtorch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = opt_cls(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        return model, opt, plugtorch.compile(step) if compiled else step

    (eager, opt_e, run_e), (compiled, opt_c, run_c) = world(False), world(True)
    rng = np.random.default_rng(0)
    for k in range(6):
        x = plugtorch.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
        y = plugtorch.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))
        for model, opt, run in ((eager, opt_e, run_e), (compiled, opt_c, run_c)):
            if k in (2, 3):  # frozen for one step, then trained again
                model[2].bias.requires_grad_(k == 3)
            if grads_before == "none":
                opt.zero_grad(set_to_none=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run(x, y)
        for a, b in zip(eager.parameters(), compiled.parameters()):
            assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes(), f"step {k}"
    assert run_c.replays >= 1


def test_a_gradient_of_an_argument_goes_to_the_argument_of_each_call():
    def f(x):
        (x * x).sum().backward()
        return x.grad * 1.0
    g = plugtorch.compile(f, fullgraph=True)
    for i in range(5):
        x = plugtorch.tensor([float(i), 2.0], requires_grad=True)
        assert g(x).tolist() == x.grad.tolist() == [2.0 * i, 4.0]
    assert g.captures == 1 and g.replays == 3


def test_in_place_changes_move_version_counters_as_eager_does():
    """autograd refuses a backward through a tensor changed in place since it was saved; a replay
    that changed it must be refused too."""
    def double(x):
        with plugtorch.no_grad():
            x.mul_(2)
    f = plugtorch.compile(double, fullgraph=True)
    w = plugtorch.ones(3, requires_grad=True)
    for _ in range(3):
        a = w * 1.0
        saved = a * a  # saves a
        f(a)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            saved.sum().backward()
    assert f.replays == 1


def test_forward_hooks_run_eagerly():
    model = nn.Linear(3, 2)
    seen = []
    model.register_forward_hook(lambda m, args, out: seen.append(out))
    f = plugtorch.compile(lambda x: model(x) * 1.0)
    with plugtorch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(4):
            f(plugtorch.ones(1, 3))
    assert len(seen) == 4
    with pytest.raises(CaptureError, match="forward hooks"):
        g = plugtorch.compile(lambda x: model(x) * 1.0, fullgraph=True)
        with plugtorch.no_grad():
            g(plugtorch.ones(1, 3)), g(plugtorch.ones(1, 3))


def test_a_hook_added_after_the_capture_is_not_skipped():
    model = nn.Linear(3, 2)
    f = plugtorch.compile(lambda x: model(x) * 1.0)
    seen = []
    with plugtorch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(plugtorch.ones(1, 3)), f(plugtorch.ones(1, 3))
        model.register_forward_hook(lambda m, args, out: seen.append(out))
        f(plugtorch.ones(1, 3))
    assert len(seen) == 1


def test_a_module_changed_inside_the_function_falls_back():
    class Keeps(nn.Module):
        def forward(self, x):
            self.last = x * 2  # a replay would not store it
            return self.last
    m = Keeps()
    f = plugtorch.compile(m)
    with pytest.warns(UserWarning, match="changes a module inside the function"):
        for i in range(3):
            f(plugtorch.full((2,), float(i)))
    assert m.last.tolist() == [4.0, 4.0]


def test_manual_seed_outside_does_not_stop_capturing():
    drop = nn.Dropout(0.5)
    f = plugtorch.compile(lambda x: drop(x) * 1.0, fullgraph=True)
    x = plugtorch.ones(100)
    for k in range(4):
        plugtorch.manual_seed(k)
        got = f(x)
        plugtorch.manual_seed(k)
        assert _bits(got) == _bits(drop(x))
    assert f.replays == 2


def test_a_generator_made_inside_the_function_falls_back():
    def f(x):
        g = plugtorch.Generator().manual_seed(3)
        return x + plugtorch.rand(x.shape, generator=g)
    run = plugtorch.compile(f)
    with pytest.warns(UserWarning, match="random generator"):
        outs = [run(plugtorch.zeros(3)).tolist() for _ in range(3)]
    assert outs[0] == outs[1] == outs[2]


def test_tensor_hooks_run_eagerly_and_a_new_hook_is_not_skipped():
    w = plugtorch.ones(3, requires_grad=True)

    def step(x):
        w.grad = None
        (w * x).sum().backward()
        return w.grad * 1.0
    f = plugtorch.compile(step)
    x = plugtorch.full((3,), 2.0)
    f(x), f(x), f(x)
    assert f.replays == 1
    seen = []
    w.register_hook(lambda g: seen.append(1) or g * 10)
    with pytest.warns(UserWarning, match="autograd hook"):
        assert f(x).tolist() == [20.0] * 3
    assert f(x).tolist() == [20.0] * 3 and len(seen) == 2


def _adam_closure_run(compiled: bool) -> list[bytes]:
    """A step with no arguments (its data closed over, as a training loop's), with Adam's state
    edited between steps: one moment tensor replaced, then one parameter's state dropped."""
    model, opt, step = _linear_step(plugtorch.optim.Adam, lr=0.1)
    x, y = plugtorch.ones(4, 5), plugtorch.zeros(4, 3)
    run = plugtorch.compile(lambda: step(x, y)) if compiled else (lambda: step(x, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(9):
            if i == 4:
                opt.state[model.weight]["exp_avg"] = plugtorch.zeros(3, 5)
            if i == 6:
                del opt.state[model.bias]  # made afresh at the next step, its count from 1
            run()
    if compiled:
        assert run.replays >= 3 and run.captures >= 2
    return [p.detach().numpy().tobytes() for p in model.parameters()]


def test_optimizer_state_replaced_between_argumentless_steps():
    assert _adam_closure_run(False) == _adam_closure_run(True)


def test_a_call_under_a_mode_that_changes_results_runs_eagerly():
    """autocast's casts, forward AD's tangents and vmap's batching happen at dispatch, which a
    replay skips: a compiled function replayed under them returned float32 where eager gave
    bfloat16, and lost the tangent. A profiler only watches: under it the function replays."""
    import plugtorch.autograd.forward_ad as fwAD
    lin = nn.Linear(4, 4)
    f = plugtorch.compile(lambda x: lin(x))
    x = plugtorch.randn(2, 4)
    with plugtorch.no_grad():
        for _ in range(3):
            f(x)
        with pytest.warns(UserWarning, match="dispatch mode that changes what ops compute"), \
                plugtorch.autocast("cpu", dtype=plugtorch.bfloat16):
            got, want = f(x), lin(x)
        assert got.dtype == want.dtype == plugtorch.bfloat16 and got.float().tolist() == want.float().tolist()
        assert f(x).dtype == plugtorch.float32 and f.replays == 2  # and replays again after
    g = plugtorch.compile(lambda x: (x * x).sum())
    v = plugtorch.randn(4)
    for _ in range(3):
        g(v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fwAD.dual_level():
            dual = fwAD.make_dual(v, plugtorch.ones(4))
            assert fwAD.unpack_dual(g(dual)).tangent.item() == pytest.approx(2 * v.sum().item())
        batch = plugtorch.randn(3, 4)
        np.testing.assert_array_equal(plugtorch.func.vmap(g)(batch).numpy(), (batch * batch).sum(1).numpy())
    replays = g.replays
    with plugtorch.profiler.profile():
        g(v)
    assert g.replays == replays + 1


def test_the_default_dtype_is_part_of_the_guard():
    """Tensors a function makes (zeros, a literal, arange * 0.1) take the default dtype: after
    set_default_dtype(float64) the replay still made float32 ones, a value a float32 rounding off."""
    f = plugtorch.compile(lambda x: x + plugtorch.tensor([0.1, 0.7]) + plugtorch.arange(2) * 0.1)
    x = plugtorch.ones(2, dtype=plugtorch.float64)
    for _ in range(3):
        f(x)
    try:
        plugtorch.set_default_dtype(plugtorch.float64)
        got, want = f(x), x + plugtorch.tensor([0.1, 0.7]) + plugtorch.arange(2) * 0.1
    finally:
        plugtorch.set_default_dtype(plugtorch.float32)
    assert _bits(got) == _bits(want)
