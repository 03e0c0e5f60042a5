"""_fused_adam_, the multi-tensor update optim.Adam/AdamW take for a group's parameters: against
torch's AdamW (its single-tensor, foreach and fused paths) over 20 steps, bit for bit against
plugtorch's own per-parameter loop, the kernels against the op's decomposition, the fallbacks,
bad input, and a plugtorch.compile replay of the step. _fused_sgd_, optim.SGD's, the same way."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from plugtorch_backends.numpy_backend import fused_optim, native

import plugtorch as pt
from plugtorch import nn
from plugtorch.core.ops.optimizer_updates import _fused_adam_, _fused_sgd_

SHAPES = [(8, 5), (5,), (), (3, 2, 4), (0, 3), (16,)]
NATIVE_KERNELS = native.kernels()  # empty where the extension is not built (the case skips, saying why)


def _grads(steps, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]


def _run(lib, cls, init, grads, **options):
    params = [lib.nn.Parameter(lib.tensor(a.copy())) for a in init]
    opt = getattr(lib.optim, cls)(params, **options)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = lib.tensor(g)
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


OPTIONS = [dict(), dict(weight_decay=0.1), dict(amsgrad=True), dict(maximize=True, lr=0.05),
           dict(betas=(0.3, 0.9), eps=1e-6)]


@pytest.mark.parametrize("cls", ["AdamW", "Adam"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
@pytest.mark.parametrize("torch_path", [dict(foreach=False), dict(fused=True)], ids=["single", "fused"])
def test_values_match_torch_over_20_steps(cls, options, torch_path):
    init = _grads(1, seed=1)[0]
    grads = _grads(20)
    options = {"lr": 1e-2, **options}
    ours, opt = _run(pt, cls, init, grads, **options)
    theirs, _ = _run(torch, cls, init, grads, **options, **torch_path)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        # float32 rounding: torch's fused kernel orders a few operations its own way
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-7, err_msg=f"param {i}")
    assert all(s["step"] == 20 for s in opt.state.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", [*OPTIONS, dict(amsgrad=True, maximize=True, weight_decay=0.05)],
                         ids=lambda o: ",".join(o) or "default")
def test_the_multi_tensor_step_is_the_loop_bit_for_bit(monkeypatch, dtype, options):
    import plugtorch.optim.adam as adam_module
    calls = []
    real = adam_module._fused_adam_
    monkeypatch.setattr(adam_module, "_fused_adam_", lambda *a, **k: (calls.append(len(a[0])), real(*a, **k)))
    init = _grads(1, dtype, seed=1)[0]
    grads = _grads(8, dtype)
    multi, _ = _run(pt, "AdamW", init, grads, **options)
    loop, _ = _run(pt, "AdamW", init, grads, foreach=False, **options)
    fused, _ = _run(pt, "AdamW", init, grads, fused=True, **options)
    assert calls == [len(SHAPES)] * 7 * 2  # every step after the first, one call a group
    for a, b, c in zip(multi, loop, fused):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, b)


KERNELS = [pytest.param(fused_optim._fused_adam_, id="numpy"),
           pytest.param(NATIVE_KERNELS.get("_fused_adam_"), id="native",
                        marks=pytest.mark.skipif(not NATIVE_KERNELS, reason=native.status()))]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("amsgrad", [False, True])
def test_the_kernels_are_the_decomposition_bit_for_bit(kernel, amsgrad):
    decompose = pt.get_registry().ops["_fused_adam_"].decompose
    rng = np.random.default_rng(3)
    lists = 5 if amsgrad else 4
    arrays = [np.array(rng.standard_normal(s), np.float32) for _ in range(lists) for s in SHAPES]
    n = len(SHAPES)
    for k in range(2 * n, lists * n):
        np.abs(arrays[k], out=arrays[k])  # second moments are never negative
    arrays[n] = arrays[n][..., ::-1] if arrays[n].ndim else arrays[n]  # a strided gradient: the NumPy fallback
    tensors = [pt.tensor(a.copy()) for a in arrays]
    attrs = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, maximize=False,
                 decoupled_weight_decay=True, amsgrad=amsgrad)
    for step in range(1, 6):
        kernel(arrays, step=step, **attrs)
        with pt.no_grad():
            decompose(tensors, step=step, **attrs)
    for a, t in zip(arrays, tensors):
        np.testing.assert_array_equal(a, t.numpy())


def test_the_op_updates_in_place_and_bumps_versions():
    params, grads = [pt.randn(4), pt.randn(2, 2)], [pt.randn(4), pt.randn(2, 2)]
    m, v = [pt.zeros(4), pt.zeros(2, 2)], [pt.zeros(4), pt.zeros(2, 2)]
    before = [p.numpy().copy() for p in params]
    with pt.no_grad():
        assert _fused_adam_(params, grads, m, v, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, step=1) is None
    assert all(not np.array_equal(p.numpy(), b) for p, b in zip(params, before))
    assert all(t._version == 1 for t in params + m + v) and all(g._version == 0 for g in grads)


@pytest.mark.parametrize("bad, message", [
    (dict(grads=[pt.zeros(4)]), r"_fused_adam_\(\): grads has 1 tensors, but params has 2"),
    (dict(exp_avgs=[pt.zeros(4), pt.zeros(3)]), r"'exp_avg' is float32 \[3\] .* float32 \[2, 2\]"),
    (dict(params=[pt.zeros(4), pt.zeros(2, 2, dtype=pt.float64)]),
     r"params\[1\] is float64 .* must be float32 .* as params\[0\] is"),
    (dict(step=0), r"step is the number of this update, counted from 1; got 0"),
])
def test_bad_input_is_refused_naming_the_op(bad, message):
    args = dict(params=[pt.zeros(4), pt.zeros(2, 2)], grads=[pt.zeros(4), pt.zeros(2, 2)],
                exp_avgs=[pt.zeros(4), pt.zeros(2, 2)], exp_avg_sqs=[pt.zeros(4), pt.zeros(2, 2)])
    step = bad.pop("step", 1)
    args.update(bad)
    with pytest.raises((RuntimeError, ValueError), match=message), pt.no_grad():
        _fused_adam_(*args.values(), lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, step=step)


def test_fused_and_foreach_together_are_refused_as_torch_does():
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        pt.optim.AdamW([nn.Parameter(pt.zeros(2))], fused=True, foreach=True)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], fused=True, foreach=True)


def test_mixed_dtypes_or_step_counts_take_the_loop(monkeypatch):
    import plugtorch.optim.adam as adam_module
    calls = []
    monkeypatch.setattr(adam_module, "_fused_adam_", lambda *a, **k: calls.append(a))
    mixed = [nn.Parameter(pt.zeros(2)), nn.Parameter(pt.zeros(2, dtype=pt.float64))]
    opt = pt.optim.AdamW(mixed)
    late = nn.Parameter(pt.zeros(3))
    for _ in range(3):
        for p in mixed:
            p.grad = pt.ones_like(p)
        opt.step()
    opt.add_param_group({"params": [late]})
    assert calls == []
    a, b = nn.Parameter(pt.zeros(2)), nn.Parameter(pt.zeros(2))
    opt = pt.optim.AdamW([a, b])
    a.grad = pt.ones(2)
    opt.step()  # b has no gradient: it stays a step behind a
    b.grad = pt.ones(2)
    opt.step()
    assert calls == []
    opt.step()  # b's first step counted: still one behind
    assert calls == []


def test_a_compiled_step_replays_the_multi_tensor_update_bitwise():
    def train(compiled):
        pt.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = pt.optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True)
        sched = pt.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
        x, y = pt.randn(5, 6), pt.randn(5, 3)

        def step():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        run = pt.compile(step) if compiled else step
        for _ in range(6):
            run()
            sched.step()
        return [p.detach().numpy().copy() for p in model.parameters()], run

    eager, _ = train(False)
    compiled, run = train(True)
    assert run.captures == 1 and run.replays == 4
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)


def test_a_backend_without_the_kernel_keeps_the_per_parameter_op(monkeypatch):
    import plugtorch.optim.adam as adam_module
    params = [nn.Parameter(pt.ones(3)), nn.Parameter(pt.ones(2))]
    monkeypatch.delitem(params[0]._backend.kernels, "_fused_adam_")
    calls = []
    monkeypatch.setattr(adam_module, "_fused_adam_", lambda *a, **k: calls.append(a))
    opt = pt.optim.AdamW(params)
    for _ in range(3):
        for p in params:
            p.grad = pt.ones_like(p)
        opt.step()
    assert calls == [] and all(s["step"] == 3 for s in opt.state.values())


SGD_OPTIONS = [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True, weight_decay=0.01),
               dict(momentum=0.8, dampening=0.3, maximize=True)]


@pytest.mark.parametrize("options", SGD_OPTIONS, ids=lambda o: ",".join(o) or "default")
@pytest.mark.parametrize("torch_path", [dict(foreach=False), dict(fused=True)], ids=["single", "fused"])
def test_sgd_matches_torch_over_20_steps(options, torch_path):
    init = _grads(1, seed=1)[0]
    grads = _grads(20)
    ours, _ = _run(pt, "SGD", init, grads, lr=0.05, **options)
    theirs, _ = _run(torch, "SGD", init, grads, lr=0.05, **options, **torch_path)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-7, err_msg=f"param {i}")


@pytest.mark.parametrize("options", SGD_OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_the_multi_tensor_sgd_step_is_the_loop_bit_for_bit(monkeypatch, options):
    import plugtorch.optim.sgd as sgd_module
    calls = []
    real = sgd_module._fused_sgd_
    monkeypatch.setattr(sgd_module, "_fused_sgd_", lambda *a, **k: (calls.append(len(a[0])), real(*a, **k)))
    init = _grads(1, np.float64, seed=1)[0]
    grads = _grads(6, np.float64)
    multi, _ = _run(pt, "SGD", init, grads, lr=0.05, **options)
    loop, _ = _run(pt, "SGD", init, grads, lr=0.05, foreach=False, **options)
    fused, _ = _run(pt, "SGD", init, grads, lr=0.05, fused=True, **options)
    first = 1 if options.get("momentum") else 0  # the first step makes the buffers, one op each
    assert calls == [len(SHAPES)] * (6 - first) * 2
    for a, b, c in zip(multi, loop, fused):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, b)


def test_fused_sgd_kernel_is_its_decomposition_and_refuses_bad_lists():
    decompose = pt.get_registry().ops["_fused_sgd_"].decompose
    rng = np.random.default_rng(6)
    arrays = [np.array(rng.standard_normal(s), np.float32) for _ in range(3) for s in SHAPES]
    tensors = [pt.tensor(a.copy()) for a in arrays]
    attrs = dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.01, nesterov=True, maximize=False,
                 first_step=False, momentum_buffers=True)
    for _ in range(3):
        fused_optim._fused_sgd_(arrays, **attrs)
        with pt.no_grad():
            decompose(tensors, **attrs)
    for a, t in zip(arrays, tensors):
        np.testing.assert_array_equal(a, t.numpy())
    with pytest.raises(ValueError, match=r"_fused_sgd_\(\): grads has 1 tensors, but params has 2"), pt.no_grad():
        _fused_sgd_([pt.zeros(2), pt.zeros(3)], [pt.zeros(2)], lr=0.1)
    with pytest.raises(RuntimeError, match=r"_fused_sgd_\(\): 'momentum_buffer' is float32 \[2\]"), pt.no_grad():
        _fused_sgd_([pt.zeros(3)], [pt.zeros(3)], [pt.zeros(2)], lr=0.1, momentum=0.9)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        pt.optim.SGD([nn.Parameter(pt.zeros(2))], lr=0.1, fused=True, foreach=True)


def test_a_compiled_sgd_step_replays_the_multi_tensor_update_bitwise():
    def train(compiled):
        pt.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = pt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
        x, y = pt.randn(5, 6), pt.randn(5, 3)

        def step():
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
        run = pt.compile(step) if compiled else step
        for _ in range(6):
            run()
        return [p.detach().numpy().copy() for p in model.parameters()], run

    eager, _ = train(False)
    compiled, run = train(True)
    assert run.captures == 1 and run.replays == 4
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)
