"""The loss ops beyond what the conformance kit checks: gradients torch does not give (class
weights, pos_weight), no host reads on a device backend, fused kernels for the forward and the
backward, and torch's top-level spelling of binary_cross_entropy_with_logits."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.autograd import gradcheck, gradgradcheck

from .backend_helpers import device_like_backend, register

REDUCTIONS = ["mean", "sum", "none"]


def t(*shape, seed=0, positive=False, device=None):
    x = np.random.default_rng(seed).standard_normal(shape)
    return plugtorch.tensor(np.abs(x) + 0.5 if positive else x, device=device).requires_grad_()


TARGET = plugtorch.tensor([0, 2, 1, 2])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs", [dict(), dict(label_smoothing=0.2), dict(ignore_index=2),
                                    dict(ignore_index=1, label_smoothing=0.3)])
def test_cross_entropy_is_differentiable_in_the_class_weights(reduction, kwargs):
    """torch refuses a weight that requires grad; the gradient is well defined, and gradient
    penalties or learned class weights use it ('mean' divides by the weights too)."""
    def fn(x, w):
        return F.cross_entropy(x, TARGET, w, reduction=reduction, **kwargs)
    assert gradcheck(fn, (t(4, 3), t(3, seed=1, positive=True)))
    assert gradgradcheck(fn, (t(4, 3), t(3, seed=1, positive=True)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weight_gradients_of_the_other_losses(reduction):
    p = plugtorch.softmax(t(4, 3, seed=5).detach(), 1)
    w, pw = t(4, 3, seed=2, positive=True), t(3, seed=4, positive=True)
    assert gradcheck(lambda x, c: F.cross_entropy(x, p, c, reduction=reduction, label_smoothing=0.1),
                     (t(4, 3), t(3, seed=1, positive=True)))
    assert gradcheck(lambda x, c: F.nll_loss(x, TARGET, c, reduction=reduction, ignore_index=1),
                     (t(4, 3), t(3, seed=1, positive=True)))
    probs = plugtorch.sigmoid(t(4, 3, seed=3)).detach().requires_grad_()
    assert gradcheck(lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction=reduction),
                     (probs, p.clone().requires_grad_(), w))
    assert gradgradcheck(
        lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, reduction=reduction, pos_weight=d),
        (t(4, 3), p.clone().requires_grad_(), w, pw))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_regression_weight_gradient_matches_torch(torch, name, reduction):
    """torch's weighted mse/l1 are compositions, so it does differentiate their weight."""
    rng = np.random.default_rng(0)
    x, y, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.random((3, 4)) + 0.1
    ours = [plugtorch.tensor(a, requires_grad=True) for a in (x, y, w)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, y, w)]
    out = getattr(F, name)(*ours[:2], reduction=reduction, weight=ours[2])
    t_out = getattr(torch.nn.functional, name)(*theirs[:2], reduction=reduction, weight=theirs[2])
    up = rng.standard_normal(tuple(t_out.shape))
    (out * plugtorch.tensor(up)).sum().backward()
    (t_out * torch.tensor(up)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_each_loss_is_one_graph_node():
    x = t(4, 3)
    assert F.cross_entropy(x, TARGET, label_smoothing=0.1).grad_fn.op == "cross_entropy"
    assert F.mse_loss(x, t(4, 3, seed=1)).grad_fn.op == "mse_loss"
    assert F.binary_cross_entropy_with_logits(x, t(4, 3, seed=1).detach()).grad_fn.op == \
        "binary_cross_entropy_with_logits"


# -- no host reads on a device backend -------------------------------------------------------

@pytest.fixture(scope="module")
def device_backend():
    return device_like_backend()


def test_losses_never_read_device_memory(device_backend):
    dev, reads = device_backend
    x = t(4, 3, device=dev)
    target = plugtorch.tensor([0, 2, 1, 2], device=dev)
    probs = plugtorch.tensor(np.full((4, 3), 0.5), device=dev)
    weight = plugtorch.tensor([1.0, 2.0, 0.5], device=dev)
    reads.clear()
    losses = [F.cross_entropy(x, target, weight, ignore_index=1, label_smoothing=0.1),
              F.nll_loss(F.log_softmax(x, 1), target, weight),
              F.binary_cross_entropy(plugtorch.sigmoid(x), probs),
              F.binary_cross_entropy_with_logits(x, probs, pos_weight=weight),
              F.mse_loss(x, probs), F.l1_loss(x, probs)]
    sum(losses).backward()
    assert reads == [], "a loss read device memory on the host (a hidden sync)"
    assert x.grad is not None


def test_value_checks_run_on_a_device_backend_only_in_debug_mode(device_backend):
    dev, reads = device_backend
    x = plugtorch.randn(2, 3, device=dev)
    bad = plugtorch.tensor([0, 7], device=dev)
    reads.clear()
    with plugtorch.debug_mode():
        with pytest.raises(IndexError, match="Target 7 is out of bounds for 3 classes"):
            F.cross_entropy(x, bad)
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            F.binary_cross_entropy(plugtorch.tensor([1.5], device=dev), plugtorch.tensor([1.0], device=dev))
    assert reads, "debug mode asked for the checks, which read the values"
    reads.clear()
    F.binary_cross_entropy(plugtorch.tensor([1.5], device=dev), plugtorch.tensor([1.0], device=dev))
    assert reads == []  # unchecked: the values are the kernel's business, as on a GPU


# -- fused kernels for the forward and the backward -----------------------------------------

def _np_softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _fused_ce(calls):
    """Kernels for class-index targets without smoothing, written on NumPy arrays."""
    def weights(target, weight, ignore_index, dtype):
        valid = target != ignore_index
        safe = np.where(valid, target, 0)
        w = valid.astype(dtype) * (1.0 if weight is None else weight[safe])
        return w, safe

    def forward(x, target, weight, *, ignore_index, reduction, label_smoothing):
        calls.append("forward")
        assert label_smoothing == 0 and not np.issubdtype(target.dtype, np.floating)
        w, safe = weights(target, weight, ignore_index, x.dtype)
        logp = np.log(_np_softmax(x))
        loss = -np.take_along_axis(logp, safe[:, None], 1)[:, 0] * w
        return np.asarray({"none": loss, "sum": loss.sum(), "mean": loss.sum() / w.sum()}[reduction])

    def backward(g, x, target, weight, *, ignore_index, reduction, label_smoothing):
        calls.append("backward")
        w, safe = weights(target, weight, ignore_index, x.dtype)
        dx = _np_softmax(x)
        dx[np.arange(len(safe)), safe] -= 1
        scale = g[:, None] if reduction == "none" else (g / w.sum() if reduction == "mean" else g)
        return dx * w[:, None] * scale
    return {"cross_entropy": forward, "cross_entropy_backward": backward}


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_fused_cross_entropy_kernels_serve_forward_and_backward(torch, reduction):
    calls: list = []
    dev = register(kernels=_fused_ce(calls))
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 4)), np.array([0.5, 1.0, 2.0, 1.5])
    target = np.array([0, 3, 1, 2, 3])
    ours = plugtorch.tensor(x, device=dev, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    out = F.cross_entropy(ours, plugtorch.tensor(target, device=dev), plugtorch.tensor(w, device=dev),
                          ignore_index=1, reduction=reduction)
    t_out = torch.nn.functional.cross_entropy(theirs, torch.tensor(target), torch.tensor(w), ignore_index=1,
                                              reduction=reduction)
    up = rng.standard_normal(tuple(t_out.shape))
    out.backward(plugtorch.tensor(up, device=dev))
    t_out.backward(torch.tensor(up))
    assert calls == ["forward", "backward"]  # the rule asked for the backward op: its kernel ran
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-12)
    # double backward still works: the backward kernel is differentiated through its decomposition
    assert gradgradcheck(lambda a: F.cross_entropy(a, plugtorch.tensor(target, device=dev), reduction=reduction),
                         (plugtorch.tensor(x, device=dev, requires_grad=True),))


def test_top_level_bce_with_logits_takes_torchs_arguments(torch):
    rng = np.random.default_rng(2)
    x, y, w, pw = rng.standard_normal((3, 4)), rng.random((3, 4)), rng.random((3, 4)), rng.random(4) + 0.5
    for reduction, name in ((0, "none"), (1, "mean"), (2, "sum")):
        ours = plugtorch.binary_cross_entropy_with_logits(*(plugtorch.tensor(a) for a in (x, y, w, pw)), reduction)
        theirs = torch.binary_cross_entropy_with_logits(*(torch.tensor(a) for a in (x, y, w, pw)), reduction)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
        spelled = plugtorch.binary_cross_entropy_with_logits(*(plugtorch.tensor(a) for a in (x, y, w, pw)), name)
        np.testing.assert_allclose(spelled.numpy(), theirs.numpy(), rtol=1e-12)


def test_legacy_arguments_warn_at_the_callers_line():
    with pytest.warns(UserWarning, match="reduction='sum'") as record:
        F.mse_loss(plugtorch.zeros(2), plugtorch.ones(2), size_average=False)
    assert record[0].filename == __file__


def test_a_loss_can_be_accumulated_in_place_before_backward():
    """No rule reads the op's output, so ``loss += other`` (an in-place add on it) is fine, as in torch."""
    x = t(4, 3)
    w = t(3, seed=1, positive=True)
    losses = [F.cross_entropy(x, TARGET, w), F.nll_loss(x, TARGET, w), F.mse_loss(x, x.detach() * 2, weight=x.detach()),
              F.l1_loss(x, x.detach() * 2), F.binary_cross_entropy_with_logits(x, x.detach().sigmoid())]
    for loss in losses:
        loss += 1.0
        loss.backward()
    assert x.grad is not None and w.grad is not None
