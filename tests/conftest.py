"""Shared test fixtures: backends to parametrise over, the optional torch oracle, data root."""
from __future__ import annotations

import os
import pathlib

import pytest

import plugtorch

ROOT = pathlib.Path(__file__).resolve().parents[1]


def available_backends() -> list[str]:
    reg = plugtorch.get_registry()
    return [name for name, b in reg.backends.items() if b.available]


def pytest_generate_tests(metafunc):
    # Any test taking a ``backend`` argument runs once per available backend.
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", available_backends())


@pytest.fixture
def torch():
    """PyTorch, the reference oracle; tests using it skip (saying why) where it is not installed."""
    return pytest.importorskip("torch", reason="PyTorch (the reference oracle) is not installed; "
                                               "`pip install torch==2.13.0` to run this comparison")


@pytest.fixture
def numpy_kernel_calls(monkeypatch):
    """``spy(*names)``: wraps the NumPy backend's kernels of those names so that each call appends
    its name to the list ``spy`` returns (the tests that dispatch really reaches a kernel)."""
    backend = plugtorch.get_registry().backends["numpy"]
    calls: list[str] = []

    def spy(*names):
        for name in names:
            kernel = backend.kernels[name]
            monkeypatch.setitem(backend.kernels, name,
                                lambda *a, _k=kernel, _n=name, **kw: calls.append(_n) or _k(*a, **kw))
        return calls
    return spy


@pytest.fixture
def native_pool_width():
    """``run(width, fn)``: fn() with the NumPy backend's native kernels split into ``width`` jobs,
    then the width as it was (following BLAS's thread count)."""
    from plugtorch_backends.numpy_backend.native import _kernels, blas_threads

    def run(width, fn):
        plugtorch.zeros(1)  # the backend registers, and with it the pool's set-up
        before = _kernels.pool_info()[0]
        _kernels.pool_set_width(width)
        try:
            return fn()
        finally:
            if blas_threads.FOLLOWED is not None:
                _kernels.pool_follow(blas_threads.FOLLOWED)
            else:
                _kernels.pool_set_width(before)
    return run


@pytest.fixture(params=["native loop", "python loop"])
def engine_loop(request, monkeypatch):
    """Runs a test once with each loop of the backward pass: ``_native.c``'s and ``engine.py``'s."""
    from plugtorch.core import engine, native
    if request.param == "native loop":
        if engine._native is None:
            pytest.skip(f"the backward pass's C loop does not run here: {native.status()}")
    else:
        monkeypatch.setattr(engine, "_native", None)
    return request.param


@pytest.fixture
def data_root() -> pathlib.Path:
    """A data root holding mnist/: $PLUGTORCH_DATA where it has one, else the repository's data/."""
    env = os.environ.get("PLUGTORCH_DATA")
    for root in ([pathlib.Path(env)] if env else []) + [ROOT / "data"]:
        if (root / "mnist").is_dir():
            return root
    pytest.skip(f"MNIST files not found under {ROOT / 'data'} (a clone has them in data/mnist/); "
                "set PLUGTORCH_DATA to a data root holding mnist/")


@pytest.fixture(scope="session")
def bench_models():
    """``benchmarks/models.py``: the real models the benchmarks time, for the tests of them."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_models_defs", ROOT / "benchmarks" / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
