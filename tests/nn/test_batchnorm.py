"""BatchNorm1d/2d against PyTorch over several training steps, then in eval mode."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import nn

from .helpers import check_against_torch, copy_weights


def rand(*shape, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 2 + 1).astype(np.float32)


@pytest.mark.parametrize("cls,shape,kwargs", [
    ("BatchNorm1d", (8, 3), dict()),
    ("BatchNorm1d", (4, 3, 5), dict(momentum=0.3)),
    ("BatchNorm2d", (4, 3, 5, 5), dict()),
    ("BatchNorm2d", (4, 3, 2, 2), dict(momentum=None)),
    ("BatchNorm2d", (4, 3, 2, 2), dict(affine=False)),
])
def test_training_steps_then_eval_match_torch(torch, cls, shape, kwargs):
    ours, theirs = getattr(nn, cls)(3, **kwargs), getattr(torch.nn, cls)(3, **kwargs)
    for step in range(4):
        x = rand(*shape, seed=step)
        check_against_torch(torch, ours, theirs, x, atol=1e-4)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(getattr(ours, name).numpy(),
                                       getattr(theirs, name).detach().numpy(), atol=1e-5,
                                       err_msg=f"{name} after step {step}")
        assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == step + 1
        ours.zero_grad()
        theirs.zero_grad()
    ours.eval()
    theirs.eval()
    check_against_torch(torch, ours, theirs, rand(*shape, seed=9), atol=1e-4)
    # the statistics were just copied from torch's; in eval mode neither side moves them
    for ours_b, theirs_b in zip(ours.buffers(), theirs.buffers()):
        assert ours_b.tolist() == theirs_b.tolist(), "eval mode must not update statistics"


def test_without_running_stats_uses_batch_statistics_in_eval(torch):
    ours = nn.BatchNorm1d(3, track_running_stats=False)
    theirs = torch.nn.BatchNorm1d(3, track_running_stats=False)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight", "bias"]
    ours.eval()
    theirs.eval()
    check_against_torch(torch, ours, theirs, rand(6, 3))


def test_state_dict_holds_running_stats_as_buffers():
    bn = nn.BatchNorm2d(2)
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert bn.num_batches_tracked.dtype is plugtorch.int64
    assert bn.weight.tolist() == [1.0, 1.0] and bn.bias.tolist() == [0.0, 0.0]
    assert bn.running_var.tolist() == [1.0, 1.0]


def test_input_checks():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 2D input\)"):
        nn.BatchNorm2d(3)(plugtorch.randn(2, 3))
    with pytest.raises(ValueError, match="expected input with 3 channels at dim 1, got 4"):
        nn.BatchNorm1d(3)(plugtorch.randn(2, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(plugtorch.randn(1, 3))
    bn = nn.BatchNorm1d(3).eval()
    assert bn(plugtorch.randn(1, 3)).shape == (1, 3)


def test_reset_running_stats():
    bn = nn.BatchNorm1d(2)
    bn(plugtorch.randn(5, 2))
    bn.reset_running_stats()
    assert bn.running_mean.tolist() == [0.0, 0.0] and bn.num_batches_tracked.item() == 0


def test_bn_state_dict_loads_into_torch(torch):
    ours = nn.BatchNorm2d(3)
    for s in range(3):
        ours(plugtorch.tensor(rand(4, 3, 2, 2, seed=s)))
    theirs = torch.nn.BatchNorm2d(3)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    fresh = nn.BatchNorm2d(3)
    copy_weights(fresh, theirs)
    assert [b.tolist() for b in fresh.buffers()] == [b.tolist() for b in ours.buffers()]


def test_state_dict_without_num_batches_tracked_loads(torch):
    """Older checkpoints lack the counter; torch fills it in, and so do we."""
    sd = {k: v for k, v in nn.BatchNorm1d(2).state_dict().items() if k != "num_batches_tracked"}
    bn = nn.BatchNorm1d(2)
    bn(plugtorch.randn(4, 2))
    assert bn.load_state_dict(sd).missing_keys == []
    assert bn.num_batches_tracked.item() == 1
    theirs = torch.nn.BatchNorm1d(2)
    assert theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in sd.items()}).missing_keys == []
