"""The hand-written CUDA kernels: where their sources live and how a backend loads them.

Each ``kernels/<stem>.cu`` file is one module of ``extern "C" __global__`` entry points.
A *loader* maps a stem to an object with ``get_function(name)``: ``cupy.RawModule`` on a
GPU (compiled by NVRTC on first use, cached by CuPy), or, in the CPU tests, the same source
compiled for the CPU (``emulation.cpu_loader``).
Kernels are called as CuPy's are: ``kernel(grid, block, args)`` with arrays and NumPy
scalars of the exact C parameter types.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy

KERNEL_DIR = Path(__file__).with_name("kernels")
# NVRTC options shared by the backend, the compile checks and gpu_check.sh
NVRTC_OPTIONS = ("-std=c++17",)
THREADS = 256  # threads per block for the 1-D launches


def sources() -> dict[str, Path]:
    """stem -> path of every kernel source shipped with the backend."""
    return {p.stem: p for p in sorted(KERNEL_DIR.glob("*.cu"))}


def source_path(stem: str) -> Path:
    path = KERNEL_DIR / f"{stem}.cu"
    if not path.exists():
        raise FileNotFoundError(f"no kernel source {path.name} in {KERNEL_DIR}")
    return path


def headers() -> list[Path]:
    """The shared ``kernels/*.cuh`` files the sources include."""
    return sorted(KERNEL_DIR.glob("*.cuh"))


def nvrtc_options() -> tuple[str, ...]:
    """NVRTC's options: ``NVRTC_OPTIONS``, the kernel directory for the shared headers, and a
    digest of those headers as a define, because CuPy caches a module by its source text and
    options, which would not change when only an included header did."""
    digest = hashlib.sha256(b"".join(h.read_bytes() for h in headers())).hexdigest()[:16]
    return (*NVRTC_OPTIONS, f"-I{KERNEL_DIR}", f"-DPLUGTORCH_KERNEL_HEADERS=0x{digest}")


def blocks(n: int, threads: int = THREADS, cap: int = 65535) -> int:
    """Blocks for a grid-stride loop over n items (at least one: CUDA refuses an empty grid)."""
    return max(1, min(cap, (n + threads - 1) // threads))


Loader = Callable[[str], Any]

# Entry points are written once per dtype: ``<name>_f32``, ``<name>_f64``, ...
DTYPE_SUFFIX = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}
FLOATS = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))  # what the float kernels take as they are
_F16 = numpy.dtype(numpy.float16)


def kernel_finder(load: Loader) -> Callable[[str, str, Any], Any]:
    """``find(stem, name, dtype)`` -> entry point ``<name>_<suffix>`` of ``kernels/<stem>.cu``,
    compiled on first use (NVRTC on a GPU) and then looked up from a dict."""
    found: dict[tuple, Any] = {}

    def find(stem: str, name: str, dtype):
        # keyed by the dtype itself: NumPy's ``dtype.name`` is Python code (about 2 us a call, 36
        # calls in a GPU CNN step when every launch asked for it)
        key = (stem, name, dtype)
        kernel = found.get(key)
        if kernel is None:
            kernel = found[key] = load(stem).get_function(f"{name}_{DTYPE_SUFFIX[numpy.dtype(dtype).name]}")
        return kernel
    return find


def as_operand(a, dtype):
    """``a`` as a kernel takes it: itself when it is a C-contiguous array of ``dtype``, else a
    C-contiguous copy in ``dtype`` (kernels index their arguments as flat memory)."""
    if a.dtype == dtype and a.flags.c_contiguous:
        return a
    return a.astype(dtype, order="C")


def float_work_dtype(dtype, refusal: str):
    """The dtype a floating kernel computes ``dtype`` in: float32/float64 as they are, float16 in
    float32 (rounded back once); anything else is a TypeError, ``refusal`` formatted with its name."""
    dtype = numpy.dtype(dtype)
    if dtype in FLOATS:  # (compared as dtypes: see kernel_finder on dtype.name)
        return dtype
    if dtype == _F16:
        return FLOATS[0]
    raise TypeError(refusal.format(dtype=dtype.name))


def cupy_loader() -> Loader:
    import cupy

    @functools.cache
    def load(stem: str):
        return cupy.RawModule(code=source_path(stem).read_text(), options=nvrtc_options())
    return load


def cupy_source_loader() -> Loader:
    """Like ``cupy_loader``, for generated source text (the fused elementwise chains)."""
    import cupy
    return lambda code: cupy.RawModule(code=code, options=NVRTC_OPTIONS)
