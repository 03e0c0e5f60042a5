"""Choosing a backend: env var, use(), backend(), device=, .to(), and mixing errors."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

import plugtorch


def test_default_backend_is_numpy_and_cpu_is_its_alias():
    t = plugtorch.zeros(2)
    assert str(t.device) == "numpy" and t.device == "cpu"
    assert plugtorch.zeros(2, device="cpu").device.type == "numpy"


def test_env_var_selects_the_default_backend():
    code = "import plugtorch; print(plugtorch.ones(1).device)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PLUGTORCH_BACKEND": "cpu"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "numpy"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PLUGTORCH_BACKEND": "nope"})
    assert r.returncode != 0 and "unknown backend 'nope'. Available backends: numpy" in r.stderr


def test_use_and_backend_context(second_backend):
    assert plugtorch.current_backend() == "numpy"
    with plugtorch.backend(second_backend):
        assert plugtorch.ones(1).device.type == second_backend
        with plugtorch.backend("numpy"):
            assert plugtorch.ones(1).device.type == "numpy"
        assert plugtorch.ones(1).device.type == second_backend
    assert plugtorch.ones(1).device.type == "numpy"
    plugtorch.use(second_backend)
    try:
        assert plugtorch.randn(2).device.type == second_backend
    finally:
        plugtorch.use("numpy")


def test_backend_context_is_per_thread(second_backend):
    seen = []
    with plugtorch.backend(second_backend):
        th = threading.Thread(target=lambda: seen.append(plugtorch.ones(1).device.type))
        th.start()
        th.join()
    assert seen == ["numpy"]


def test_unknown_backend_lists_what_is_available():
    with pytest.raises(plugtorch.BackendUnavailableError, match=r"unknown backend 'tpu'.*numpy"):
        plugtorch.use("tpu")
    with pytest.raises(plugtorch.BackendUnavailableError, match="unknown backend 'tpu'"):
        plugtorch.zeros(1, device="tpu")


def test_mixing_backends_names_both(second_backend):
    a = plugtorch.ones(2)
    b = plugtorch.ones(2, device=second_backend)
    for op in (lambda: a + b, lambda: a @ b, lambda: plugtorch.cat([a, b]),
               lambda: plugtorch.where(a > 0, a, b)):
        with pytest.raises(plugtorch.BackendMismatchError, match=f"'numpy' and '{second_backend}'"):
            op()


def test_to_moves_between_backends_and_gradients_flow_back(second_backend):
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    y = x.to(second_backend)
    assert y.device.type == second_backend and y.tolist() == [1.0, 2.0]
    (y * y).sum().backward()
    assert x.grad.device.type == "numpy" and x.grad.tolist() == [2.0, 4.0]
    assert y.cpu().device == "cpu"
    assert x.to("cpu") is x  # no move, no copy


def test_numpy_and_item_are_explicit_host_transfers():
    x = plugtorch.tensor([[1.5, 2.0]], requires_grad=True)
    with pytest.raises(RuntimeError, match="Use tensor.detach\\(\\).numpy\\(\\) instead"):
        x.numpy()
    assert x.detach().numpy().tolist() == [[1.5, 2.0]]
    assert x[0, 0].item() == 1.5
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        x.item()
