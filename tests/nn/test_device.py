"""Module.to(device) across backends, using a second NumPy-based backend registered as a plugin."""
from __future__ import annotations

import types

import numpy as np
import pytest

import plugtorch
from plugtorch import nn
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl


@pytest.fixture
def other_backend(monkeypatch):
    """A fresh registry holding the built-in backends plus "nnclone", a NumPy clone."""
    from plugtorch_backends.numpy_backend import make_backend

    from plugtorch.core import device, plugins
    monkeypatch.setattr(plugins, "_registry", None)
    monkeypatch.setattr(plugins, "_pm", None)
    monkeypatch.setattr(device, "_global_default", None)
    mod = types.ModuleType("tests.nn.clone_backend")
    mod.PLUGTORCH_CONTRACT = CONTRACT_VERSION

    @hookimpl
    def plugtorch_register(registrar):
        registrar.add_backend(make_backend(name="nnclone", aliases=()))

    mod.plugtorch_register = plugtorch_register
    plugtorch.register_plugin(mod)
    return "nnclone"


def test_to_device_moves_parameters_buffers_and_grads(other_backend):
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    net(plugtorch.randn(5, 3)).sum().backward()
    params = list(net.parameters())
    before = [p.tolist() for p in params]
    assert net.to(other_backend) is net
    assert [p for p in net.parameters()] == params  # same objects: optimizers keep working
    assert all(p.backend == other_backend for p in net.parameters())
    assert all(p.grad.backend == other_backend for p in net.parameters())
    assert all(b.backend == other_backend for b in net.buffers())
    assert [p.tolist() for p in params] == before
    out = net(plugtorch.randn(5, 3, device=other_backend))
    assert out.backend == other_backend
    net.zero_grad()
    out.sum().backward()
    assert all(p.grad.backend == other_backend for p in net.parameters())


def test_load_state_dict_copies_across_backends(other_backend):
    src = nn.Linear(3, 2)
    dst = nn.Linear(3, 2).to(other_backend)
    dst.load_state_dict(src.state_dict())
    assert dst.weight.backend == other_backend
    np.testing.assert_array_equal(dst.weight.detach().numpy(), src.weight.detach().numpy())
    back = nn.Linear(3, 2)
    back.load_state_dict(dst.state_dict())
    assert back.weight.backend != other_backend and back.weight.tolist() == src.weight.tolist()


def test_layers_created_on_a_device(other_backend):
    lin = nn.Linear(2, 2, device=other_backend)
    bn = nn.BatchNorm2d(2, device=other_backend)
    assert lin.weight.backend == other_backend and lin.bias.backend == other_backend
    assert all(t.backend == other_backend for t in bn.state_dict().values())
