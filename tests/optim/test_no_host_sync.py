"""Optimizer steps on a device-memory backend read nothing back to the host: their scalar
bookkeeping (step counts, NAdam's mu_product, ASGD's eta and mu) stays in Python numbers and
every value test (Muon's overflow guard) runs on the device. LBFGS is the exception by
design: it compares losses and step sizes on the host, as torch's does."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import make_backend

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn, optim
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl
from plugtorch.testing import count_transfers

DEV = "devmem_optim"


class _DeviceMemoryPlugin:
    """NumPy declaring device memory, as a GPU backend does."""

    PLUGTORCH_CONTRACT = CONTRACT_VERSION

    @hookimpl
    def plugtorch_register(self, registrar):
        registrar.add_backend(make_backend(name=DEV, aliases=(), host_memory=False))


@pytest.fixture(scope="module")
def dev():
    name = plugtorch.register_plugin(_DeviceMemoryPlugin(), name="tests.optim.devmem")
    try:
        with plugtorch.debug_mode(False):
            yield DEV
    finally:
        plugtorch.unregister_plugin(name)


BUILDERS = {
    "Adadelta": lambda ps: optim.Adadelta(ps, weight_decay=0.1),
    "Adagrad": lambda ps: optim.Adagrad(ps, lr_decay=0.01),
    "Adamax": lambda ps: optim.Adamax(ps, betas=(0.3, 0.9)),
    "NAdam": lambda ps: optim.NAdam(ps, weight_decay=0.1, decoupled_weight_decay=True),
    "RAdam": lambda ps: optim.RAdam(ps, weight_decay=0.1),
    "ASGD": lambda ps: optim.ASGD(ps, t0=1),
    "Muon": lambda ps: optim.Muon([p for p in ps if p.ndim == 2]),
    "RMSprop": lambda ps: optim.RMSprop(ps, centered=True, momentum=0.9),
    "Adam": lambda ps: optim.Adam(ps, betas=(0.3, 0.9), amsgrad=True),
}


@pytest.mark.parametrize("name", BUILDERS)
def test_steps_make_no_host_sync(dev, name):
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)
    x = plugtorch.tensor(rng.standard_normal((4, 6)).astype(np.float32), device=dev)
    y = plugtorch.tensor(rng.integers(0, 3, 4), device=dev)
    opt = BUILDERS[name](list(model.parameters()))
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(3):  # the first step creates the state, the later ones use it
        with count_transfers(trace=True) as counts:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        assert counts.total("to_host") == 0, counts.report("to_host")
    moved = [not np.array_equal(a.numpy(), p.detach().numpy())
             for a, p in zip(before, model.parameters())]
    assert any(moved) and all(p.backend == dev for p in model.parameters())
