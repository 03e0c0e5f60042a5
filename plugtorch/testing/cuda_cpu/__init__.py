"""Execute CUDA kernel sources on the CPU, for tests on machines without a GPU.

``CpuModule(path=...)`` is a stand-in for ``cupy.RawModule`` built from the *same* ``.cu``
file: g++ compiles it with ``cuda_cpu.h`` force-included (the threads of a block as fibers
meeting at each ``__syncthreads()``, blocks one after another), and ``get_function(name)``
returns a kernel called as CuPy's are, ``kernel(grid, block, args)``, over NumPy arrays and
NumPy scalars. Every ``extern "C" __global__`` function of the source is an entry point.

Stricter than a GPU on purpose, so that a wrong kernel fails here instead of giving a
silently wrong result there. Each error names the kernel and, where it is one thread's
doing, the thread, the block, the array and the element:

* each argument's dtype is checked against the parameter's C type (a float64 scalar for a
  ``float`` parameter is garbage on a GPU, an error here), arrays must be C-contiguous, and a
  read-only array may only go to a ``const`` pointer;
* every launch runs once per order of ``orders`` (default ``ORDERS``: the threads between two
  barriers and the blocks of the grid ascending, descending, and in a seeded shuffle;
  ``PLUGTORCH_CUDA_CPU_ORDERS="ascending,shuffled:3"`` sets another default), each time on
  fresh copies of the arguments and with ``__shared__`` memory holding another byte
  pattern, and the arrays it writes must agree bit for bit. A difference is a race (a
  missing ``__syncthreads()``, threads writing one element), a read of ``__shared__`` memory
  nobody wrote, or a read past an array's end. A kernel that adds floats with ``atomicAdd``
  differs in the last bits between orders as between GPU runs: give it ``orders=("ascending",)``;
* an index outside a ``__shared__`` array or an array argument faults: the arrays lie between
  inaccessible guard pages, against the upper guard in one run and the lower in the next
  (an argument keeps its address modulo 16, so up to 15 bytes of padding may separate it
  from the guard; a write there is found after the run, a read through the comparison);
* threads of a block waiting at different ``__syncthreads()`` calls, or some returning while
  others wait, is a divergent barrier (undefined behaviour in CUDA);
* a block larger than the kernel's ``__launch_bounds__`` is refused, as a GPU refuses it; a
  block larger than a ``__shared__`` array indexed by thread fails at the first thread past
  its end, with the block size to launch at most;
* an integer division by zero, a stack overflow or a wild pointer is an error, not a crash
  of the test process.

So a passing test proves, for the grids, blocks and arguments it launches, that the kernel
computes those values in each order, stays inside its arrays and meets every barrier with
the whole block. It proves nothing about races that give the same result in these orders
(a thread runs from barrier to barrier uninterrupted), warps (no shuffles, votes or
``__syncwarp``; a block is not split into warps), the memory model (fences, atomics'
ordering, visibility between blocks), code generation (nvcc's contractions and
intrinsics; g++ computes the source in IEEE order), alignment faults, resource limits or
timing: that takes a GPU run.

A quoted ``#include`` is found beside the source (as nvcc finds it) or in ``include_dirs``.
Each ``__shared__ T name[N];`` of the source and its quoted includes is rewritten into
checked storage before compiling; a ``__shared__`` declaration that cannot be (several names,
an initializer, ``extern __shared__``) is an error saying so. Compiled libraries are cached by
a hash of the header, this module, the source, included files and flags under
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CpuModule", "CpuKernel", "entry_points", "HEADER", "ORDERS", "compiler_missing"]

HEADER = Path(__file__).with_name("cuda_cpu.h")
ORDERS = ("ascending", "descending", "shuffled:1")
_FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-Wall", "-Werror", "-Wno-unused-function",
          "-Wno-unused-variable")
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\((?P<bounds>(?:[^()]|\([^()]*\))*)\)\s+)?'
                    r'void\s+(?P<name>\w+)\s*\(')
_SHARED = re.compile(r'\b(?P<extern>extern\s+)?(?:static\s+)?__shared__\s+(?P<type>[A-Za-z_][\w:<>,\s]*?)\s+'
                     r'(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\[\];]+\]\s*)+);')
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/', re.DOTALL)
_ORDER = re.compile(r'ascending|descending|shuffled:(\d+)')
_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
           "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32,
           "int64": ctypes.c_int64, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
           "float64": ctypes.c_double}
_launch_lock = threading.Lock()  # the header keeps blockDim/gridDim in globals: one launch at a time


def entry_points(source: str) -> list[str]:
    """The ``extern "C" __global__`` kernels a source defines, in order."""
    return [m["name"] for m in _ENTRY.finditer(source)]


def compiler_missing() -> str | None:
    """Why kernels cannot be built here (no g++), or None."""
    return None if shutil.which("g++") else "g++ is not installed (apt-get install g++)"


def _cache_dir() -> Path:
    root = os.environ.get("PLUGTORCH_CUDA_CPU_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "plugtorch", "cuda_cpu")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, brackets and angle brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "([<"
        depth -= c in ")]>"
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _kernels(source: str) -> list[tuple[str, str | None, list[str]]]:
    """(name, the first ``__launch_bounds__`` argument or None, parameter names) of each entry point."""
    found = []
    for m in _ENTRY.finditer(source):
        depth, end = 1, m.end()
        while depth and end < len(source):
            depth += {"(": 1, ")": -1}.get(source[end], 0)
            end += 1
        names = []
        for param in _top_level_split(source[m.end():end - 1]):
            name = re.search(r'(\w+)\s*(?:\[[^\]]*\]\s*)*$', param)
            names.append(name[1] if name and name[1] != param.strip() else "")
        bounds = _top_level_split(m["bounds"])[0] if m["bounds"] else None
        found.append((m["name"], bounds, names))
    return found


def _checked_shared(text: str, name: str) -> str:
    """``text`` with each ``__shared__ T name[N];`` turned into a cuda_cpu::SharedSlot: storage
    between guard pages, placed anew for each run, that still is a ``T[N]`` to the kernel (it
    decays to ``T*`` for the device functions that take the array)."""
    def slot(m: re.Match) -> str:
        if m["extern"]:
            return m[0]  # left for the check below, which says why
        kind = f"{m['type'].strip()} {m['dims'].strip()}"
        # one line per line: compile errors and barrier sites keep their line numbers
        return (f"static ::cuda_cpu::SharedSlot<{kind}> cuda_cpu_shared_{m['name']}{{\"{m['name']}\"}}; "
                f"{m['type'].strip()} (&{m['name']}){m['dims'].strip()} = cuda_cpu_shared_{m['name']}.array();"
                + "\n" * m[0].count("\n"))
    rewritten = _SHARED.sub(slot, text)
    code = _COMMENT.sub(lambda c: "\n" * c[0].count("\n"), rewritten)
    left = re.search(r'\b(extern\s+)?__shared__\b', code)
    if left:
        line = code.count("\n", 0, left.start()) + 1
        why = ("dynamic shared memory (extern __shared__) is not provided on the CPU" if left[1] else
               "write one array per declaration, without an initializer: __shared__ T name[N];")
        raise ValueError(f"{name}:{line}: cuda_cpu cannot bounds-check this __shared__ declaration: {why}")
    return rewritten


def _launcher_source(source_path: str, kernels) -> str:
    lines = [f'#include "{source_path}"',
             'extern "C" const char* cuda_cpu_launch_error() { return cuda_cpu::launch_error; }']
    for n, bounds, _ in kernels:
        lines.append(f'extern "C" void cuda_cpu_launch_{n}(const unsigned* dims, void** args, const long long* sizes, '
                     f'const char* const* names, const long long* orders, int n_orders) {{ '
                     f'cuda_cpu::launch({n}, dims, args, sizes, names, orders, n_orders); }}')
        lines.append(f'extern "C" const char* cuda_cpu_signature_{n}() {{ static const std::string s = '
                     f'cuda_cpu::signature({n}); return s.c_str(); }}')
        # evaluated by the compiler: a bound written with a macro or a constant works
        bound = f"(long long)({bounds})" if bounds else "0"
        lines.append(f'extern "C" long long cuda_cpu_max_threads_{n}() {{ return {bound}; }}')
    return "\n".join(lines) + "\n"


def _included(source: str, include_dirs: tuple[Path, ...]) -> dict[str, Path]:
    """Each quoted ``#include`` of ``source`` found in ``include_dirs``, and theirs in turn."""
    found: dict[str, Path] = {}
    pending = [source]
    while pending:
        for name in _QUOTED_INCLUDE.findall(pending.pop()):
            if name in found or ".." in Path(name).parts or Path(name).is_absolute():
                continue
            for d in include_dirs:
                if (d / name).is_file():
                    found[name] = d / name
                    pending.append(found[name].read_text())
                    break
    return found


def _build(source: str, name: str, include_dirs: tuple[Path, ...] = ()) -> Path:
    kernels = _kernels(source)
    if not kernels:
        raise ValueError(f'{name}: no extern "C" __global__ kernel found')
    included = _included(source, include_dirs)
    texts = {n: _checked_shared(p.read_text(), str(p)) for n, p in included.items()}
    checked = _checked_shared(source, name)
    parts = [HEADER.read_text(), Path(__file__).read_text(), checked, " ".join(_FLAGS),
             *(f"{n}\0{t}" for n, t in sorted(texts.items()))]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    lib = _cache_dir() / f"{Path(name).stem}-{key}.so"
    if lib.exists():
        return lib
    why = compiler_missing()
    if why:
        raise RuntimeError(f"cannot build {name} for the CPU: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        # the rewritten includes beside the rewritten source, where a quoted #include looks first
        for n, text in texts.items():
            (Path(tmp) / n).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / n).write_text(text)
        src = Path(tmp) / Path(name).name
        src.write_text(checked)
        launcher = Path(tmp) / "launch.cpp"
        launcher.write_text(_launcher_source(str(src), kernels))
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


def _orders(orders: Sequence[str] | None) -> tuple[str, ...]:
    if orders is None:
        env = os.environ.get("PLUGTORCH_CUDA_CPU_ORDERS")
        orders = tuple(o.strip() for o in env.split(",")) if env else ORDERS
    orders = tuple(orders)
    bad = [o for o in orders if not _ORDER.fullmatch(o)]
    if bad or not orders:
        raise ValueError(f"orders {orders!r}: each is 'ascending', 'descending' or 'shuffled:<seed>', at least one "
                         f"(PLUGTORCH_CUDA_CPU_ORDERS takes them comma-separated)")
    return orders


class CpuKernel:
    """One entry point; ``kernel(grid, block, args)`` as ``cupy.RawKernel``."""

    def __init__(self, module: CpuModule, name: str, param_names: list[str]) -> None:
        self.name = name
        self._module = module
        self._launch = getattr(module._lib, f"cuda_cpu_launch_{name}")
        self._launch.restype = None
        self._launch.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_char_p),
                                 ctypes.POINTER(ctypes.c_longlong), ctypes.c_int]
        sig = getattr(module._lib, f"cuda_cpu_signature_{name}")
        sig.restype = ctypes.c_char_p
        self.params = [p for p in sig().decode().split(",") if p]
        bound = getattr(module._lib, f"cuda_cpu_max_threads_{name}")
        bound.restype = ctypes.c_longlong
        self.max_threads = bound() or None  # from __launch_bounds__, None where it has none
        names = param_names if len(param_names) == len(self.params) else [""] * len(self.params)
        self._names = (ctypes.c_char_p * max(1, len(names)))(*[n.encode() for n in names])

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

    def __call__(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any], shared_mem: int = 0) -> None:
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        if len(args) != len(self.params):
            raise TypeError(f"kernel {self.name} takes {len(self.params)} arguments ({', '.join(self.params)}); "
                            f"got {len(args)}")
        threads = block[0] * block[1] * block[2]
        if threads > 1024 or min(block) < 1:
            raise ValueError(f"kernel {self.name}: block {block} is not a valid CUDA block (1 to 1024 threads)")
        if self.max_threads is not None and threads > self.max_threads:
            raise ValueError(f"kernel {self.name} declares __launch_bounds__({self.max_threads}) and block {block} has "
                             f"{threads} threads: a GPU refuses this launch; launch at most {self.max_threads} "
                             "threads per block")
        if min(grid) < 1:
            raise ValueError(f"kernel {self.name}: grid {grid} has an empty dimension (CUDA refuses it)")
        values = [self._arg(i, p, a) for i, (p, a) in enumerate(zip(self.params, args))]
        pointers = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                                              for v in values])
        sizes = (ctypes.c_longlong * max(1, len(values)))(*[a.nbytes if p.startswith("*") else -1
                                                             for p, a in zip(self.params, args)])
        dims = (ctypes.c_uint * 6)(*grid, *block)
        orders = self._module._orders
        with _launch_lock:
            self._launch(dims, pointers, sizes, self._names, orders, len(orders) // 2)
            error = self._module._error()
        if error:
            raise RuntimeError(f"kernel {self.name} <<<{grid}, {block}>>>: {error.decode()}")


class CpuModule:
    """A ``.cu`` source built for the CPU; ``get_function`` as ``cupy.RawModule``'s.

    ``orders``: the orders each launch runs in and compares (default ``ORDERS``, or
    ``PLUGTORCH_CUDA_CPU_ORDERS``): ``"ascending"``, ``"descending"``, ``"shuffled:<seed>"``."""

    def __init__(self, code: str | None = None, path: str | os.PathLike | None = None,
                 include_dirs: tuple = (), orders: Sequence[str] | None = None) -> None:
        if path is not None and code is None:
            self.name, self.code = str(path), Path(path).read_text()
        elif code is not None and path is None:
            self.name, self.code = "<source>", code
        else:
            raise TypeError("CpuModule takes code= or path=, exactly one")
        self.orders = _orders(orders)
        pairs: list[int] = []
        for o in self.orders:
            match = _ORDER.fullmatch(o)
            assert match is not None, "_orders checked each"
            seed = match[1]
            pairs += [2, int(seed)] if seed else [("ascending", "descending").index(o), 0]
        self._orders = (ctypes.c_longlong * len(pairs))(*pairs)
        self._kernel_info = {n: names for n, _, names in _kernels(self.code)}
        self.entry_points = list(self._kernel_info)
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
            self._kernels[name] = CpuKernel(self, name, self._kernel_info[name])
        return self._kernels[name]
