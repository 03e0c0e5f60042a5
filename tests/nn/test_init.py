"""nn.init: formulas (gain, fans), sample statistics, generators, and layers' default init."""
from __future__ import annotations

import math

import numpy as np
import pytest

import plugtorch
from plugtorch import nn
from plugtorch.nn import init


def gen(seed=0):
    return plugtorch.Generator().manual_seed(seed)


def test_calculate_gain_matches_torch(torch):
    for name, param in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                        ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2),
                        ("leaky_relu", math.sqrt(5)), ("selu", None)]:
        assert init.calculate_gain(name, param) == pytest.approx(
            torch.nn.init.calculate_gain(name, param))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")


def test_fan_in_and_out():
    assert init._calculate_fan_in_and_fan_out(plugtorch.empty(7, 3)) == (3, 7)
    assert init._calculate_fan_in_and_fan_out(plugtorch.empty(16, 4, 3, 5)) == (60, 240)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(plugtorch.empty(5))


def stats(t):
    a = t.detach().numpy().ravel()
    return a.mean(), a.std(), a.min(), a.max()


def test_uniform_and_normal_statistics():
    t = plugtorch.empty(200, 100)
    mean, std, lo, hi = stats(init.uniform_(t, -2.0, 4.0, generator=gen()))
    assert lo >= -2.0 and hi < 4.0 and abs(mean - 1.0) < 0.05 and abs(std - 6 / math.sqrt(12)) < 0.03
    mean, std, _, _ = stats(init.normal_(t, 3.0, 0.5, generator=gen()))
    assert abs(mean - 3.0) < 0.01 and abs(std - 0.5) < 0.01


def test_kaiming_and_xavier_statistics():
    t = plugtorch.empty(256, 64, 3, 3)  # fan_in 576, fan_out 2304
    _, std, lo, hi = stats(init.kaiming_uniform_(t, a=0, nonlinearity="relu", generator=gen()))
    bound = math.sqrt(2.0) * math.sqrt(3.0 / 576)
    assert -bound <= lo and hi <= bound and abs(std - bound / math.sqrt(3)) < 0.002
    _, std, _, _ = stats(init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu",
                                              generator=gen()))
    assert abs(std - math.sqrt(2.0 / 2304)) < 0.001
    _, std, lo, hi = stats(init.xavier_uniform_(t, gain=2.0, generator=gen()))
    a = 2.0 * math.sqrt(6.0 / (576 + 2304))
    assert -a <= lo and hi <= a and abs(std - a / math.sqrt(3)) < 0.002
    _, std, _, _ = stats(init.xavier_normal_(t, generator=gen()))
    assert abs(std - math.sqrt(2.0 / (576 + 2304))) < 0.001


def test_generator_makes_init_reproducible():
    a = init.kaiming_uniform_(plugtorch.empty(4, 5), generator=gen(7)).tolist()
    b = init.kaiming_uniform_(plugtorch.empty(4, 5), generator=gen(7)).tolist()
    c = init.kaiming_uniform_(plugtorch.empty(4, 5), generator=gen(8)).tolist()
    assert a == b and a != c


def test_constants_and_parameters_stay_leaves():
    p = nn.Parameter(plugtorch.empty(3, 3))
    assert init.ones_(p) is p and p.tolist() == [[1.0] * 3] * 3
    init.zeros_(p)
    assert p.abs().sum().item() == 0
    init.constant_(p, 0.5)
    assert p.tolist() == [[0.5] * 3] * 3
    init.normal_(p)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None


def test_zero_element_tensor_warns():
    with pytest.warns(UserWarning, match="zero-element"):
        init.uniform_(plugtorch.empty(0, 3))


def test_linear_and_conv_default_init_bounds():
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(fan_in), ...)
    for p in (lin.weight, lin.bias):
        _, std, lo, hi = stats(p)
        assert -bound <= lo and hi <= bound and abs(std - bound / math.sqrt(3)) < 0.1 * bound
    conv = nn.Conv2d(8, 64, 5)
    bound = 1 / math.sqrt(8 * 25)
    for p in (conv.weight, conv.bias):
        _, _, lo, hi = stats(p)
        assert -bound <= lo and hi <= bound
    assert stats(conv.weight)[3] > 0.9 * bound


@pytest.mark.parametrize("make", [
    lambda m: m.Linear(64, 1024),
    lambda m: m.Conv2d(4, 1024, 3),
    lambda m: m.Embedding(100, 300),
])
def test_default_init_distribution_matches_torch(torch, make):
    # The RNG streams differ, so compare distributions: quantiles of every parameter
    # (each has >= 1024 samples, so a wrong bound or law is far outside the tolerance).
    torch.manual_seed(0)
    plugtorch.manual_seed(0)
    ours, theirs = make(nn), make(torch.nn)
    qs = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99]
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        qa = np.quantile(a.detach().numpy(), qs)
        qb = np.quantile(b.detach().numpy(), qs)
        scale = np.abs(qb).max()
        tol = 0.25 if a.numel() < 5000 else 0.05
        np.testing.assert_allclose(qa, qb, atol=tol * scale, err_msg=name)


def test_embedding_default_is_standard_normal():
    emb = nn.Embedding(300, 100)
    mean, std, _, _ = stats(emb.weight)
    assert abs(mean) < 0.02 and abs(std - 1.0) < 0.02


def test_module_generator_argument_reproduces_weights():
    a = nn.Linear(3, 2, generator=gen(5))
    b = nn.Linear(3, 2, generator=gen(5))
    assert a.weight.tolist() == b.weight.tolist() and a.bias.tolist() == b.bias.tolist()


def test_global_seed_reproduces_default_init():
    plugtorch.manual_seed(123)
    a = nn.Conv2d(1, 2, 3).weight.tolist()
    plugtorch.manual_seed(123)
    assert nn.Conv2d(1, 2, 3).weight.tolist() == a
