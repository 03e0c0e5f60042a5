"""The loss and distance layers added for PyTorch compatibility, against torch's (values and
gradients), and the behaviours of theirs that the conformance samples cannot show (warnings)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _probs(*shape, seed=0):
    e = np.exp(rand(*shape, seed=seed))
    return e / e.sum(-1, keepdims=True)


CASES = {  # name: (constructor kwargs, inputs)
    "SmoothL1Loss": (dict(beta=0.5), lambda: (rand(3, 4), rand(3, 4, seed=1))),
    "HuberLoss": (dict(delta=0.7, reduction="sum"), lambda: (rand(3, 4), rand(3, 4, seed=1))),
    "KLDivLoss": (dict(reduction="batchmean", log_target=True),
                  lambda: (np.log(_probs(3, 4)), np.log(_probs(3, 4, seed=1)))),
    "PoissonNLLLoss": (dict(full=True), lambda: (rand(3, 4), np.abs(rand(3, 4, seed=1)) * 3)),
    "MarginRankingLoss": (dict(margin=0.3), lambda: (rand(5), rand(5, seed=1), np.sign(rand(5, seed=2)))),
    "TripletMarginLoss": (dict(margin=2.0, p=1.0, swap=True),
                          lambda: (rand(4, 3), rand(4, 3, seed=1), rand(4, 3, seed=2))),
    "CosineSimilarity": (dict(dim=0), lambda: (rand(3, 4), rand(3, 4, seed=1))),
    "PairwiseDistance": (dict(p=3.0, keepdim=True), lambda: (rand(3, 4), rand(3, 4, seed=1))),
    "Softmin": (dict(dim=1), lambda: (rand(3, 4),)),
    "GLU": (dict(dim=0), lambda: (rand(4, 3),)),
}


@pytest.mark.parametrize("name", CASES)
def test_layer_matches_torch(torch, name):
    kwargs, make = CASES[name]
    arrays = make()
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    xs_p = [plugtorch.tensor(a, requires_grad=True) for a in arrays]
    xs_t = [torch.tensor(a, requires_grad=True) for a in arrays]
    y_p, y_t = ours(*xs_p), theirs(*xs_t)
    np.testing.assert_allclose(y_p.detach().numpy(), y_t.detach().numpy(), atol=1e-10)
    up = rand(*y_t.shape, seed=9)
    (y_p * plugtorch.tensor(up)).sum().backward()
    (y_t * torch.tensor(up)).sum().backward()
    for a, b in zip(xs_p, xs_t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)
    assert repr(ours) == repr(theirs)


def test_ctc_loss_layer(torch):
    x = rand(6, 2, 5)
    targets, il, tl = np.array([[1, 2, 2], [3, 4, 0]]), np.array([6, 5]), np.array([3, 2])
    ours, theirs = nn.CTCLoss(blank=0, zero_infinity=True), torch.nn.CTCLoss(blank=0, zero_infinity=True)
    a, b = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y_p = ours(a.log_softmax(2), plugtorch.tensor(targets), plugtorch.tensor(il), plugtorch.tensor(tl))
    y_t = theirs(b.log_softmax(2), torch.tensor(targets), torch.tensor(il), torch.tensor(tl))
    np.testing.assert_allclose(y_p.item(), y_t.item(), rtol=1e-12)
    y_p.backward()
    y_t.backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-12)


def test_ctc_loss_gradient_is_torchs_formula_on_raw_log_probs(torch):
    # torch's gradient adds exp(log_probs) (it assumes log_softmax inputs); ours is the same formula
    x = rand(5, 1, 4)
    a, b = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.ctc_loss(a, plugtorch.tensor([[1, 2]]), [5], [2]).backward()
    torch.nn.functional.ctc_loss(b, torch.tensor([[1, 2]]), [5], [2]).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-12)


def test_kl_div_mean_warns_as_torch_does():
    x, t = plugtorch.tensor(np.log(_probs(2, 3))), plugtorch.tensor(_probs(2, 3, seed=1))
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        mean = F.kl_div(x, t)
    assert np.isclose(mean.item(), F.kl_div(x, t, reduction="sum").item() / 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.kl_div(x, t, reduction="batchmean")


def test_kl_div_at_zero_and_negative_targets_is_torchs(torch):
    """target log(target) is torch's xlogy: 0 at a zero target, nan for a negative one, and the
    gradient in a zero target nan (log 0 + 1), where masking the term to 0 had given a finite
    value and a number for a negative target."""
    x, t = np.log(_probs(2, 3)), np.array([[0.0, 0.4, 0.6], [-0.1, 0.5, 0.6]])
    got, want = [], []
    for lib, out in ((plugtorch, got), (torch, want)):
        a, b = lib.tensor(x, requires_grad=True), lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.kl_div(a, b, reduction="none")
        loss.sum().backward()
        out += [loss.detach().numpy(), a.grad.numpy(), b.grad.numpy()]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15, equal_nan=True)
    assert got[0][0, 0] == 0 and np.isnan(got[0][1, 0]) and np.isnan(got[2][0, 0])


def test_legacy_reduction_arguments_reach_the_new_losses(torch):
    x, t = rand(3, 4), rand(3, 4, seed=1)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        ours = F.smooth_l1_loss(plugtorch.tensor(x), plugtorch.tensor(t), size_average=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.functional.smooth_l1_loss(torch.tensor(x), torch.tensor(t), size_average=False)
    np.testing.assert_allclose(ours.item(), theirs.item())


def test_huber_weight_mean_is_the_plain_mean_as_in_torch(torch):
    x, t, w = rand(3, 4), rand(3, 4, seed=1), np.abs(rand(3, 4, seed=2))
    ours = F.huber_loss(plugtorch.tensor(x), plugtorch.tensor(t), weight=plugtorch.tensor(w))
    theirs = torch.nn.functional.huber_loss(torch.tensor(x), torch.tensor(t), weight=torch.tensor(w))
    np.testing.assert_allclose(ours.item(), theirs.item())


def test_normalize_out_receives_the_result():
    x = plugtorch.tensor(rand(3, 4))
    out = plugtorch.empty(3, 4, dtype=plugtorch.float64)
    assert F.normalize(x, out=out) is out
    np.testing.assert_allclose(np.linalg.norm(out.numpy(), axis=1), 1.0)
