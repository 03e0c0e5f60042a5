"""The CuPy backend as users meet it without a GPU: listed, unavailable, and saying exactly why."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import probe
from plugtorch_backends.cupy_backend.api_check import CheckedNamespace, CupyApiError
from plugtorch_backends.cupy_backend.probe import installed as cupy_installed

import plugtorch

HAS_CUPY = cupy_installed()


def _backend():
    return plugtorch.get_registry().backends["cupy"]


def _expected_reason() -> str:
    """What this machine lacks, asked of CuPy directly (not through the code under test)."""
    if not HAS_CUPY:
        return "CuPy is not installed"
    import cupy
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as e:
        return str(e).split(":")[0]  # cudaErrorInsufficientDriver / cudaErrorNoDevice
    if n == 0:
        return "finds no CUDA device"
    pytest.skip(f"this machine has {n} GPU(s): the CuPy backend is available here (benchmarks/gpu_check.sh)")


def test_the_backend_is_listed_with_the_exact_reason_it_cannot_run():
    reason = _expected_reason()
    b = _backend()
    assert b.accelerator == "cuda" and not b.host_memory and "cuda" in b.aliases
    assert not b.available
    assert reason in b.unavailable_reason
    if HAS_CUPY:
        import cupy
        assert f"CuPy {cupy.__version__}" in b.unavailable_reason
    else:
        assert "pip install 'plugtorch[cupy13]'" in b.unavailable_reason


@pytest.mark.parametrize("select", [
    lambda: plugtorch.zeros(2, device="cuda"),
    lambda: plugtorch.zeros(2, device="cupy:0"),
    lambda: plugtorch.tensor([1.0]).cuda(),
    lambda: plugtorch.tensor([1.0]).to("cupy:0"),
    lambda: plugtorch.nn.Linear(2, 2).cuda(),
    lambda: plugtorch.use("cupy"),
    lambda: plugtorch.cuda.current_device(),
], ids=["device=cuda", "device=cupy:0", "tensor.cuda", "to(cupy:0)", "module.cuda", "use", "current_device"])
def test_selecting_it_raises_that_reason(select):
    reason = _expected_reason()
    with pytest.raises((plugtorch.BackendUnavailableError, RuntimeError)) as info:
        select()
    message = str(info.value)
    assert reason in message or "no backend declaring accelerator='cuda' is available" in message


def test_torch_style_queries_answer_truthfully():
    _expected_reason()
    assert plugtorch.cuda.is_available() is False
    assert plugtorch.cuda.device_count() == 0
    assert plugtorch.accelerator.is_available() is False


def test_selection_through_the_environment_and_the_cli_gives_the_reason():
    reason = _expected_reason()
    code = "import plugtorch; plugtorch.zeros(1)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**_env(), "PLUGTORCH_BACKEND": "cupy"})
    assert done.returncode != 0 and reason in done.stderr, done.stderr[-2000:]
    done = subprocess.run([sys.executable, "-m", "plugtorch", "train", "--backend", "cupy", "--epochs", "1"],
                          capture_output=True, text=True, env=_env())
    out = done.stdout + done.stderr
    assert done.returncode != 0 and reason in out, out[-2000:]
    assert "Traceback" not in out


def _env():
    import os
    return {k: v for k, v in os.environ.items() if k != "PLUGTORCH_BACKEND"}


def test_importing_plugtorch_does_not_import_cupy():
    code = "import sys, plugtorch; plugtorch.zeros(3) + 1; print('cupy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_the_reason_without_the_cupy_package(monkeypatch):
    monkeypatch.setattr(probe.importlib.util, "find_spec", lambda name: None)
    why = probe.why_unavailable()
    assert why.startswith("CuPy is not installed") and "plugtorch[cupy13]" in why and "[cupy12]" in why


# -- the API check that lets CI run the CuPy path on NumPy ---------------------------------

@pytest.fixture
def xp():
    cupy = pytest.importorskip("cupy", reason="the API check compares against the installed CuPy "
                                               "(pip install 'plugtorch[cupy13]')")
    return CheckedNamespace(np, cupy)


def test_the_api_check_computes_as_numpy(xp):
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(xp.add(a, 1), a + 1)
    np.testing.assert_array_equal(xp.sum(a, axis=(0,), keepdims=True), a.sum(0, keepdims=True))
    assert xp.float32 is np.float32 and xp.ndarray is np.ndarray
    view = xp.lib.stride_tricks.as_strided(a, shape=(3,), strides=(8,))
    np.testing.assert_array_equal(view, [0.0, 1.0, 2.0])


@pytest.mark.parametrize("call, says", [
    (lambda xp: xp.add(np.ones(2), 1, out=...), "out=Ellipsis"),
    (lambda xp: xp.matmul(np.ones((2, 2)), np.ones((2, 2)), out=...), "out=Ellipsis"),
    (lambda xp: xp.lib.stride_tricks.as_strided(np.ones(3), shape=(3,), strides=(8,), writeable=False),
     "writeable"),
    (lambda xp: xp.indices((2, 3), sparse=True), "sparse"),
    (lambda xp: xp.errstate(all="ignore"), "cupy.errstate does not exist"),
    (lambda xp: xp.add(np.ones(2), 1, where=True), "does not accept ['where']"),
    (lambda xp: xp.negative(np.ones(2), np.ones(2), np.ones(2)), "takes 1 operands"),
], ids=["ufunc-out-ellipsis", "matmul-out-ellipsis", "as_strided-writeable", "indices-sparse", "errstate",
        "ufunc-where", "operand-count"])
def test_the_api_check_refuses_what_cupy_refuses(xp, call, says):
    with pytest.raises(CupyApiError, match=None) as info:
        call(xp)
    assert says in str(info.value)


# -- checkpoints saved on a GPU, loaded where there is none --------------------------------

def test_a_gpu_checkpoint_loads_on_the_cpu_with_map_location_and_says_so_without(tmp_path, monkeypatch):
    _expected_reason()
    model = plugtorch.nn.Linear(3, 2)
    path = tmp_path / "gpu.pt"
    with monkeypatch.context() as m:  # record the tensors as a CuPy run's save would
        m.setattr(plugtorch.Tensor, "backend", property(lambda self: "cupy"))
        plugtorch.save(model.state_dict(), path)
    with pytest.raises(plugtorch.BackendUnavailableError) as info:
        plugtorch.load(path)
    assert "saved on 'cupy'" in str(info.value) and "map_location='cpu'" in str(info.value)
    state = plugtorch.load(path, map_location="cpu")
    for name, value in model.state_dict().items():
        assert state[name].device.type == "numpy"
        np.testing.assert_array_equal(state[name].numpy(), value.numpy())
