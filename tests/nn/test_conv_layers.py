"""Conv1d/Conv3d and the transposed convolutions against torch: torch's state_dict loaded, then
outputs, input gradients and parameter gradients compared."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import nn

from .helpers import check_against_torch


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(stride=2, padding=1),
    dict(padding=2, dilation=2, groups=2),
    dict(padding="same", bias=False),
    dict(padding="valid"),
])
@pytest.mark.parametrize("rank", [1, 3])
def test_conv(torch, rank, kwargs):
    shape = (2, 4) + (7, 6, 5)[:rank]
    ours = getattr(nn, f"Conv{rank}d")(4, 6, 3, **kwargs)
    theirs = getattr(torch.nn, f"Conv{rank}d")(4, 6, 3, **kwargs)
    check_against_torch(torch, ours, theirs, rand(*shape))
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_conv_padding_modes(torch, rank, mode):
    kwargs = dict(padding=1, padding_mode=mode)
    ours, theirs = getattr(nn, f"Conv{rank}d")(2, 3, 3, **kwargs), getattr(torch.nn, f"Conv{rank}d")(2, 3, 3, **kwargs)
    check_against_torch(torch, ours, theirs, rand(2, 2, *(5, 4, 4)[:rank]))
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(stride=2, padding=1, output_padding=1),
    dict(dilation=2, output_padding=1, groups=2),
    dict(stride=2, bias=False),
])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_conv_transpose(torch, rank, kwargs):
    ours = getattr(nn, f"ConvTranspose{rank}d")(4, 6, 3, **kwargs)
    theirs = getattr(torch.nn, f"ConvTranspose{rank}d")(4, 6, 3, **kwargs)
    check_against_torch(torch, ours, theirs, rand(2, 4, *(5, 4, 3)[:rank]))
    assert repr(ours) == repr(theirs)
    assert ours.weight.shape == (4, 3 if kwargs.get("groups") else 6) + (3,) * rank


def test_conv_transpose_output_size_picks_output_padding(torch):
    ours = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    theirs = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    x = rand(1, 2, 4, 5)
    for size in [(7, 9), (8, 10), [1, 3, 8, 9]]:
        from .helpers import copy_weights
        copy_weights(ours, theirs)
        got = ours(plugtorch.tensor(x), output_size=size)
        expected = theirs(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="valid sizes range from"):
        ours(plugtorch.tensor(x), output_size=(10, 10))


def test_unbatched_input(torch):
    check_against_torch(torch, nn.Conv1d(2, 3, 2), torch.nn.Conv1d(2, 3, 2), rand(2, 6))
    check_against_torch(torch, nn.ConvTranspose3d(2, 3, 2), torch.nn.ConvTranspose3d(2, 3, 2), rand(2, 3, 3, 3))


@pytest.mark.parametrize("cls", ["Conv1d", "Conv3d", "ConvTranspose1d", "ConvTranspose3d"])
def test_default_init_bounds_are_torchs(cls):
    # kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias alike
    m = getattr(nn, cls)(4, 6, 3, generator=plugtorch.Generator().manual_seed(0))
    rank = m.weight.ndim - 2
    fan_in = m.weight.shape[1] * 3 ** rank
    bound = 1 / np.sqrt(fan_in)
    for p in (m.weight, m.bias):
        v = p.detach().numpy()
        assert v.min() >= -bound and v.max() <= bound and v.std() > bound / 3


def test_constructor_errors_are_torchs():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv3d(3, 4, 2, groups=2)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(2, 2, 2, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(2, 2, 2, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv1d(2, 2, 3, stride=2, padding="same")


def test_channel_mismatch_names_the_layer():
    with pytest.raises(RuntimeError, match=r"Conv3d\(in_channels=3\): expected input with 3 channels at dim 1, got 2"):
        nn.Conv3d(3, 4, 2)(plugtorch.randn(1, 2, 4, 4, 4))
