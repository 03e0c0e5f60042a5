"""Muon follows torch.optim.Muon: its Newton-Schulz orthogonalisation in bfloat16 arithmetic,
its momentum and learning-rate adjustment, its options and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import optim
from plugtorch.optim.muon import _zeropower_via_newtonschulz

COEFFS = (3.4445, -4.7750, 2.0315)
BF16_ULP_AT_1 = 2.0 ** -7  # spacing of bfloat16 numbers in [1, 2)


@pytest.mark.parametrize("shape", [(8, 6), (6, 8), (16, 16), (32, 8), (1, 5)])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_newton_schulz_rounds_as_torchs_bfloat16(torch, shape, scale):
    from torch.optim._muon import _zeropower_via_newtonschulz as theirs_ns
    rng = np.random.default_rng(0)
    g = (rng.standard_normal(shape) * scale).astype(np.float32)
    ours = _zeropower_via_newtonschulz(plugtorch.tensor(g), COEFFS, 5, 1e-7).numpy()
    theirs = theirs_ns(torch.tensor(g), COEFFS, 5, 1e-7).float().numpy()
    assert ours.dtype == np.float32
    # Every value is a bfloat16 number; a matrix product summed in another order may land
    # an element on the neighbouring one.
    assert np.array_equal(ours, torch.tensor(ours).bfloat16().float().numpy())
    assert np.mean(ours == theirs) >= 0.9
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2 * BF16_ULP_AT_1)


def test_newton_schulz_of_zero_and_of_an_overflowing_norm_is_zero(torch):
    from torch.optim._muon import _zeropower_via_newtonschulz as theirs_ns
    for value in (0.0, 1e37):
        g = np.full((4, 3), value, np.float32)
        with np.errstate(all="ignore"):
            ours = _zeropower_via_newtonschulz(plugtorch.tensor(g), COEFFS, 5, 1e-7).numpy()
        theirs = theirs_ns(torch.tensor(g), COEFFS, 5, 1e-7).float().numpy()
        np.testing.assert_array_equal(ours, theirs)


CONFIGS = [
    dict(),
    dict(lr=0.02, momentum=0.9, nesterov=False, weight_decay=0.0),
    dict(lr=0.01, adjust_lr_fn="match_rms_adamw", ns_steps=3),
    dict(lr=0.01, adjust_lr_fn="original", weight_decay=0.3, eps=1e-5),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("kwargs", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_matches_torch_step_for_step(torch, kwargs, dtype):
    rng = np.random.default_rng(1)
    shapes = [(8, 6), (6, 8), (12, 12)]
    inits = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ours = [plugtorch.tensor(a, requires_grad=True) for a in inits]
    theirs = [torch.tensor(a, requires_grad=True) for a in inits]
    opt, ref = optim.Muon(ours, **kwargs), torch.optim.Muon(theirs, **kwargs)
    lr = kwargs.get("lr", 1e-3)
    step_scale = max(lr * 0.2 * 12, lr * (8 / 6) ** 0.5)  # the largest adjusted lr used
    for k in range(1, 16):
        for p, q in zip(ours, theirs):
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad, q.grad = plugtorch.tensor(g), torch.tensor(g)
        opt.step()
        ref.step()
        for p, q in zip(ours, theirs):
            # the momentum buffer sees no bfloat16: float tolerance
            np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(),
                                       ref.state[q]["momentum_buffer"].numpy(),
                                       rtol=1e-6 if dtype == np.float32 else 1e-13, atol=1e-7)
            # each update agrees to a bfloat16 rounding of an element or so
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=0,
                                       atol=k * step_scale * BF16_ULP_AT_1, err_msg=f"step {k}")
            assert p.detach().numpy().dtype == dtype
    assert sorted(opt.state_dict()["state"][0]) == sorted(ref.state_dict()["state"][0])


def test_defaults_and_errors_match_torch(torch):
    ours = optim.Muon([plugtorch.zeros(2, 3, requires_grad=True)])
    theirs = torch.optim.Muon([torch.zeros(2, 3, requires_grad=True)])
    assert ours.defaults == theirs.defaults
    for kwargs, message in [(dict(lr=-1), "Learning rate should be >= 0 but is: -1"),
                            (dict(momentum=-0.5), "momentum should be >= 0 but is: -0.5"),
                            (dict(weight_decay=-1), "weight decay should be >= 0 but is: -1"),
                            (dict(adjust_lr_fn="rms"),
                             "Adjust learning rate function rms is not supported")]:
        with pytest.raises(ValueError, match=message):
            optim.Muon([plugtorch.zeros(2, 3, requires_grad=True)], **kwargs)
        with pytest.raises(ValueError, match=message):
            torch.optim.Muon([torch.zeros(2, 3, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        optim.Muon([plugtorch.zeros(3, requires_grad=True)])
    with pytest.raises(ValueError, match="Number of steps must be less than 100"):
        _zeropower_via_newtonschulz(plugtorch.ones(2, 2), COEFFS, 100, 1e-7)


def test_trains_the_hidden_layer_alongside_adamw():
    # torch's recommended split: Muon for 2-D hidden weights, AdamW for the rest.
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((64, 10)).astype(np.float32)
    x = plugtorch.tensor(xs)
    y = plugtorch.tensor((xs[:, 0] - xs[:, 3] > 0).astype(np.int64))
    model = plugtorch.nn.Sequential(plugtorch.nn.Linear(10, 32), plugtorch.nn.ReLU(),
                                    plugtorch.nn.Linear(32, 2))
    hidden = [p for p in model.parameters() if p.ndim == 2]
    others = [p for p in model.parameters() if p.ndim != 2]
    opts = [optim.Muon(hidden, lr=0.05), optim.AdamW(others, lr=1e-2)]
    losses = []
    for _ in range(30):
        loss = plugtorch.nn.functional.cross_entropy(model(x), y)
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
