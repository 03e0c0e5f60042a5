"""Execute CUDA kernel sources on the CPU, for tests on machines without a GPU.

``CpuModule(path=...)`` is a stand-in for ``cupy.RawModule`` built from the *same* ``.cu``
file: g++ compiles it with ``cuda_cpu.h`` force-included (the threads of a block as fibers
meeting at each ``__syncthreads()``, blocks one after another), and ``get_function(name)``
returns a kernel called as CuPy's are, ``kernel(grid, block, args)``, over NumPy arrays and
NumPy scalars. Every ``extern "C" __global__`` function of the source is an entry point.

Stricter than a GPU on purpose: each argument's dtype is checked against the parameter's C
type (a float64 scalar for a ``float`` parameter is garbage on a GPU, an error here), arrays
must be C-contiguous, and a read-only array may only go to a ``const`` pointer.

A quoted ``#include`` is found beside the source (as nvcc finds it) or in ``include_dirs``.
Compiled libraries are cached by a hash of header, source, included files and flags under
``$PLUGTORCH_CUDA_CPU_CACHE`` (default ``~/.cache/plugtorch/cuda_cpu``).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

__all__ = ["CpuModule", "CpuKernel", "entry_points", "HEADER", "compiler_missing"]

HEADER = Path(__file__).with_name("cuda_cpu.h")
_FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-Wall", "-Werror", "-Wno-unused-function",
          "-Wno-unused-variable")
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)\s*\(')
_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
           "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32,
           "int64": ctypes.c_int64, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
           "float64": ctypes.c_double}
_launch_lock = threading.Lock()  # the header keeps blockDim/gridDim in globals: one launch at a time


def entry_points(source: str) -> list[str]:
    """The ``extern "C" __global__`` kernels a source defines, in order."""
    return _ENTRY.findall(source)


def compiler_missing() -> str | None:
    """Why kernels cannot be built here (no g++), or None."""
    return None if shutil.which("g++") else "g++ is not installed (apt-get install g++)"


def _cache_dir() -> Path:
    root = os.environ.get("PLUGTORCH_CUDA_CPU_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "plugtorch", "cuda_cpu")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _launcher_source(source_path: str, names: list[str]) -> str:
    lines = [f'#include "{source_path}"',
             'extern "C" const char* cuda_cpu_launch_error() { return cuda_cpu::launch_error; }']
    for n in names:
        lines.append(f'extern "C" void cuda_cpu_launch_{n}(unsigned gx, unsigned gy, unsigned gz, unsigned bx, '
                     f'unsigned by, unsigned bz, void** args) {{ cuda_cpu::launch({n}, dim3{{gx, gy, gz}}, '
                     f'dim3{{bx, by, bz}}, args); }}')
        lines.append(f'extern "C" const char* cuda_cpu_signature_{n}() {{ static const std::string s = '
                     f'cuda_cpu::signature({n}); return s.c_str(); }}')
    return "\n".join(lines) + "\n"


def _included(source: str, include_dirs: tuple[Path, ...]) -> list[str]:
    """The text of each ``#include "file"`` of ``source`` found in ``include_dirs`` (for the cache key)."""
    texts = []
    for name in _QUOTED_INCLUDE.findall(source):
        for d in include_dirs:
            if (d / name).is_file():
                texts.append((d / name).read_text())
                break
    return texts


def _build(source: str, name: str, include_dirs: tuple[Path, ...] = ()) -> Path:
    names = entry_points(source)
    if not names:
        raise ValueError(f'{name}: no extern "C" __global__ kernel found')
    parts = [HEADER.read_text(), source, " ".join(_FLAGS), *_included(source, include_dirs)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    lib = _cache_dir() / f"{Path(name).stem}-{key}.so"
    if lib.exists():
        return lib
    why = compiler_missing()
    if why:
        raise RuntimeError(f"cannot build {name} for the CPU: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / Path(name).name
        src.write_text(source)
        launcher = Path(tmp) / "launch.cpp"
        launcher.write_text(_launcher_source(str(src), names))
        out = Path(tmp) / "lib.so"
        includes = [f"-I{d}" for d in include_dirs]
        cmd = ["g++", *_FLAGS, *includes, "-include", str(HEADER), str(launcher), "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"g++ could not build {name} under cuda_cpu.h:\n{done.stderr}")
        partial = lib.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(out, partial)
        os.replace(partial, lib)  # atomic: a concurrent test process sees all of it or none
    return lib


class CpuKernel:
    """One entry point; ``kernel(grid, block, args)`` as ``cupy.RawKernel``."""

    def __init__(self, module: "CpuModule", name: str):
        self.name = name
        self._module = module
        self._launch = getattr(module._lib, f"cuda_cpu_launch_{name}")
        self._launch.restype = None
        self._launch.argtypes = [ctypes.c_uint] * 6 + [ctypes.POINTER(ctypes.c_void_p)]
        sig = getattr(module._lib, f"cuda_cpu_signature_{name}")
        sig.restype = ctypes.c_char_p
        self.params = [p for p in sig().decode().split(",") if p]

    def __repr__(self) -> str:
        return f"<CpuKernel {self.name}({', '.join(self.params)}) from {self._module.name}>"

    def _arg(self, i: int, param: str, value):
        where = f"kernel {self.name}: argument {i}"
        if param.startswith("*"):
            const = param.startswith("*const ")
            want = param.split(" ")[-1].lstrip("*")
            if not isinstance(value, np.ndarray):
                raise TypeError(f"{where} is a {want} pointer; got {type(value).__name__}")
            if value.dtype.name != want:
                raise TypeError(f"{where} points to {want}; got an array of {value.dtype.name}")
            if not value.flags.c_contiguous:
                raise ValueError(f"{where}: the array is not C-contiguous (shape {value.shape}, strides "
                                 f"{value.strides}); the kernel indexes it as flat memory")
            if not const and not value.flags.writeable:
                raise ValueError(f"{where}: a read-only array passed to a non-const {want}* parameter")
            return ctypes.c_void_p(value.ctypes.data)
        if not isinstance(value, np.generic):
            raise TypeError(f"{where} is a {param} scalar; pass numpy.{param}(...) (got {type(value).__name__}: "
                            "CuPy would choose a C type for a Python scalar that may not match)")
        if value.dtype.name != param:
            raise TypeError(f"{where} is a {param} parameter; got a {value.dtype.name} scalar")
        return _CTYPES[param](value.item())

    def __call__(self, grid, block, args, shared_mem: int = 0):
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        if len(args) != len(self.params):
            raise TypeError(f"kernel {self.name} takes {len(self.params)} arguments ({', '.join(self.params)}); "
                            f"got {len(args)}")
        if block[0] * block[1] * block[2] > 1024 or min(block) < 1:
            raise ValueError(f"kernel {self.name}: block {block} is not a valid CUDA block (1 to 1024 threads)")
        if min(grid) < 1:
            raise ValueError(f"kernel {self.name}: grid {grid} has an empty dimension (CUDA refuses it)")
        values = [self._arg(i, p, a) for i, (p, a) in enumerate(zip(self.params, args))]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                                      for v in values])
        with _launch_lock:
            self._launch(*grid, *block, pointers)
            error = self._module._error()
        if error:
            raise RuntimeError(f"kernel {self.name} <<<{grid}, {block}>>>: {error.decode()}")


class CpuModule:
    """A ``.cu`` source built for the CPU; ``get_function`` as ``cupy.RawModule``'s."""

    def __init__(self, code: str | None = None, path: str | os.PathLike | None = None,
                 include_dirs: tuple = ()):
        if (code is None) == (path is None):
            raise TypeError("CpuModule takes code= or path=, exactly one")
        self.name = str(path) if path is not None else "<source>"
        self.code = Path(path).read_text() if path is not None else code
        self.entry_points = entry_points(self.code)
        # a quoted #include is found beside the source first, as nvcc finds it
        dirs = ((Path(path).resolve().parent,) if path is not None else ()) + tuple(Path(d) for d in include_dirs)
        self._lib = ctypes.CDLL(str(_build(self.code, self.name if path is not None else "source.cu", dirs)))
        self._error = self._lib.cuda_cpu_launch_error
        self._error.restype = ctypes.c_char_p
        self._kernels: dict[str, CpuKernel] = {}

    def get_function(self, name: str) -> CpuKernel:
        if name not in self.entry_points:
            raise AttributeError(f"{self.name} has no kernel {name!r}; it defines {', '.join(self.entry_points)}")
        if name not in self._kernels:
            self._kernels[name] = CpuKernel(self, name)
        return self._kernels[name]
