"""Pooling, unpooling, fold/unfold, pixel shuffle, upsampling and padding layers against torch:
outputs, input gradients and reprs."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import nn


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def compare(torch, ours, theirs, x, atol=1e-10):
    """Forward the same float64 input through both layers and backprop the same upstream gradient."""
    a, b = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, e = ours(a), theirs(b)
    y, e = (y[0], e[0]) if isinstance(e, tuple) else (y, e)
    np.testing.assert_allclose(y.detach().numpy(), e.detach().numpy(), atol=atol)
    g = rand(*e.shape, seed=1)
    (y * plugtorch.tensor(g)).sum().backward()
    (e * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=atol)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name,args,kwargs", [
    ("MaxPool1d", (3,), dict(stride=2, padding=1, dilation=1, ceil_mode=True)),
    ("MaxPool3d", (2,), dict(stride=1, dilation=2)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, count_include_pad=False)),
    ("AvgPool3d", (2,), dict(ceil_mode=True, divisor_override=3)),
    ("AdaptiveAvgPool1d", (3,), {}),
    ("AdaptiveAvgPool3d", ((2, None, 3),), {}),
])
def test_pooling_layers(torch, name, args, kwargs):
    rank = int(name[-2])
    x = rand(2, 3, *(7, 6, 5)[:rank])
    compare(torch, getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs), x)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_max_unpool_inverts_max_pool_with_indices(torch, rank):
    x = rand(2, 2, *(6, 4, 4)[:rank])
    pool, tpool = getattr(nn, f"MaxPool{rank}d")(2, return_indices=True), getattr(torch.nn, f"MaxPool{rank}d")(
        2, return_indices=True)
    unpool, tunpool = getattr(nn, f"MaxUnpool{rank}d")(2), getattr(torch.nn, f"MaxUnpool{rank}d")(2)
    a, b = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, e = unpool(*pool(a)), tunpool(*tpool(b))
    np.testing.assert_allclose(y.detach().numpy(), e.detach().numpy())
    y.sum().backward()
    e.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
    assert repr(unpool) == repr(tunpool)
    sized = unpool(*pool(a), output_size=tuple(s + 1 for s in x.shape[2:]))
    assert sized.shape == x.shape[:2] + tuple(s + 1 for s in x.shape[2:])


def test_fold_and_unfold_layers(torch):
    compare(torch, nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=2),
            torch.nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=2), rand(2, 3, 5, 6))
    blocks = torch.nn.Unfold(2, stride=1)(torch.zeros(1, 3, 4, 5)).shape
    compare(torch, nn.Fold((4, 5), 2), torch.nn.Fold((4, 5), 2), rand(*blocks))


def test_fold_of_unfold_counts_overlaps():
    # each pixel comes back times the number of blocks covering it
    x = plugtorch.ones(1, 1, 3, 3)
    back = nn.Fold((3, 3), 2)(nn.Unfold(2)(x))
    assert back[0, 0].tolist() == [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]


@pytest.mark.parametrize("r", [2, 3])
def test_pixel_shuffle_layers(torch, r):
    compare(torch, nn.PixelShuffle(r), torch.nn.PixelShuffle(r), rand(2, 2 * r * r, 3, 2))
    compare(torch, nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r), rand(2, 2, 2 * r, 3 * r))
    x = plugtorch.tensor(rand(1, 4 * r * r, 3, 2))
    assert np.allclose(nn.PixelUnshuffle(r)(nn.PixelShuffle(r)(x)).numpy(), x.numpy())


@pytest.mark.parametrize("layer", [
    lambda m: m.Upsample(scale_factor=2),
    lambda m: m.Upsample(size=(5, 3), mode="bilinear", align_corners=True),
    lambda m: m.Upsample(scale_factor=(1.5, 0.5), mode="bicubic"),
    lambda m: m.Upsample(scale_factor=1.7, mode="nearest-exact", recompute_scale_factor=True),
    lambda m: m.UpsamplingNearest2d(scale_factor=3),
    lambda m: m.UpsamplingBilinear2d(size=7),
])
def test_upsampling_layers(torch, layer):
    compare(torch, layer(nn), layer(torch.nn), rand(2, 2, 4, 5))


def test_upsample_3d_trilinear(torch):
    compare(torch, nn.Upsample(scale_factor=(2, 1, 0.5), mode="trilinear"),
            torch.nn.Upsample(scale_factor=(2, 1, 0.5), mode="trilinear"), rand(1, 2, 3, 4, 4))


@pytest.mark.parametrize("name,rank", [(f"{kind}Pad{r}d", r) for kind in ("Reflection", "Replication", "Circular",
                                                                          "Zero") for r in (1, 2, 3)])
def test_padding_layers(torch, name, rank):
    padding = (2, 1, 0, 1, 1, 0)[:2 * rank]
    compare(torch, getattr(nn, name)(padding), getattr(torch.nn, name)(padding), rand(2, 2, *(4, 3, 3)[:rank]))
    compare(torch, getattr(nn, name)(1), getattr(torch.nn, name)(1), rand(2, *(4, 3, 3)[:rank]))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_constant_padding_layers(torch, rank):
    compare(torch, getattr(nn, f"ConstantPad{rank}d")(1, 2.5), getattr(torch.nn, f"ConstantPad{rank}d")(1, 2.5),
            rand(1, 2, *(3, 3, 2)[:rank]))


def test_functional_pad_modes_match_torch_for_crops(torch):
    x = rand(1, 2, 5)
    for mode in ("reflect", "replicate", "circular"):
        got = plugtorch.nn.functional.pad(plugtorch.tensor(x), (-1, 3), mode=mode)
        expected = torch.nn.functional.pad(torch.tensor(x), (-1, 3), mode=mode)
        np.testing.assert_allclose(got.numpy(), expected.numpy())


def test_functional_pad_mode_errors_are_torchs():
    F = plugtorch.nn.functional
    x = plugtorch.randn(1, 2, 3)
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode wrap"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(NotImplementedError, match="Padding size 4 is not supported for 5D input"):
        F.pad(plugtorch.randn(1, 1, 1, 2, 3), (1, 1, 1, 1), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="doesn't take in value argument"):
        F.pad(x, (1, 1), mode="replicate", value=2.0)
