"""autograd.Function, tensor hooks and retain_grad, anomaly detection."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.autograd import Function, gradcheck


class ScaledSquare(Function):
    @staticmethod
    def forward(ctx, x, scale, y):
        ctx.save_for_backward(x, y)
        ctx.scale = scale
        return x * x * scale + y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = g * 2 * x * ctx.scale if ctx.needs_input_grad[0] else None
        gy = g if ctx.needs_input_grad[2] else None
        return gx, None, gy


def test_custom_function_forward_backward_and_needs_input_grad():
    x = plugtorch.tensor([1.0, 2.0], dtype=plugtorch.float64, requires_grad=True)
    y = plugtorch.tensor([0.5, 0.5], dtype=plugtorch.float64)
    out = ScaledSquare.apply(x, 3.0, y)
    assert out.grad_fn is not None and out.tolist() == [3.5, 12.5]
    out.sum().backward()
    assert x.grad.tolist() == [6.0, 12.0] and y.grad is None
    assert gradcheck(lambda a, b: ScaledSquare.apply(a, 1.5, b),
                     (x.detach().requires_grad_(), y.clone().requires_grad_()))


def test_custom_function_saved_tensors_and_needs_input_grad_seen_by_backward():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a)
            return a * b

        @staticmethod
        def backward(ctx, g):
            seen["needs"] = ctx.needs_input_grad
            (a,) = ctx.saved_tensors
            seen["saved"] = a.tolist()
            return g * 0 + 1, None

    a = plugtorch.tensor([2.0], requires_grad=True)
    Probe.apply(a, plugtorch.tensor([3.0])).sum().backward()
    assert seen == {"needs": (True, False), "saved": [2.0]}


def test_function_with_no_grad_inputs_builds_no_graph():
    out = ScaledSquare.apply(plugtorch.ones(2), 2.0, plugtorch.ones(2))
    assert out.grad_fn is None and not out.requires_grad


def test_register_hook_may_replace_the_gradient_and_runs_once_per_backward():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    calls = []
    y.register_hook(lambda g: calls.append(g.tolist()) or g * 10)
    (y * y).sum().backward()
    assert calls == [[6.0, 12.0]]
    assert x.grad.tolist() == [180.0, 360.0]


def test_leaf_hook_and_handle_remove():
    x = plugtorch.tensor([1.0], requires_grad=True)
    handle = x.register_hook(lambda g: g * 0)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [0.0]
    handle.remove()
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0]


def test_retain_grad_on_intermediates():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    z = y.exp()
    z.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), np.exp([2.0, 4.0]), rtol=1e-6)
    assert z.grad is None


def _make_nan(x):
    return (x - x).sqrt() * 0  # sqrt'(0) = inf, times 0: the forward is finite, the gradient is not


def test_detect_anomaly_names_the_op_and_the_user_line():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    with plugtorch.autograd.detect_anomaly():
        y = _make_nan(x).sum()
        with pytest.raises(RuntimeError) as info:
            y.backward()
    msg = str(info.value)
    assert "returned nan or inf values" in msg and "sqrt" in msg
    assert "_make_nan" in msg and "test_function_hooks_anomaly.py" in msg


def test_without_anomaly_mode_nan_gradients_pass_silently():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    _make_nan(x).sum().backward()
    assert np.isnan(x.grad.numpy()).all()


def test_set_detect_anomaly_switches_globally():
    try:
        plugtorch.autograd.set_detect_anomaly(True)
        assert plugtorch.autograd.is_anomaly_enabled()
        x = plugtorch.tensor([1.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="SqrtBackward0"):
            _make_nan(x).sum().backward()
    finally:
        plugtorch.autograd.set_detect_anomaly(False)
    assert not plugtorch.autograd.is_anomaly_enabled()
