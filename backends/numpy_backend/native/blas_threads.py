"""One set of worker threads for NumPy's OpenBLAS and the native kernels (``threadpool.c``).

With two BLAS threads, PyTorch runs its convolutions, pooling and elementwise kernels on both
cores; the native kernels ran on one, and splitting them over threads of their own made a CNN
step slower (12.5 ms against 12.0), because OpenBLAS's workers spin for a long while after
every matrix product and take the second core. OpenBLAS (0.3.27 and later, which NumPy's wheels
bundle) can hand its parallel jobs to a function the program supplies instead of its own
workers. So, when the NumPy backend registers, every OpenBLAS this process has loaded that
offers this gets ``threadpool.c``'s, and the native kernels split their loops over as many jobs as
OpenBLAS is told to use (followed at each call: ``OPENBLAS_NUM_THREADS``,
``plugtorch.set_num_threads`` and threadpoolctl limits size both). One pool serves both, and
its workers sleep after 1 ms without work instead of spinning on. Measured on 2 cores, 2 BLAS
threads (``benchmarks/bench_steps.py``'s steps, medians): CNN step 11.6 -> 9.1 ms, MLP
batch 64 0.61 -> 0.55 ms. With one thread nothing changes: OpenBLAS does not call the pool
and the kernels do not split.

What it changes for the process: BLAS calls made at the same time from several Python threads
run one after another (OpenBLAS's jobs use per-job scratch buffers, so the pool runs one call
at a time). ``PLUGTORCH_SHARE_BLAS_THREADS=0`` leaves OpenBLAS alone, and the kernels then stay
on one thread, as they do wherever no such OpenBLAS is loaded (another BLAS, an older
OpenBLAS, Windows). ``STATUS`` says what happened; ``native.status()`` includes it.
"""
from __future__ import annotations

import ctypes
import os

STATUS = "not set up yet"
_libraries: list = []  # the CDLL handles of the OpenBLAS copies given the callback, kept alive
FOLLOWED: int | None = None  # the address of the get_num_threads the pool's width follows

# OpenBLAS's names, as NumPy's (scipy_openblas, 64-bit ints), SciPy's (scipy_openblas) and plain
# builds export them
_PREFIXES = ("scipy_openblas_", "openblas_")
_SUFFIXES = ("64_", "_64", "")


def _symbol(lib, name: str):
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            fn = getattr(lib, prefix + name + suffix, None)
            if fn is not None:
                return fn
    return None


def install() -> str:
    """Hand OpenBLAS's jobs to the pool once; return (and keep in ``STATUS``) what was done."""
    global STATUS
    if STATUS == "not set up yet":
        STATUS = _install()
    return STATUS


def _install() -> str:
    from . import _kernels
    if _kernels is None:
        return "off: the native kernels are off"
    if os.environ.get("PLUGTORCH_SHARE_BLAS_THREADS", "1") == "0":
        return "off: PLUGTORCH_SHARE_BLAS_THREADS=0"
    callback = _kernels.pool_blas_callback()
    if callback is None:
        return "off: the pool has no threads on this platform"
    try:
        from threadpoolctl import ThreadpoolController
        controllers = ThreadpoolController().lib_controllers
    except Exception as exc:
        return f"off: the BLAS libraries could not be listed ({type(exc).__name__}: {exc})"
    given, follow = [], None
    for ctl in controllers:
        if getattr(ctl, "internal_api", None) != "openblas":
            continue
        try:
            lib = ctypes.CDLL(ctl.filepath)
        except OSError:
            continue
        setter, threads = _symbol(lib, "set_threads_callback_function"), _symbol(lib, "get_num_threads")
        if setter is None or threads is None:
            continue  # an OpenBLAS older than 0.3.27
        setter.argtypes, setter.restype = [ctypes.c_void_p], None
        setter(callback)
        _libraries.append(lib)
        given.append(os.path.basename(ctl.filepath))
        if follow is None:
            follow = ctypes.cast(threads, ctypes.c_void_p).value
    if not given:
        return "off: no OpenBLAS that takes a threads callback is loaded"
    global FOLLOWED
    FOLLOWED = follow
    _kernels.pool_follow(follow)
    return f"on ({', '.join(given)}; {_kernels.pool_info()[0]} threads at start)"
