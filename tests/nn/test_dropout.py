"""Dropout: masks, scaling, generators, train/eval."""
from __future__ import annotations

import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn


def test_scales_kept_elements_and_zeroes_the_rest():
    x = plugtorch.ones(2000)
    y = F.dropout(x, 0.25, generator=plugtorch.Generator().manual_seed(0))
    values = set(round(v, 6) for v in y.tolist())
    assert values <= {0.0, round(1 / 0.75, 6)}
    kept = (y > 0).sum().item() / 2000
    assert 0.70 < kept < 0.80


def test_same_generator_seed_gives_same_mask():
    x = plugtorch.randn(50)
    a = F.dropout(x, 0.5, generator=plugtorch.Generator().manual_seed(3))
    b = F.dropout(x, 0.5, generator=plugtorch.Generator().manual_seed(3))
    c = F.dropout(x, 0.5, generator=plugtorch.Generator().manual_seed(4))
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()


def test_global_seed_makes_module_dropout_reproducible():
    x = plugtorch.randn(40)
    drop = nn.Dropout(0.5)
    plugtorch.manual_seed(11)
    a = drop(x)
    plugtorch.manual_seed(11)
    assert drop(x).tolist() == a.tolist()


def test_eval_mode_and_edge_probabilities_are_exact():
    x = plugtorch.randn(10)
    drop = nn.Dropout(0.9).eval()
    assert drop(x) is x
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 1.0).abs().sum().item() == 0.0
    assert F.dropout(x, 0.5, training=False) is x


def test_gradient_flows_through_kept_elements_only():
    x = plugtorch.ones(100, requires_grad=True)
    y = F.dropout(x, 0.5, generator=plugtorch.Generator().manual_seed(1))
    y.sum().backward()
    assert x.grad.tolist() == (y.detach() * 1.0).tolist()


def test_inplace_writes_into_input():
    x = plugtorch.ones(20)
    out = F.dropout(x, 0.5, inplace=True, generator=plugtorch.Generator().manual_seed(2))
    assert out is x and set(x.tolist()) <= {0.0, 2.0}


def test_invalid_probability():
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="between 0 and 1, but got -0.1"):
        F.dropout(plugtorch.ones(1), -0.1)


def test_dropout2d_drops_whole_channels():
    x = plugtorch.ones(4, 6, 3, 3)
    y = F.dropout2d(x, 0.5, generator=plugtorch.Generator().manual_seed(0))
    per_channel = y.reshape(4, 6, 9)
    spread = (per_channel.amax(-1) - per_channel.amin(-1)).abs().sum().item()
    assert spread == 0.0
    assert 0 < (per_channel[..., 0] > 0).sum().item() < 24
