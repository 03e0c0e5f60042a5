"""nn.utils: gradient clipping against torch; parameter <-> vector conversion."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import nn
from plugtorch.nn.utils import clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters


def grads_pair(torch, scale=1.0):
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (4,), (2, 2, 2)]
    arrays = [rng.standard_normal(s) * scale for s in shapes]
    ours, theirs = [], []
    for a in arrays:
        p = nn.Parameter(plugtorch.zeros(a.shape, dtype=plugtorch.float64))
        p.grad = plugtorch.tensor(a)
        t = torch.zeros(a.shape, dtype=torch.float64, requires_grad=True)
        t.grad = torch.tensor(a)
        ours.append(p)
        theirs.append(t)
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(torch, norm_type, max_norm):
    ours, theirs = grads_pair(torch)
    total = clip_grad_norm_(ours, max_norm, norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert total.item() == pytest.approx(t_total.item(), rel=1e-9)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-9)


def test_clip_grad_norm_edge_cases():
    assert clip_grad_norm_([nn.Parameter(plugtorch.zeros(2))], 1.0).item() == 0.0
    p = nn.Parameter(plugtorch.zeros(2))
    p.grad = plugtorch.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(p, 1.0, error_if_nonfinite=True)


def test_clip_grad_value_matches_torch(torch):
    ours, theirs = grads_pair(torch)
    clip_grad_value_(ours, 0.3)
    torch.nn.utils.clip_grad_value_(theirs, 0.3)
    for p, t in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())


def test_vector_round_trip():
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    vec = parameters_to_vector(net.parameters())
    assert vec.shape == (11,)
    vector_to_parameters(vec * 0 + plugtorch.arange(11).float(), net.parameters())
    assert net[0].weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert net[1].bias.tolist() == [10.0]
    assert isinstance(net[0].weight, nn.Parameter) and net[0].weight.requires_grad
    with pytest.raises(RuntimeError, match="11 elements"):
        vector_to_parameters(plugtorch.zeros(3), net.parameters())
    with pytest.raises(TypeError, match="expected plugtorch.Tensor"):
        vector_to_parameters([0.0], net.parameters())
