"""adam_step_, the registered op optim.Adam/AdamW update through: the NumPy kernel agrees bit for
bit with the op's decomposition, the op mutates and versions its operands, and refuses bad input.
(Values against torch: the conformance kit runs the op's samples; tests/optim compares whole
optimizers with torch step for step.)"""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import fused_optim, native

import plugtorch as pt
from plugtorch.core.ops.optimizer_updates import adam_step_

_adam_step = pt.get_registry().ops["adam_step_"].decompose  # the op's decomposition

# the native kernel takes C-contiguous float arrays and hands the rest to the NumPy one
NATIVE_KERNELS = native.kernels()  # empty where the extension is not built (the cases skip, saying why)
ADAM_KERNELS = [pytest.param(fused_optim.adam_step_, id="numpy"),
                pytest.param(NATIVE_KERNELS.get("adam_step_"), id="native",
                             marks=pytest.mark.skipif(not NATIVE_KERNELS, reason=native.status()))]

OPTIONS = [dict(), dict(maximize=True), dict(weight_decay=0.1), dict(weight_decay=0.1, decoupled_weight_decay=True),
           dict(amsgrad=True), dict(beta1=0.3), dict(amsgrad=True, maximize=True, weight_decay=0.05)]


@pytest.mark.parametrize("numpy_kernel", ADAM_KERNELS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_the_numpy_kernel_is_the_decomposition_bit_for_bit_over_50_steps(dtype, options, numpy_kernel):
    options = dict(options)
    amsgrad, beta1 = options.pop("amsgrad", False), options.pop("beta1", 0.9)
    rng = np.random.default_rng(0)
    shape = (17, 5)
    arrays = [rng.standard_normal(shape).astype(dtype)] + [np.zeros(shape, dtype) for _ in range(2 + amsgrad)]
    tensors = [pt.tensor(a.copy()) for a in arrays]
    kw = dict(lr=1e-2, beta1=beta1, beta2=0.999, eps=1e-8, weight_decay=options.get("weight_decay", 0.0),
              maximize=options.get("maximize", False),
              decoupled_weight_decay=options.get("decoupled_weight_decay", False))
    for step in range(1, 51):
        grad = rng.standard_normal(shape).astype(dtype)
        numpy_kernel(arrays[0], grad, arrays[1], arrays[2], arrays[3] if amsgrad else None, step=step, **kw)
        with pt.no_grad():
            _adam_step(tensors[0], pt.tensor(grad), tensors[1], tensors[2], tensors[3] if amsgrad else None,
                       step=step, **kw)
    for a, t in zip(arrays, tensors):
        np.testing.assert_array_equal(a, t.numpy())


def test_the_op_updates_in_place_and_bumps_versions():
    p, g, m, v = pt.randn(4), pt.randn(4), pt.zeros(4), pt.zeros(4)
    before = [t._version for t in (p, m, v)]
    data = p.numpy().copy()
    with pt.no_grad():
        out = adam_step_(p, g, m, v, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, step=1)
    assert out is p and not np.array_equal(p.numpy(), data)
    assert all(t._version > b for t, b in zip((p, m, v), before))
    assert g._version == 0


def test_adam_goes_through_the_op(monkeypatch):
    import plugtorch.optim.adam as adam_module
    calls = []
    monkeypatch.setattr(adam_module, "adam_step_", lambda *a, **k: calls.append(k["step"]))
    p = pt.randn(3, requires_grad=True)
    opt = pt.optim.Adam([p], foreach=False)  # the loop (foreach: tests/optim/test_foreach_adamw.py)
    for _ in range(2):
        p.grad = pt.ones(3)
        opt.step()
    assert calls == [1, 2]


@pytest.mark.parametrize("bad, message", [
    (dict(grad=pt.zeros(3)), r"'grad' is float32 \[3\] on .*must match the floating parameter: float32 \[4\]"),
    (dict(exp_avg=pt.zeros(4, dtype=pt.float64)), r"'exp_avg' is float64 \[4\]"),
    (dict(param=pt.zeros(4, dtype=pt.int64), grad=pt.zeros(4, dtype=pt.int64)), r"'param' is int64"),
    (dict(step=0), r"step is the number of this update, counted from 1; got 0"),
])
def test_bad_input_is_named(bad, message):
    args = dict(param=pt.zeros(4), grad=pt.zeros(4), exp_avg=pt.zeros(4), exp_avg_sq=pt.zeros(4), step=1)
    args.update(bad)
    with pytest.raises((RuntimeError, ValueError), match=message), pt.no_grad():
        adam_step_(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, **args)


def test_an_operand_on_another_device_of_a_multi_device_backend_is_refused(monkeypatch):
    """On a backend with device ordinals (CuPy: one per GPU) every operand must be on the
    parameter's device. Here the NumPy backend reports ordinal 1 for one marked array."""
    other = pt.zeros(4)
    monkeypatch.setattr(pt.get_registry().backends["numpy"], "device_index",
                        lambda a: 1 if a is other._data else 0)
    args = dict(param=pt.zeros(4), grad=pt.zeros(4), exp_avg=pt.zeros(4), exp_avg_sq=pt.zeros(4))
    with pt.no_grad():
        adam_step_(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, step=1, **args)  # all on device 0
        args["exp_avg_sq"] = other
        with pytest.raises(RuntimeError, match=r"'exp_avg_sq' is float32 \[4\] on numpy:1, but every tensor must "
                                               r"match the floating parameter: float32 \[4\] on numpy:0"):
            adam_step_(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, step=1, **args)


def test_a_parameter_that_requires_grad_is_refused_outside_no_grad():
    p = pt.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"'param' requires grad .* under plugtorch.no_grad\(\)"):
        adam_step_(p, pt.ones(2), pt.zeros(2), pt.zeros(2), lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, step=1)


# -- sgd_step_ ---------------------------------------------------------------------------------

SGD_OPTIONS = [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.2, weight_decay=0.01),
               dict(momentum=0.9, nesterov=True), dict(momentum=0.5, maximize=True), dict(weight_decay=0.1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", SGD_OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_the_sgd_kernel_is_the_decomposition_bit_for_bit_over_50_steps(dtype, options):
    _sgd_step = pt.get_registry().ops["sgd_step_"].decompose
    from plugtorch_backends.numpy_backend.fused_optim import sgd_step_ as kernel
    kw = {**dict(lr=0.05, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False), **options}
    rng = np.random.default_rng(1)
    shape = (6, 11)
    p, buf = rng.standard_normal(shape).astype(dtype), np.zeros(shape, dtype)
    tp, tbuf = pt.tensor(p.copy()), pt.tensor(buf.copy())
    with_buffer = kw["momentum"] != 0
    for step in range(1, 51):
        g = rng.standard_normal(shape).astype(dtype)
        kernel(p, g, buf if with_buffer else None, first_step=step == 1, **kw)
        with pt.no_grad():
            _sgd_step(tp, pt.tensor(g), tbuf if with_buffer else None, first_step=step == 1, **kw)
    np.testing.assert_array_equal(p, tp.numpy())
    np.testing.assert_array_equal(buf, tbuf.numpy())


def test_sgd_goes_through_the_op(monkeypatch):
    import plugtorch.optim.sgd as sgd_module
    calls = []
    monkeypatch.setattr(sgd_module, "sgd_step_", lambda *a, **k: calls.append(k["first_step"]))
    p = pt.randn(3, requires_grad=True)
    opt = pt.optim.SGD([p], lr=0.1, momentum=0.9, foreach=False)  # the loop (foreach: test_foreach_adamw.py)
    for _ in range(3):
        p.grad = pt.ones(3)
        opt.step()
    assert calls == [True, False, False]
