"""Fixtures for the CuPy backend's CPU-side tests: its CUDA kernels built for the CPU."""
from __future__ import annotations

import pytest

from plugtorch.testing.cuda_cpu import compiler_missing


@pytest.fixture(scope="session")
def cpu_load():
    """stem -> CpuModule of backends/cupy_backend/kernels/<stem>.cu (the same source a GPU runs)."""
    why = compiler_missing()
    if why:
        pytest.skip(f"the CUDA kernels cannot be executed on the CPU: {why}")
    from plugtorch_backends.cupy_backend.emulation import cpu_loader
    return cpu_loader()
