"""state_dict / load_state_dict: round trips, strictness, and error messages."""
from __future__ import annotations

import pytest

import plugtorch
from plugtorch import nn


def make_net():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))


def test_state_dict_keys_and_sharing():
    net = make_net()
    sd = net.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                        "1.running_var", "1.num_batches_tracked", "3.weight", "3.bias"]
    assert not any(v.requires_grad for v in sd.values())
    # detached but sharing memory with the live parameters, like torch's
    with plugtorch.no_grad():
        net[3].bias.fill_(7.0)
    assert sd["3.bias"].tolist() == [7.0, 7.0, 7.0]
    assert net.state_dict(keep_vars=True)["3.bias"] is net[3].bias


def test_state_dict_keys_match_torch(torch):
    tnet = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(8, 3))
    assert list(make_net().state_dict()) == list(tnet.state_dict())


def test_round_trip_restores_values_and_outputs():
    src, dst = make_net(), make_net()
    src.train()
    src(plugtorch.randn(4, 1, 4, 4))  # moves BatchNorm's running statistics
    src.eval()
    dst.eval()
    x = plugtorch.randn(2, 1, 4, 4)
    assert (src(x) - dst(x)).abs().amax().item() > 0
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert (src(x) - dst(x)).abs().amax().item() == 0
    assert dst[1].num_batches_tracked.item() == 1
    # values are copied, not aliased
    with plugtorch.no_grad():
        src[3].bias.add_(1.0)
    assert (src[3].bias - dst[3].bias).abs().amax().item() == pytest.approx(1.0)


def test_load_keeps_parameter_objects_and_dtype():
    net = nn.Linear(2, 2)
    w = net.weight
    net.load_state_dict({"weight": plugtorch.ones(2, 2, dtype=plugtorch.float64),
                         "bias": plugtorch.zeros(2)})
    assert net.weight is w and w.dtype is plugtorch.float32 and w.requires_grad
    assert w.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_missing_and_unexpected_keys_are_listed():
    net = make_net()
    sd = dict(net.state_dict())
    del sd["3.bias"]
    del sd["1.running_var"]
    sd["3.extra"] = plugtorch.zeros(1)
    sd["head.weight"] = plugtorch.zeros(1)
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    msg = str(err.value)
    assert msg.startswith("Error(s) in loading state_dict for Sequential:")
    assert 'Missing key(s) in state_dict: "1.running_var", "3.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "head.weight", "3.extra".' in msg


def test_non_strict_reports_instead_of_raising():
    net = make_net()
    sd = dict(net.state_dict())
    del sd["0.bias"]
    sd["bogus"] = plugtorch.zeros(1)
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["0.bias"]
    assert result.unexpected_keys == ["bogus"]


def test_shape_mismatch_is_an_error_even_when_not_strict():
    net = nn.Linear(4, 3)
    sd = {"weight": plugtorch.zeros(3, 5), "bias": plugtorch.zeros(3)}
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with "
                           r"shape plugtorch.Size\(\[3, 5\]\) from checkpoint, the shape in "
                           r"current model is plugtorch.Size\(\[3, 4\]\)"):
            net.load_state_dict(sd, strict=strict)


def test_non_tensor_value_is_named():
    with pytest.raises(RuntimeError, match='parameter named "bias".*received list'):
        nn.Linear(1, 1).load_state_dict({"weight": plugtorch.zeros(1, 1), "bias": [0.0]})


def test_non_persistent_buffers_are_not_saved_or_expected():
    m = nn.Module()
    m.register_buffer("kept", plugtorch.zeros(2))
    m.register_buffer("scratch", plugtorch.zeros(2), persistent=False)
    assert list(m.state_dict()) == ["kept"]
    m.load_state_dict({"kept": plugtorch.ones(2)})
    with pytest.raises(RuntimeError, match='Unexpected key.*"scratch"'):
        m.load_state_dict({"kept": plugtorch.ones(2), "scratch": plugtorch.ones(2)})


def test_load_from_torch_state_dict_matches_outputs(torch):
    import numpy as np
    tnet = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    net = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    net.load_state_dict({k: plugtorch.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(net(plugtorch.tensor(x)).detach().numpy(),
                               tnet(torch.tensor(x)).detach().numpy(), atol=1e-6)


def test_assign_replaces_tensors():
    net = nn.Linear(2, 1)
    new_w = plugtorch.full((1, 2), 3.0)
    net.load_state_dict({"weight": new_w, "bias": plugtorch.zeros(1)}, assign=True)
    assert isinstance(net.weight, nn.Parameter) and net.weight.requires_grad
    assert net.weight.tolist() == [[3.0, 3.0]]


def test_load_from_state_dict_override_with_torchs_signature():
    """A custom module ported from PyTorch can rename legacy keys in _load_from_state_dict."""
    class Renamed(nn.Linear):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                  unexpected_keys, error_msgs):
            old = prefix + "w"
            if old in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(old)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                          missing_keys, unexpected_keys, error_msgs)

    net = nn.Sequential(Renamed(2, 1))
    sd = {"0.w": plugtorch.ones(1, 2), "0.bias": plugtorch.zeros(1)}
    net.load_state_dict(sd)
    assert net[0].weight.tolist() == [[1.0, 1.0]]
    assert list(sd) == ["0.w", "0.bias"], "the caller's dict is left alone"
