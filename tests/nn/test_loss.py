"""Losses (modules and functional forms) against PyTorch: values and input gradients."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn

REDUCTIONS = ["mean", "sum", "none"]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float64)


def compare_loss(torch, ours, theirs, x, target, *, extra_inputs=(), atol=1e-7):
    """Loss value and d(loss)/d(x) agree (with a random upstream grad for 'none')."""
    x_pt = plugtorch.tensor(x, requires_grad=True)
    x_t = torch.tensor(x, requires_grad=True)
    t_pt = plugtorch.tensor(target)
    t_t = torch.tensor(target)
    out, t_out = ours(x_pt, t_pt), theirs(x_t, t_t)
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), atol=atol, rtol=1e-6)
    up = rand(*t_out.shape, seed=5)
    (out * plugtorch.tensor(up)).sum().backward()
    (t_out * torch.tensor(up)).sum().backward()
    np.testing.assert_allclose(x_pt.grad.numpy(), x_t.grad.numpy(), atol=atol, rtol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["MSELoss", "L1Loss"])
def test_regression_losses(torch, name, reduction):
    compare_loss(torch, getattr(nn, name)(reduction=reduction),
                 getattr(torch.nn, name)(reduction=reduction), rand(3, 4), rand(3, 4, seed=1))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_weighted_regression_losses(torch, name, reduction):
    w = rand(3, 4, seed=7) ** 2

    def ours(x, t):
        return getattr(F, name)(x, t, reduction=reduction, weight=plugtorch.tensor(w))

    def theirs(x, t):
        return getattr(torch.nn.functional, name)(x, t, reduction=reduction, weight=torch.tensor(w))
    compare_loss(torch, ours, theirs, rand(3, 4), rand(3, 4, seed=1))
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        getattr(F, name)(plugtorch.zeros(3), plugtorch.zeros(3), weight=plugtorch.ones(2))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs", [
    dict(), dict(ignore_index=2), dict(label_smoothing=0.1), dict(weight=True),
    dict(weight=True, ignore_index=1, label_smoothing=0.2),
])
def test_cross_entropy_class_indices(torch, reduction, kwargs):
    target = np.array([0, 2, 1, 2, 3])
    kw_pt, kw_t = dict(kwargs), dict(kwargs)
    if kwargs.get("weight"):
        w = np.array([0.5, 1.0, 2.0, 1.5])
        kw_pt["weight"], kw_t["weight"] = plugtorch.tensor(w), torch.tensor(w)
    compare_loss(torch, nn.CrossEntropyLoss(reduction=reduction, **kw_pt),
                 torch.nn.CrossEntropyLoss(reduction=reduction, **kw_t), rand(5, 4), target)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs", [dict(), dict(label_smoothing=0.3), dict(weight=True)])
def test_cross_entropy_probabilities(torch, reduction, kwargs):
    p = np.random.default_rng(3).random((4, 3))
    p /= p.sum(1, keepdims=True)
    kw_pt, kw_t = dict(kwargs), dict(kwargs)
    if kwargs.get("weight"):
        w = np.array([0.2, 1.0, 3.0])
        kw_pt["weight"], kw_t["weight"] = plugtorch.tensor(w), torch.tensor(w)
    compare_loss(torch, nn.CrossEntropyLoss(reduction=reduction, **kw_pt),
                 torch.nn.CrossEntropyLoss(reduction=reduction, **kw_t), rand(4, 3), p)


def test_cross_entropy_spatial_and_unbatched(torch):
    target = np.random.default_rng(1).integers(0, 3, (2, 4, 5))
    compare_loss(torch, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), rand(2, 3, 4, 5), target)
    compare_loss(torch, nn.CrossEntropyLoss(label_smoothing=0.1),
                 torch.nn.CrossEntropyLoss(label_smoothing=0.1), rand(2, 3, 4, 5), target)
    compare_loss(torch, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), rand(4), np.array(2))


def test_cross_entropy_is_stable_for_huge_logits(torch):
    x = np.array([[1000.0, -1000.0, 0.0], [-5e4, 5e4, 1.0]])
    compare_loss(torch, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), x, np.array([1, 0]))
    loss = F.cross_entropy(plugtorch.tensor(x, dtype=plugtorch.float32), plugtorch.tensor([1, 0]))
    assert np.isfinite(loss.item())


def test_cross_entropy_errors():
    x = plugtorch.randn(3, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, plugtorch.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.cross_entropy(x, plugtorch.tensor([0, 1]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(RuntimeError, match="weight tensor should be defined"):
        F.cross_entropy(x, plugtorch.tensor([0, 1, 2]), weight=plugtorch.ones(3))
    with pytest.raises(RuntimeError, match="class-probability target must have the input's shape"):
        F.cross_entropy(x, plugtorch.rand(3, 3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs", [dict(), dict(ignore_index=0), dict(weight=True)])
def test_nll_loss(torch, reduction, kwargs):
    kw_pt, kw_t = dict(kwargs), dict(kwargs)
    if kwargs.get("weight"):
        w = np.array([0.5, 1.0, 2.0])
        kw_pt["weight"], kw_t["weight"] = plugtorch.tensor(w), torch.tensor(w)
    compare_loss(torch, nn.NLLLoss(reduction=reduction, **kw_pt),
                 torch.nn.NLLLoss(reduction=reduction, **kw_t), rand(4, 3), np.array([0, 2, 1, 0]))


def test_nll_of_log_softmax_is_cross_entropy():
    x, t = plugtorch.randn(6, 5), plugtorch.tensor([0, 1, 2, 3, 4, 0])
    a = F.nll_loss(F.log_softmax(x, 1), t).item()
    b = F.cross_entropy(x, t).item()
    assert a == pytest.approx(b, rel=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce(torch, reduction):
    p = 1 / (1 + np.exp(-rand(3, 4)))
    target = (np.random.default_rng(2).random((3, 4)) > 0.5).astype(np.float64)
    compare_loss(torch, nn.BCELoss(reduction=reduction), torch.nn.BCELoss(reduction=reduction),
                 p, target)
    w = rand(3, 4, seed=9) ** 2
    compare_loss(torch, nn.BCELoss(weight=plugtorch.tensor(w), reduction=reduction),
                 torch.nn.BCELoss(weight=torch.tensor(w), reduction=reduction), p, target)


def test_bce_clamps_log_at_minus_100(torch):
    p = np.array([0.0, 1.0, 0.5, 0.0, 1.0])
    t = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    compare_loss(torch, nn.BCELoss(reduction="none"), torch.nn.BCELoss(reduction="none"), p, t)


def test_bce_gradient_with_respect_to_target(torch):
    p = np.array([0.2, 0.7, 0.0])
    t = np.array([0.3, 0.9, 0.5])
    ours_t = plugtorch.tensor(t, requires_grad=True)
    theirs_t = torch.tensor(t, requires_grad=True)
    F.binary_cross_entropy(plugtorch.tensor(p), ours_t).backward()
    torch.nn.functional.binary_cross_entropy(torch.tensor(p), theirs_t).backward()
    np.testing.assert_allclose(ours_t.grad.numpy(), theirs_t.grad.numpy())
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(plugtorch.tensor([1.5]), plugtorch.tensor([1.0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits(torch, reduction):
    x = rand(3, 4) * 5
    target = np.random.default_rng(2).random((3, 4))
    compare_loss(torch, nn.BCEWithLogitsLoss(reduction=reduction),
                 torch.nn.BCEWithLogitsLoss(reduction=reduction), x, target)
    pw = np.array([0.5, 1.0, 2.0, 3.0])
    w = rand(3, 4, seed=4) ** 2
    compare_loss(torch,
                 nn.BCEWithLogitsLoss(weight=plugtorch.tensor(w), pos_weight=plugtorch.tensor(pw),
                                      reduction=reduction),
                 torch.nn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(pw),
                                            reduction=reduction), x, target)


def test_bce_with_logits_is_stable(torch):
    x = np.array([800.0, -800.0, 0.0])
    t = np.array([0.0, 1.0, 1.0])
    compare_loss(torch, nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss(), x, t)


def test_legacy_size_average_and_reduce(torch):
    with pytest.warns(UserWarning):
        loss = nn.MSELoss(size_average=False)
    assert loss.reduction == "sum"
    with pytest.warns(UserWarning):
        assert nn.L1Loss(reduce=False).reduction == "none"


def test_loss_module_weight_is_a_buffer():
    loss = nn.CrossEntropyLoss(weight=plugtorch.ones(3))
    assert list(loss.state_dict()) == ["weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []
