"""Layers against PyTorch: same weights in both, then outputs, input grads and weight grads."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import nn

from .helpers import check_against_torch


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_linear(torch):
    check_against_torch(torch, nn.Linear(5, 3), torch.nn.Linear(5, 3), rand(4, 5))
    check_against_torch(torch, nn.Linear(5, 3, bias=False), torch.nn.Linear(5, 3, bias=False),
                        rand(2, 4, 5))


def test_linear_wrong_in_features_says_expected_and_got():
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=5, out_features=3\): expected "
                                           r"input of shape \(\*, 5\), got \[4, 6\]"):
        nn.Linear(5, 3)(plugtorch.randn(4, 6))


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(stride=2, padding=1),
    dict(padding=2, dilation=2),
    dict(groups=2, bias=False),
    dict(stride=(2, 1), padding=(1, 0)),
    dict(padding="same"),
])
def test_conv2d(torch, kwargs):
    check_against_torch(torch, nn.Conv2d(4, 6, 3, **kwargs), torch.nn.Conv2d(4, 6, 3, **kwargs),
                        rand(2, 4, 7, 6))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (2, 1), "same"])
def test_conv2d_padding_modes(torch, mode, padding):
    kwargs = dict(padding=padding, padding_mode=mode)
    k = 4 if padding == "same" else 3  # an even kernel pads unevenly under 'same'
    check_against_torch(torch, nn.Conv2d(2, 3, k, **kwargs), torch.nn.Conv2d(2, 3, k, **kwargs),
                        rand(2, 2, 5, 6))
    assert repr(nn.Conv2d(2, 3, k, **kwargs)) == repr(torch.nn.Conv2d(2, 3, k, **kwargs))


def test_conv2d_unbatched(torch):
    check_against_torch(torch, nn.Conv2d(2, 3, 2), torch.nn.Conv2d(2, 3, 2), rand(2, 5, 5))


def test_conv2d_channel_mismatch_is_clear():
    with pytest.raises(RuntimeError, match=r"Conv2d\(in_channels=3\): expected input with 3 "
                                           r"channels at dim 1, got 1"):
        nn.Conv2d(3, 4, 3)(plugtorch.randn(2, 1, 8, 8))


def test_conv2d_constructor_checks():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 3, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 3, 3, padding_mode="mirror")


@pytest.mark.parametrize("layer,kwargs", [
    ("MaxPool2d", dict(kernel_size=2)),
    ("MaxPool2d", dict(kernel_size=3, stride=2, padding=1)),
    ("MaxPool2d", dict(kernel_size=2, ceil_mode=True)),
    ("AvgPool2d", dict(kernel_size=2)),
    ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1)),
    ("AdaptiveAvgPool2d", dict(output_size=1)),
    ("AdaptiveAvgPool2d", dict(output_size=(2, 3))),
    ("AdaptiveAvgPool2d", dict(output_size=(3, 2))),
])
def test_pooling(torch, layer, kwargs):
    check_against_torch(torch, getattr(nn, layer)(**kwargs), getattr(torch.nn, layer)(**kwargs),
                        rand(2, 3, 7, 5))


def test_max_pool_return_indices(torch):
    x = rand(1, 2, 6, 6)
    out, idx = nn.MaxPool2d(2, return_indices=True)(plugtorch.tensor(x))
    t_out, t_idx = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(idx.numpy(), t_idx.numpy())
    np.testing.assert_allclose(out.numpy(), t_out.numpy())


@pytest.mark.parametrize("name,args", [
    ("ReLU", ()), ("LeakyReLU", ()), ("LeakyReLU", (0.2,)), ("GELU", ()), ("SiLU", ()),
    ("Sigmoid", ()), ("Tanh", ()), ("Softmax", (1,)), ("LogSoftmax", (1,)), ("Identity", ()),
    ("ELU", ()), ("ELU", (0.5,)), ("Softplus", ()), ("Softplus", (2.0, 1.0)),
])
def test_activations(torch, name, args):
    check_against_torch(torch, getattr(nn, name)(*args), getattr(torch.nn, name)(*args),
                        rand(3, 4) * 3)


def test_gelu_tanh_approximation(torch):
    check_against_torch(torch, nn.GELU("tanh"), torch.nn.GELU("tanh"), rand(3, 4) * 3)


def test_gelu_in_float64_is_accurate(torch):
    check_against_torch(torch, nn.GELU(), torch.nn.GELU(), rand(50, dtype=np.float64) * 4,
                        atol=1e-6, rtol=1e-6)


def test_inplace_activation_writes_into_input():
    x = plugtorch.tensor([-1.0, 2.0])
    out = nn.ReLU(inplace=True)(x)
    assert out is x and x.tolist() == [0.0, 2.0]
    y = plugtorch.tensor([-1.0, 2.0], requires_grad=True)
    z = y * 1.0
    nn.LeakyReLU(0.5, inplace=True)(z).sum().backward()
    assert y.grad.tolist() == [0.5, 1.0]
    w = plugtorch.tensor([-1.0, 2.0], requires_grad=True)
    v = w * 1.0
    out = nn.SiLU(inplace=True)(v)
    assert out is v
    out.sum().backward()
    s = 1 / (1 + np.exp(1.0))
    expected = [s * (1 + -1.0 * (1 - s)), 1.0 / (1 + np.exp(-2.0)) * (1 + 2.0 / (1 + np.exp(2.0)))]
    assert w.grad.tolist() == pytest.approx(expected, rel=1e-5)


def test_flatten_unflatten(torch):
    check_against_torch(torch, nn.Flatten(), torch.nn.Flatten(), rand(2, 3, 4))
    check_against_torch(torch, nn.Flatten(0, 1), torch.nn.Flatten(0, 1), rand(2, 3, 4))
    check_against_torch(torch, nn.Unflatten(1, (3, 4)), torch.nn.Unflatten(1, (3, 4)), rand(2, 12))


def test_layer_norm(torch):
    check_against_torch(torch, nn.LayerNorm(4), torch.nn.LayerNorm(4), rand(3, 4))
    check_against_torch(torch, nn.LayerNorm((3, 4)), torch.nn.LayerNorm((3, 4)), rand(2, 3, 4))
    check_against_torch(torch, nn.LayerNorm(4, elementwise_affine=False),
                        torch.nn.LayerNorm(4, elementwise_affine=False), rand(3, 4))
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 4\]"):
        nn.LayerNorm(4)(plugtorch.randn(2, 3))


def test_layer_norm_with_trained_affine(torch):
    ours, theirs = nn.LayerNorm(4), torch.nn.LayerNorm(4)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    check_against_torch(torch, ours, theirs, rand(3, 4))


def test_embedding(torch):
    idx = np.array([[0, 2, 4], [4, 1, 4]])
    for kwargs in (dict(), dict(padding_idx=1), dict(scale_grad_by_freq=True),
                   dict(max_norm=1.0), dict(max_norm=0.5, norm_type=1.0, padding_idx=0)):
        ours, theirs = nn.Embedding(5, 3, **kwargs), torch.nn.Embedding(5, 3, **kwargs)
        from .helpers import copy_weights
        copy_weights(ours, theirs)
        out = ours(plugtorch.tensor(idx))
        t_out = theirs(torch.tensor(idx))
        np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-6)
        g = rand(2, 3, 3)
        (out * plugtorch.tensor(g)).sum().backward()
        (t_out * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), atol=1e-6)
        # max_norm renormalises the looked-up rows of the table itself
        np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(),
                                   atol=1e-6)
        assert repr(ours) == repr(theirs)


def test_embedding_padding_row_is_zero_and_errors():
    emb = nn.Embedding(4, 2, padding_idx=-1)
    assert emb.padding_idx == 3 and emb.weight[3].tolist() == [0.0, 0.0]
    with pytest.raises(IndexError, match="index out of range"):
        emb(plugtorch.tensor([4]))
    with pytest.raises(RuntimeError, match="Long, Int"):
        emb(plugtorch.tensor([1.0]))
    frozen = nn.Embedding.from_pretrained(plugtorch.ones(3, 2))
    assert not frozen.weight.requires_grad and frozen(plugtorch.tensor([2])).tolist() == [[1.0, 1.0]]


def test_mnist_cnn_matches_torch(torch):
    """The issue's CNN end to end: conv16-pool-conv32-pool-fc128-dropout(eval)-fc10."""
    def build(m):
        return m.Sequential(m.Conv2d(1, 16, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
                            m.Conv2d(16, 32, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
                            m.Flatten(), m.Linear(32 * 7 * 7, 128), m.ReLU(), m.Dropout(0.5),
                            m.Linear(128, 10))
    ours, theirs = build(nn), build(torch.nn)
    ours.eval()
    theirs.eval()
    check_against_torch(torch, ours, theirs, rand(2, 1, 28, 28), atol=1e-4)
