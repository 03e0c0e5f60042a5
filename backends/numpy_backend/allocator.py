"""Keep glibc from handing a training step's memory back to the OS every step.

A training step allocates and frees many host arrays of 128 KiB to tens of MiB. With
glibc's defaults each of them is a fresh ``mmap`` (above ``M_MMAP_THRESHOLD``, 128 KiB
at start and moved at run time by what was freed last) or is trimmed off the heap
when freed (above ``M_TRIM_THRESHOLD``), so the next step maps new pages and takes a
page fault on every 4 KiB of them. On the MLP step (784-128-10, Adam) that is more
than half the step: 2.2 ms at batch 64 against 0.93 ms with the settings below.

So, when this backend registers, it fixes the mmap threshold at 32 MiB (glibc's
maximum; a fixed value also stops the run-time adjustment) and the trim threshold at
256 MiB, through ``mallopt`` — what PyTorch users otherwise get from setting
``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` by hand. Memory stays bounded:
freed blocks are reused by later steps (the steady-state footprint is one step's
peak), at most 256 MiB of free heap top is kept, and blocks above 32 MiB are still
mapped and unmapped as before (``tests/backends/test_allocator.py`` holds RSS steady
over 1,000 steps).

``mallopt`` is process-wide. It is left alone where the user set either
``MALLOC_*_`` variable themselves, with ``PLUGTORCH_TUNE_MALLOC=0``, and off glibc
(musl, macOS, Windows), where it does not exist. ``STATUS`` says what happened.
"""
from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3      # glibc's malloc.h
SETTINGS = {"M_MMAP_THRESHOLD": (M_MMAP_THRESHOLD, 32 << 20, "MALLOC_MMAP_THRESHOLD_"),
            "M_TRIM_THRESHOLD": (M_TRIM_THRESHOLD, 256 << 20, "MALLOC_TRIM_THRESHOLD_")}

STATUS = "not tuned yet"


def tune() -> str:
    """Apply the settings above once; return (and keep in ``STATUS``) what was done."""
    global STATUS
    if STATUS != "not tuned yet":
        return STATUS
    STATUS = _tune()
    return STATUS


def _tune() -> str:
    if os.environ.get("PLUGTORCH_TUNE_MALLOC", "1") == "0":
        return "left alone: PLUGTORCH_TUNE_MALLOC=0"
    if not sys.platform.startswith("linux") or not _is_glibc():
        return "left alone: the C library is not glibc"
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    done = []
    for name, (param, value, env) in SETTINGS.items():
        if env in os.environ:
            done.append(f"{name} left to {env}={os.environ[env]}")
        elif mallopt(param, value) == 1:
            done.append(f"{name}={value}")
        else:
            done.append(f"{name}: mallopt refused {value}")
    return "glibc mallopt: " + ", ".join(done)


def _is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError, AttributeError):
        return False
