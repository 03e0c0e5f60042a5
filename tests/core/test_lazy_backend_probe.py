"""Backend(probe=...): availability decided on first use, not at registration; device indices checked."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.core.backend import Backend

PLUGIN = "test-lazy-probe"


@pytest.fixture
def register():
    reg = plugtorch.get_registry()
    numpy_backend = reg.backends["numpy"]

    def add(name, probe, **options):
        b = Backend(name=name, primitives={}, dtype_of=numpy_backend.dtype_of, is_native=lambda obj: False,
                    probe=probe, **options)
        reg.registrar(PLUGIN).add_backend(b)
        return b
    yield add
    reg.remove_plugin(PLUGIN)


def test_the_probe_runs_once_on_first_use_and_its_primitives_then_dispatch(register):
    calls = []
    numpy_primitives = plugtorch.get_registry().backends["numpy"].primitives

    def probe(backend):
        calls.append(backend.name)
        backend.primitives.update(numpy_primitives)
        return None
    b = register("lazy_ok", probe)
    assert calls == []  # registration asks nothing
    assert b.available and b.available
    assert calls == ["lazy_ok"]
    x = plugtorch.ones(3, device="lazy_ok") * 2 + 1
    assert x.device.type == "lazy_ok"
    np.testing.assert_array_equal(x.numpy(), [3.0, 3.0, 3.0])


def test_a_probe_reason_makes_the_backend_unavailable_with_it(register):
    register("lazy_missing", lambda backend: "libfoo 2 is not installed")
    with pytest.raises(plugtorch.BackendUnavailableError, match="lazy_missing' is unavailable: libfoo 2 is not"):
        plugtorch.zeros(1, device="lazy_missing")


def test_a_probe_that_breaks_is_reported_not_raised(register):
    def probe(backend):
        raise OSError("driver exploded")
    b = register("lazy_broken", probe)
    assert not b.available
    assert b.unavailable_reason == "its availability probe failed: OSError: driver exploded"


def test_device_indices_are_checked_against_device_count(register):
    numpy_primitives = plugtorch.get_registry().backends["numpy"].primitives
    register("two_devices", lambda b: b.primitives.update(numpy_primitives), device_count=lambda: 2)
    assert plugtorch.zeros(1, device="two_devices:1").shape == (1,)
    with pytest.raises(RuntimeError, match="'two_devices:2' does not exist: backend 'two_devices' has 2 device"):
        plugtorch.zeros(1, device="two_devices:2")
    with pytest.raises(RuntimeError, match="invalid device string 'two_devices:x'"):
        plugtorch.zeros(1, device="two_devices:x")


def test_an_index_other_than_the_current_device_is_refused_not_ignored(register):
    numpy_primitives = plugtorch.get_registry().backends["numpy"].primitives
    b = register("current_one", lambda b: b.primitives.update(numpy_primitives), device_count=lambda: 2)
    b.current_device = lambda: 0
    assert plugtorch.zeros(1, device="current_one:0").shape == (1,)
    with pytest.raises(RuntimeError, match="computes on its current device \\(0\\); select device 1"):
        plugtorch.zeros(1, device="current_one:1")
