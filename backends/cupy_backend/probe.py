"""Whether CuPy can compute here, and if not, exactly what is missing.

``cupy.is_available()`` answers False without a reason; users need the reason: no CuPy
package, a CuPy that fails to import, no driver (or one older than CuPy's CUDA runtime),
no device, or no NVRTC to compile kernels with. Each step costs more than the one before,
and the first (finding the package) imports nothing.
"""
from __future__ import annotations

import importlib.util

INSTALL = ("install CuPy for your CUDA version: pip install 'plugtorch[cupy13]' (CUDA 13) or "
           "'plugtorch[cupy12]' (CUDA 12)")


def _version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def _error_name(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


def installed() -> bool:
    """Whether the CuPy package is importable, without importing it. A directory named ``cupy``
    on the path without an ``__init__.py`` (a namespace package) is not CuPy."""
    spec = importlib.util.find_spec("cupy")
    return spec is not None and spec.origin is not None


def why_unavailable() -> str | None:
    """None when CuPy has a device to compute on and NVRTC to build kernels; else the reason."""
    if not installed():
        return f"CuPy is not installed; {INSTALL}"
    try:
        import cupy
        runtime = cupy.cuda.runtime
    except Exception as e:  # a broken or mismatched wheel
        return f"CuPy is installed but fails to import ({_error_name(e)}); reinstall it: {INSTALL}"
    try:
        runtime_version = _version(runtime.runtimeGetVersion())
    except Exception as e:
        return f"CuPy {cupy.__version__} cannot load the CUDA runtime ({_error_name(e)})"
    try:
        count = runtime.getDeviceCount()
    except Exception as e:
        try:
            driver = runtime.driverGetVersion()
        except Exception:
            driver = 0
        have = f"driver supports CUDA {_version(driver)}" if driver else "no NVIDIA driver is loaded"
        return (f"CuPy {cupy.__version__} (CUDA runtime {runtime_version}) finds no usable GPU: {_error_name(e)} "
                f"({have}); install an NVIDIA driver for CUDA {runtime_version} or newer on a machine with a GPU")
    if count == 0:
        return f"CuPy {cupy.__version__} (CUDA runtime {runtime_version}) finds no CUDA device (0 devices)"
    try:
        cupy.cuda.nvrtc.getVersion()
    except Exception as e:
        return (f"CuPy finds {count} GPU(s) but not NVRTC, which compiles plugtorch's kernels ({_error_name(e)}); "
                f"pip install nvidia-cuda-nvrtc (for CUDA {runtime_version.split('.')[0]})")
    return None
