"""The CuPy backend plugin: plugtorch on NVIDIA GPUs.

Registered through the ``plugtorch`` entry point like any third-party backend. Importing
this module imports neither CuPy nor CUDA: the backend is always listed, and the first
question about it (``plugtorch.use("cupy")``, ``device="cuda"``, ``plugtorch.cuda.is_available()``)
runs :func:`probe.why_unavailable`; when that finds no CuPy, driver, device or NVRTC the
backend stays listed as unavailable with that reason, which selecting it raises.

It answers to ``cupy``, ``cuda`` and ``cupy:N`` / ``cuda:N``. Its primitives are NumPy's
table over ``cupy`` (``table.py``), its random numbers a counter-based Philox generator
(``philox.py``), and conv, pooling, softmax, cross-entropy and the optimizer updates run
hand-written kernels (``kernels/*.cu``), compiled by NVRTC on first use.
"""
from __future__ import annotations

from plugtorch.backend_api import CONTRACT_VERSION, Backend, hookimpl

from .probe import why_unavailable

PLUGTORCH_CONTRACT = CONTRACT_VERSION
NAME = "cupy"
ALIASES = ("cuda",)

_registrars: list = []  # the registrar of plugtorch_register, for the kernels the probe adds


def _probe(backend: Backend) -> str | None:
    reason = why_unavailable()
    if reason:
        return reason
    import cupy
    import cupyx
    import cupyx.scipy.special

    from . import table
    from .modules import cupy_loader, cupy_source_loader

    table.install(backend, _registrars[-1], cupy, cupy_loader(), load_source=cupy_source_loader(),
                  add_at=cupyx.scatter_add, erf=cupyx.scipy.special.erf, to_host=cupy.asnumpy)
    backend.is_native = lambda obj: isinstance(obj, cupy.ndarray)
    backend.device_index = lambda a: a.device.id
    backend.device_count = cupy.cuda.runtime.getDeviceCount
    backend.current_device = cupy.cuda.runtime.getDevice  # type: ignore[attr-defined]
    backend.synchronize = lambda: cupy.cuda.get_current_stream().synchronize()
    return None


def _is_cupy_array(obj) -> bool:
    # before the probe: recognise CuPy arrays without importing CuPy
    return type(obj).__module__.startswith("cupy")


def make_backend() -> Backend:
    return Backend(name=NAME, primitives={}, dtype_of=lambda a: None, is_native=_is_cupy_array,
                   aliases=ALIASES, host_memory=False, accelerator="cuda", probe=_probe)


@hookimpl
def plugtorch_register(registrar):
    _registrars.append(registrar)
    registrar.add_backend(make_backend())
