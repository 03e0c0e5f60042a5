"""plugtorch.amp.GradScaler against torch.amp.GradScaler on the CPU: the scale's trajectory with
inf/NaN gradients, skipped steps, errors, state dicts, and a short mixed-precision training."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.core.tensor import Tensor


@pytest.fixture
def torch(torch):
    """torch on one thread: its threads and ours contend on a small machine (40 training steps
    took 15 s instead of 0.3)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(threads)


def _twins(torch, sizes=(4, 3), seed=0):
    """The same MLP (Linear, ReLU, ..., Linear) in both libraries, torch's weights copied."""
    torch.manual_seed(seed)
    layers = [m for a, b in zip(sizes, sizes[1:]) for m in (torch.nn.Linear(a, b), torch.nn.ReLU())]
    tm = torch.nn.Sequential(*layers[:-1])
    pm = plugtorch.nn.Sequential(*[plugtorch.nn.Linear(m.in_features, m.out_features)
                                   if isinstance(m, torch.nn.Linear) else plugtorch.nn.ReLU() for m in tm])
    pm.load_state_dict({k: plugtorch.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return pm, tm


def _run(m, model, scaler, opt, x, bad_steps, steps):
    """Per step: the scale after update, the growth tracker, and whether the weights moved."""
    record = []
    for i in range(steps):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        first = next(iter(model.parameters()))
        if i in bad_steps:
            first.grad[0, 0] = float("nan") if i % 2 else float("inf")
        before = first.detach().clone()
        scaler.step(opt)
        scaler.update()
        moved = not bool((first.detach() == before).all())
        record.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"], moved))
    return record


def test_scale_trajectory_and_skipped_steps_match_torch(torch):
    pm, tm = _twins(torch)
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    kw = dict(init_scale=2.0 ** 4, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    ours = _run(plugtorch, pm, plugtorch.amp.GradScaler("cpu", **kw), plugtorch.optim.SGD(pm.parameters(), lr=0.1),
                plugtorch.tensor(x), {2, 3, 7}, 12)
    theirs = _run(torch, tm, torch.amp.GradScaler("cpu", **kw), torch.optim.SGD(tm.parameters(), lr=0.1),
                  torch.tensor(x), {2, 3, 7}, 12)
    assert ours == theirs
    assert [moved for *_, moved in ours].count(False) == 3
    for p, tp in zip(pm.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_unscale_gives_the_true_gradients_and_state_dicts_match(torch):
    pm, tm = _twins(torch)
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    scalers = []
    for m, model, xs in ((plugtorch, pm, plugtorch.tensor(x)), (torch, tm, torch.tensor(x))):
        scaler = m.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=5)
        opt = m.optim.SGD(model.parameters(), lr=0.1)
        scaler.scale(model(xs).pow(2).mean()).backward()
        scaler.unscale_(opt)
        scalers.append((scaler, opt, [p.grad.detach().numpy().copy() for p in model.parameters()]))
    for ours, theirs in zip(scalers[0][2], scalers[1][2]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    messages = []
    for scaler, opt, _ in scalers:
        with pytest.raises(RuntimeError) as e:
            scaler.unscale_(opt)
        messages.append(str(e.value))
        scaler.step(opt)
        with pytest.raises(RuntimeError) as e:
            scaler.step(opt)
        messages.append(str(e.value))
        scaler.update()
        messages.append(scaler.state_dict())
    assert messages[:3] == messages[3:]
    fresh = plugtorch.amp.GradScaler("cpu")
    fresh.load_state_dict(scalers[1][0].state_dict())  # torch's state dict, loaded here
    assert fresh.state_dict() == scalers[1][0].state_dict()


def test_update_without_a_step_and_disabled_scalers_follow_torch(torch):
    for m in (plugtorch, torch):
        scaler = m.amp.GradScaler("cpu")
        scaler.scale(m.ones(1))
        with pytest.raises(AssertionError, match="No inf checks were recorded prior to update."):
            scaler.update()
        off = m.amp.GradScaler("cpu", enabled=False)
        t = m.ones(2)
        assert off.scale(t) is t and off.get_scale() == 1.0 and off.state_dict() == {} and not off.is_enabled()
        with pytest.raises(RuntimeError, match="The source state dict is empty"):
            m.amp.GradScaler("cpu").load_state_dict({})


@pytest.mark.skipif(plugtorch.cuda.is_available(), reason="a CUDA backend is available here: the scaler stays on")
def test_a_cuda_scaler_without_cuda_warns_and_disables_as_torch(torch):
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here, so it does not warn")
    with pytest.warns(UserWarning) as theirs:
        torch.amp.GradScaler()
    with pytest.warns(UserWarning) as ours:
        scaler = plugtorch.cuda.amp.GradScaler()
    assert str(ours[0].message) == str(theirs[0].message) and not scaler.is_enabled()


def test_the_only_host_read_is_in_step(monkeypatch):
    reads = []
    item = Tensor.item
    monkeypatch.setattr(Tensor, "item", lambda self: reads.append(1) or item(self))
    model = plugtorch.nn.Linear(3, 2)
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.1)
    scaler = plugtorch.amp.GradScaler("cpu")
    scaler.scale(model(plugtorch.randn(4, 3)).sum()).backward()
    scaler.unscale_(opt)
    assert reads == []
    scaler.step(opt)
    assert reads == [1]  # whether to skip the optimizer step
    scaler.update()
    assert reads == [1]


def test_mixed_precision_training_reaches_torchs_loss(torch):
    pm, tm = _twins(torch, sizes=(8, 32, 32, 4), seed=3)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = rng.integers(0, 4, 64)
    losses = []
    for m, model in ((plugtorch, pm), (torch, tm)):
        opt = m.optim.Adam(model.parameters(), lr=1e-2)
        scaler = m.amp.GradScaler("cpu", init_scale=2.0 ** 10)
        xs, ys = m.tensor(x), m.tensor(y)
        for _ in range(40):
            opt.zero_grad()
            with m.autocast("cpu"):
                loss = m.nn.functional.cross_entropy(model(xs), ys)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses.append(loss.item())
        assert loss.dtype == m.float32 and all(p.dtype == m.float32 for p in model.parameters())
    with torch.no_grad():
        first = float(torch.nn.functional.cross_entropy(_twins(torch, (8, 32, 32, 4), seed=3)[1](torch.tensor(x)),
                                                        torch.tensor(y)))
    assert losses[1] < 0.8 * first  # it trains
    assert abs(losses[0] - losses[1]) <= 0.05 * losses[1] + 0.02  # bfloat16 roundings apart
