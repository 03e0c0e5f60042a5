"""The hand-written CUDA kernels: where their sources live and how a backend loads them.

Each ``kernels/<stem>.cu`` file is one module of ``extern "C" __global__`` entry points.
A *loader* maps a stem to an object with ``get_function(name)``: ``cupy.RawModule`` on a
GPU (compiled by NVRTC on first use, cached by CuPy), or
:class:`plugtorch.testing.cuda_cpu.CpuModule` in the CPU tests, which run the same source.
Kernels are called as CuPy's are: ``kernel(grid, block, args)`` with arrays and NumPy
scalars of the exact C parameter types.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

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


def blocks(n: int, threads: int = THREADS, cap: int = 65535) -> int:
    """Blocks for a grid-stride loop over n items (at least one: CUDA refuses an empty grid)."""
    return max(1, min(cap, (n + threads - 1) // threads))


Loader = Callable[[str], Any]


def cupy_loader() -> Loader:
    import cupy

    @functools.lru_cache(maxsize=None)
    def load(stem: str):
        return cupy.RawModule(code=source_path(stem).read_text(), options=NVRTC_OPTIONS)
    return load


def cpu_loader() -> Loader:
    from plugtorch.testing.cuda_cpu import CpuModule

    @functools.lru_cache(maxsize=None)
    def load(stem: str):
        return CpuModule(path=source_path(stem))
    return load
