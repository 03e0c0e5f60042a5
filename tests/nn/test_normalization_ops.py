"""The normalisation ops beyond what the conformance kit checks: GroupNorm against torch, the
running statistics batch_norm moves in place (and the version counters that guard them),
fused kernels, no host reads on a device backend, and torch's top-level spellings."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn

from .backend_helpers import device_like_backend, register
from .helpers import check_against_torch


def rand(*shape, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 2 + 1).astype(np.float32)


# -- GroupNorm -------------------------------------------------------------------------------

@pytest.mark.parametrize("args,kwargs,shape", [
    ((2, 4), dict(), (3, 4, 5)),
    ((3, 6), dict(eps=1e-3), (2, 6, 3, 3)),
    ((1, 4), dict(affine=False), (2, 4, 2)),
    ((4, 8), dict(bias=False), (5, 8)),
])
def test_group_norm_module_matches_torch(torch, args, kwargs, shape):
    ours, theirs = nn.GroupNorm(*args, **kwargs), torch.nn.GroupNorm(*args, **kwargs)
    with torch.no_grad():  # away from the ones/zeros start, so the affine gradients mean something
        for p in theirs.parameters():
            p.normal_()
    check_against_torch(torch, ours, theirs, rand(*shape), atol=1e-5)
    assert repr(ours) == repr(theirs)


def test_group_norm_module_errors():
    with pytest.raises(ValueError, match=r"num_channels \(6\) must be divisible by num_groups \(4\)"):
        nn.GroupNorm(4, 6)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(plugtorch.randn(2, 6, 3), 4)
    assert [n for n, _ in nn.GroupNorm(2, 4).named_parameters()] == ["weight", "bias"]


# -- batch_norm's running statistics ---------------------------------------------------------

@pytest.mark.parametrize("momentum", [0.1, 0.0, 1.0, 0.37])
def test_batch_norm_moves_running_statistics_as_torch(torch, momentum):
    x = rand(6, 3, 2, seed=1)
    ours = [plugtorch.tensor(a) for a in (rand(3, seed=2), np.abs(rand(3, seed=3)))]
    theirs = [torch.tensor(a) for a in (rand(3, seed=2), np.abs(rand(3, seed=3)))]
    versions = [s._version for s in ours]
    out = F.batch_norm(plugtorch.tensor(x), *ours, training=True, momentum=momentum)
    t_out = torch.nn.functional.batch_norm(torch.tensor(x), *theirs, training=True, momentum=momentum)
    np.testing.assert_allclose(out.numpy(), t_out.numpy(), atol=1e-5)
    for a, b in zip(ours, theirs):  # the variance estimate is the unbiased one
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert [s._version for s in ours] > versions, "an in-place update must bump the version counters"


def test_momentum_none_is_a_cumulative_average(torch):
    ours, theirs = nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)
    batches = [rand(5, 3, seed=s) for s in range(4)]
    for x in batches:
        ours(plugtorch.tensor(x))
        theirs(torch.tensor(x))
    # with momentum=None the estimate is the plain mean of the batches' statistics
    np.testing.assert_allclose(ours.running_mean.numpy(), np.mean([b.mean(0) for b in batches], 0), rtol=1e-5)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)
    with pytest.raises(TypeError, match="momentum"):
        F.batch_norm(plugtorch.randn(4, 3), None, None, training=True, momentum=None)


def test_two_training_forwards_then_one_backward(torch):
    """Each forward moves the statistics; the first one's graph node must not object (its rule
    never reads them), as torch's does not."""
    ours, theirs = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    a, b = rand(4, 3, seed=1), rand(4, 3, seed=2)
    loss = (ours(plugtorch.tensor(a)) ** 2).sum() + ours(plugtorch.tensor(b)).sum()
    t_loss = (theirs(torch.tensor(a)) ** 2).sum() + theirs(torch.tensor(b)).sum()
    loss.backward()
    t_loss.backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5)


def test_evaluation_guards_the_statistics_its_gradient_reads():
    bn = nn.BatchNorm1d(3).eval()
    x = plugtorch.randn(4, 3, requires_grad=True)
    out = bn(x)
    with plugtorch.no_grad():
        bn.running_var.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_empty_training_batch_leaves_the_statistics(torch):
    rm, rv = plugtorch.zeros(3), plugtorch.ones(3)
    out = F.batch_norm(plugtorch.zeros(0, 3), rm, rv, training=True)
    assert out.shape == (0, 3) and rm.tolist() == [0.0] * 3 and rv.tolist() == [1.0] * 3


# -- fused kernels ---------------------------------------------------------------------------

def _np_batch_norm(calls):
    def kernel(x, rm, rv, w, b, *, training, momentum, eps):
        calls.append(training)
        axes, shape = (0,) + tuple(range(2, x.ndim)), (1, -1) + (1,) * (x.ndim - 2)
        if training:
            mean, var = x.mean(axes), x.var(axes)
            n = x.size // x.shape[1]
            for stat, batch in ((rm, mean), (rv, var * n / (n - 1))):
                if stat is not None:  # in place, from the statistics the kernel has anyway
                    stat *= 1 - momentum
                    stat += momentum * batch
        else:
            mean, var = rm, rv
        out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
        out = out if w is None else out * w.reshape(shape)
        return out if b is None else out + b.reshape(shape)
    return {"batch_norm": kernel}


def test_fused_batch_norm_kernel_updates_the_statistics(torch):
    calls: list = []
    dev = register(kernels=_np_batch_norm(calls))
    ours, theirs = nn.BatchNorm2d(3).to(dev), torch.nn.BatchNorm2d(3)
    for step in range(3):
        x = rand(4, 3, 2, 2, seed=step)
        xs = plugtorch.tensor(x, device=dev, requires_grad=True)
        t_x = torch.tensor(x, requires_grad=True)
        up = rand(4, 3, 2, 2, seed=10 + step)
        (ours(xs) * plugtorch.tensor(up, device=dev)).sum().backward()
        (theirs(t_x) * torch.tensor(up)).sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), t_x.grad.numpy(), atol=1e-4)
        np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)
    assert calls == [True] * 3
    assert ours.running_mean._version >= 3  # the front bumps the counters a kernel cannot see
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_fused_layer_norm_backward_kernel_is_used(torch):
    calls: list = []

    def backward(g, x, w, *, normalized_shape, eps):
        calls.append(normalized_shape)
        axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
        rstd = 1 / np.sqrt(var + eps)
        xhat, gy = (x - mean) * rstd, g if w is None else g * w
        return rstd * (gy - gy.mean(axes, keepdims=True) - xhat * (gy * xhat).mean(axes, keepdims=True))
    dev = register(kernels={"layer_norm_backward": backward})
    ours, theirs = nn.LayerNorm((2, 3)).to(dev), torch.nn.LayerNorm((2, 3))
    x = rand(4, 2, 3)
    xs = plugtorch.tensor(x, device=dev, requires_grad=True)
    t_x = torch.tensor(x, requires_grad=True)
    ours(xs).pow(2).sum().backward()
    theirs(t_x).pow(2).sum().backward()
    assert calls == [(2, 3)]
    np.testing.assert_allclose(xs.grad.numpy(), t_x.grad.numpy(), atol=1e-4)


# -- no host reads, torch's top-level spellings ----------------------------------------------

def test_normalisation_never_reads_device_memory():
    dev, reads = device_like_backend()
    layers = [nn.BatchNorm1d(3), nn.BatchNorm1d(3, momentum=None), nn.LayerNorm(3), nn.GroupNorm(1, 3)]
    for layer in layers:
        layer.to(dev)
    layers[1](plugtorch.randn(4, 3, device=dev))  # momentum=None reads the batch count once, then knows it
    reads.clear()
    for _ in range(3):
        x = plugtorch.randn(4, 3, device=dev, requires_grad=True)
        sum(layer(x).sum() for layer in layers).backward()
    assert reads == [], "a normalisation read device memory on the host (a hidden sync)"
    layers[1].load_state_dict(nn.BatchNorm1d(3).state_dict())  # someone else wrote the count
    layers[1](plugtorch.randn(4, 3, device=dev))
    assert len(reads) >= 1 and layers[1].num_batches_tracked.item() == 1


def test_top_level_spellings_take_torchs_arguments(torch):
    x, w, b = rand(4, 6, 2), rand(6, seed=1), rand(6, seed=2)
    rm, rv = rand(6, seed=3), np.abs(rand(6, seed=4))
    P, T = (lambda a: plugtorch.tensor(a)), (lambda a: torch.tensor(a))
    pairs = [
        (plugtorch.batch_norm(P(x), P(w), P(b), P(rm), P(rv), False, 0.1, 1e-5, False),
         torch.batch_norm(T(x), T(w), T(b), T(rm), T(rv), False, 0.1, 1e-5, False)),
        (plugtorch.layer_norm(P(x), (6, 2), None, None, 1e-5, True),
         torch.layer_norm(T(x), (6, 2), None, None, 1e-5, True)),
        (plugtorch.group_norm(P(x), 3, P(w), P(b), 1e-5, True), torch.group_norm(T(x), 3, T(w), T(b), 1e-5, True)),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-5)
