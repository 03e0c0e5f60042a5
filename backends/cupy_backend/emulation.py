"""``cupy_emulated``: the CuPy backend's own code, run on the CPU for CI (not a device).

Load it with ``PLUGTORCH_PLUGINS=plugtorch_backends.cupy_backend.emulation``. It builds
the CuPy backend from ``table.py`` exactly as the real one is built, with two stand-ins:
the array namespace is NumPy checked call by call against the installed CuPy's API
(``api_check.CheckedNamespace``), and the hand-written kernels are the same ``.cu``
sources compiled with g++ under ``plugtorch/testing/cuda_cpu`` (``cpu_loader``).
The conformance kit run on it checks the values, the gradients and the API of the CuPy
path; what only a GPU shows (timings, CUDA's own numerics) is left to
``benchmarks/gpu_check.sh``.

It declares no accelerator and answers to no device name: it is a test backend, listed
as unavailable (with the reason) where CuPy or g++ is missing, and test support, so it may
import ``plugtorch.testing``'s CPU build of CUDA (see ``plugtorch.backend_api``).
"""
from __future__ import annotations

import functools

import numpy
from plugtorch_backends.numpy_backend.xp_table import numpy_erf

from plugtorch.backend_api import CONTRACT_VERSION, Backend, hookimpl

from .modules import Loader, source_path
from .probe import installed

PLUGTORCH_CONTRACT = CONTRACT_VERSION
PLUGTORCH_TEST_SUPPORT = True
NAME = "cupy_emulated"


def why_unavailable() -> str | None:
    if not installed():
        return "the CuPy package is not installed, and its API is what this backend checks against"
    from plugtorch.testing.cuda_cpu import compiler_missing
    return compiler_missing()


def cpu_loader() -> Loader:
    """Like ``modules.cupy_loader``: stem -> the kernel source compiled for the CPU."""
    from plugtorch.testing.cuda_cpu import CpuModule

    @functools.cache
    def load(stem: str):
        return CpuModule(path=source_path(stem))
    return load


def cpu_source_loader() -> Loader:
    """Like ``modules.cupy_source_loader``, for generated source text (the fused chains)."""
    from plugtorch.testing.cuda_cpu import CpuModule
    return lambda code: CpuModule(code=code)


def _probe(backend: Backend) -> str | None:
    reason = why_unavailable()
    if reason:
        return reason
    import cupy
    import cupyx
    import cupyx.scipy.special

    from . import table
    from .api_check import CheckedNamespace

    xp = CheckedNamespace(numpy, cupy)
    extras = CheckedNamespace(type("host_cupyx", (), {
        "scatter_add": staticmethod(lambda a, slices, value: numpy.add.at(a, slices, value))}), cupyx)
    special = CheckedNamespace(type("host_special", (), {"erf": staticmethod(numpy_erf)}), cupyx.scipy.special)
    to_host = CheckedNamespace(type("host_cupy", (), {"asnumpy": staticmethod(lambda a: numpy.array(a))}), cupy)
    table.install(backend, _registrars[-1], xp, cpu_loader(), load_source=cpu_source_loader(),
                  add_at=extras.scatter_add, erf=special.erf, to_host=to_host.asnumpy)
    return None


_registrars: list = []


@hookimpl
def plugtorch_register(registrar):
    _registrars.append(registrar)
    registrar.add_backend(Backend(
        name=NAME, primitives={}, dtype_of=lambda a: None,
        # its arrays are NumPy's: never claim host data passed to plugtorch.tensor()
        is_native=lambda obj: False, host_memory=False, probe=_probe))
