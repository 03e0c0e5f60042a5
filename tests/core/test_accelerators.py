"""plugtorch.accelerator, plugtorch.cuda and plugtorch.backends answer from the registered backends."""
from __future__ import annotations

import contextlib

import pytest
from plugtorch_backends.numpy_backend import make_backend

import plugtorch

from .plugin_helpers import plugin


def test_without_an_accelerator_backend_everything_says_no():
    assert plugtorch.accelerator.is_available() is False
    assert plugtorch.accelerator.current_accelerator() is None
    assert plugtorch.accelerator.device_count() == 0
    assert plugtorch.accelerator.current_device_index() == -1
    assert plugtorch.cuda.is_available() is False and plugtorch.cuda.device_count() == 0
    assert plugtorch.backends.mps.is_available() is False and plugtorch.backends.mps.is_built() is False
    assert plugtorch.backends.cudnn.is_available() is False
    with pytest.raises(RuntimeError, match="No CUDA GPUs are available"):
        plugtorch.cuda.current_device()
    plugtorch.cuda.manual_seed_all(0)  # what scripts call regardless: nothing happens
    plugtorch.cuda.synchronize()
    plugtorch.cuda.empty_cache()
    plugtorch.accelerator.synchronize()


def test_backend_switches_are_settable_attributes():
    import plugtorch.backends.cudnn as cudnn
    old = cudnn.benchmark
    try:
        plugtorch.backends.cudnn.benchmark = True
        assert cudnn.benchmark is True
    finally:
        cudnn.benchmark = old
    plugtorch.backends.cuda.matmul.allow_tf32 = False


@contextlib.contextmanager
def _accelerator(kind, aliases=(), count=None):
    backend = make_backend(name=f"fake_{kind}", aliases=aliases, host_memory=False)
    backend.accelerator = kind
    backend.device_count = (lambda: count) if count is not None else None
    name = plugtorch.register_plugin(plugin(lambda r: r.add_backend(backend)), name=f"fake-{kind}-plugin")
    try:
        yield backend
    finally:
        plugtorch.unregister_plugin(name)


def test_a_backend_declaring_cuda_makes_them_true():
    with _accelerator("cuda", aliases=("cuda",), count=2):
        assert plugtorch.accelerator.is_available()
        device = plugtorch.accelerator.current_accelerator()
        assert device.type == "cuda" and device == plugtorch.device("cuda")
        assert plugtorch.accelerator.device_count() == 2 and plugtorch.cuda.device_count() == 2
        assert plugtorch.cuda.is_available() and plugtorch.backends.cudnn.is_available()
        assert plugtorch.cuda.current_device() == 0
        assert plugtorch.cuda.get_device_name() == "fake_cuda"
        # the device it answers can be used as any device
        x = plugtorch.ones(3).to(device)
        assert x.backend == "fake_cuda" and (x * 2).sum().item() == 6.0
        assert not plugtorch.backends.mps.is_available()
    assert not plugtorch.accelerator.is_available()


def test_an_accelerator_without_the_kind_as_alias_answers_its_own_name():
    with _accelerator("mps"):
        assert plugtorch.backends.mps.is_available() and not plugtorch.cuda.is_available()
        assert plugtorch.accelerator.current_accelerator() == plugtorch.device("fake_mps")
        assert plugtorch.accelerator.device_count() == 1


def test_cuda_manual_seed_restarts_only_that_backends_stream():
    with _accelerator("cuda") as backend:
        plugtorch.cuda.manual_seed(5)
        a = plugtorch.rand(3, device=backend.name)
        plugtorch.cuda.manual_seed(5)
        b = plugtorch.rand(3, device=backend.name)
        assert a.tolist() == b.tolist()


def test_the_mnist_examples_device_choice_runs():
    use_accel = plugtorch.accelerator.is_available()
    device = plugtorch.accelerator.current_accelerator() if use_accel else plugtorch.device("cpu")
    assert plugtorch.ones(2).to(device).device == plugtorch.device("cpu")
