"""plugtorch.distributed.get_default_backend_for_device against torch's, on one process: the
backend names, the errors, and that the CPU's name starts a process group (minGPT-ddp's setup)."""
from __future__ import annotations

import inspect

import pytest

import plugtorch
import plugtorch.distributed as dist

torch = pytest.importorskip("torch")
torch_dist = pytest.importorskip("torch.distributed")

DEVICES = ["cpu", "cpu:0", "cuda", "cuda:1", "xpu", "mps", "meta", "hpu", "foo", "CPU", "cu_da", "cuda1",
           "cuda:-1", "cpu:01", "cuda:x", "cuda:0:1", ""]


def outcome(fn, device):
    try:
        return fn(device)
    except Exception as e:  # the error is what is compared
        return type(e).__name__, str(e)


def test_signature_is_torchs():
    mine = inspect.signature(dist.get_default_backend_for_device).parameters
    theirs = inspect.signature(torch_dist.get_default_backend_for_device).parameters
    assert list(mine) == list(theirs) == ["device"]
    assert "get_default_backend_for_device" in dist.__all__


# torch's answers as a fresh process gives them, taken when pytest collects this file: later, a
# torch module another test imports may register a backend of its own for a device ("fake" for hpu)
TORCHS = {name: outcome(torch_dist.get_default_backend_for_device, name) for name in DEVICES}


@pytest.mark.parametrize("name", DEVICES)
def test_strings_as_torch(name):
    got = outcome(dist.get_default_backend_for_device, name)
    assert got == TORCHS[name]
    assert name not in ("cpu", "cpu:0") or got == "gloo"


@pytest.mark.parametrize("name", ["cpu", "cuda:1", "xpu", "mps", "meta"])
def test_devices_as_torch(name):
    assert (outcome(dist.get_default_backend_for_device, plugtorch.device(name))
            == outcome(torch_dist.get_default_backend_for_device, torch.device(name)))


@pytest.mark.skipif(plugtorch.accelerator.is_available() or torch.accelerator.is_available(),
                    reason="an index names a device of the current accelerator: compared where neither has one")
def test_index_without_an_accelerator_as_torch():
    got = outcome(dist.get_default_backend_for_device, 0)
    assert got == outcome(torch_dist.get_default_backend_for_device, 0)
    assert got[0] == "RuntimeError"


def test_other_types_are_refused_naming_the_function():
    with pytest.raises(TypeError, match="get_default_backend_for_device: device must be .* got NoneType"):
        dist.get_default_backend_for_device(None)
    with pytest.raises(TypeError):
        torch_dist.get_default_backend_for_device(None)


def test_the_cpu_backend_starts_a_process_group(monkeypatch):
    for var in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    dist.destroy_process_group()
    try:
        dist.init_process_group(backend=dist.get_default_backend_for_device(plugtorch.device("cpu")))
        assert dist.is_initialized() and dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()
