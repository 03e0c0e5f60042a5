"""Whole models: a few SGD steps match PyTorch's parameters; a small MLP learns a toy task."""
from __future__ import annotations

import numpy as np

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn

from .helpers import copy_weights


def build(m):
    return m.Sequential(m.Conv2d(1, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
                        m.Conv2d(4, 8, 3, stride=2, groups=2), m.LeakyReLU(0.1),
                        m.AdaptiveAvgPool2d(1), m.Flatten(), m.Linear(8, 16), m.GELU(),
                        m.LayerNorm(16), m.Linear(16, 5))


def test_sgd_steps_match_torch(torch):
    ours, theirs = build(nn), build(torch.nn)
    copy_weights(ours, theirs)
    rng = np.random.default_rng(0)
    for step in range(3):
        x = rng.standard_normal((6, 1, 10, 10)).astype(np.float32)
        y = rng.integers(0, 5, 6)
        loss = F.cross_entropy(ours(plugtorch.tensor(x)), plugtorch.tensor(y), label_smoothing=0.1)
        t_loss = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y),
                                                   label_smoothing=0.1)
        assert abs(loss.item() - t_loss.item()) < 1e-5, f"loss at step {step}"
        ours.zero_grad()
        theirs.zero_grad()
        loss.backward()
        t_loss.backward()
        nn.utils.clip_grad_norm_(ours.parameters(), 1.0)
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        with plugtorch.no_grad():
            for p in ours.parameters():
                p.sub_(p.grad * 0.1)
        with torch.no_grad():
            for p in theirs.parameters():
                p.sub_(p.grad * 0.1)
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, err_msg=name)


def test_mlp_learns_a_toy_problem():
    gen = plugtorch.Generator().manual_seed(0)
    x = plugtorch.randn(256, 2, generator=gen)
    y = ((x[:, 0] * x[:, 1]) > 0).long()  # XOR of the signs: not linearly separable
    model = nn.Sequential(nn.Linear(2, 32, generator=gen), nn.ReLU(), nn.Dropout(0.1, generator=gen),
                          nn.Linear(32, 2, generator=gen))
    loss_fn = nn.CrossEntropyLoss()
    first = None
    for _ in range(300):
        loss = loss_fn(model(x), y)
        first = first if first is not None else loss.item()
        model.zero_grad()
        loss.backward()
        with plugtorch.no_grad():
            for p in model.parameters():
                p.sub_(p.grad * 0.5)
    model.eval()
    accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert loss.item() < first / 3
    assert accuracy > 0.95
