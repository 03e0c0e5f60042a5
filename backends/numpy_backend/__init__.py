"""The NumPy backend plugin: plugtorch's default CPU backend.

It registers through the ``plugtorch`` entry point exactly as a third-party
backend would: a table of primitives (shared with CuPy via ``xp_table``), a NumPy
random generator, and a few fused kernels for composite ops where NumPy can do
better than the decomposition.
"""
from __future__ import annotations

import numpy as np

from plugtorch.backend_api import CONTRACT_VERSION, Backend, hookimpl

from . import allocator, native
from .fused import FUSED_KERNELS
from .fused_optim import OPTIM_KERNELS
from .xp_table import make_dtype_maps, make_out_variants, make_table

PLUGTORCH_CONTRACT = CONTRACT_VERSION
NAME = "numpy"

_TO_NATIVE, _FROM_NATIVE = make_dtype_maps(np)


def _generator(seed):
    return np.random.Generator(np.random.PCG64(seed))


def _get_state(gen):
    return gen.bit_generator.state


def _set_state(gen, state):
    gen.bit_generator.state = state


def _uniform(gen, shape, low, high, dtype):
    if dtype.name in ("float32", "float64"):
        out = gen.random(shape, dtype=_TO_NATIVE[dtype])
    else:
        out = gen.random(shape).astype(_TO_NATIVE[dtype])
    if low != 0.0 or high != 1.0:
        out = out * (high - low) + low
    return np.asarray(out, dtype=_TO_NATIVE[dtype])


def _normal(gen, shape, mean, std, dtype):
    if dtype.name in ("float32", "float64"):
        out = gen.standard_normal(shape, dtype=_TO_NATIVE[dtype])
    else:
        out = gen.standard_normal(shape).astype(_TO_NATIVE[dtype])
    if mean != 0.0 or std != 1.0:
        out = out * std + mean
    return np.asarray(out, dtype=_TO_NATIVE[dtype])


def _randint(gen, low, high, shape, dtype):
    return np.asarray(gen.integers(low, high, size=shape), dtype=_TO_NATIVE[dtype])


def make_primitives():
    table = make_table(np, to_host=lambda x: x, from_host_array=lambda a: a)
    table.update({
        "generator": _generator,
        "generator_get_state": _get_state,
        "generator_set_state": _set_state,
        "uniform": _uniform,
        "normal": _normal,
        "randint": _randint,
        "permutation": lambda gen, n: gen.permutation(n).astype(np.int64),
    })
    return table


def make_backend(name: str = NAME, aliases=("cpu",), host_memory: bool = True) -> Backend:
    return Backend(
        name=name,
        primitives=make_primitives(),
        dtype_of=lambda a: _FROM_NATIVE[a.dtype],
        is_native=lambda obj: isinstance(obj, (np.ndarray, np.generic)),
        aliases=aliases,
        array_module=np,
        host_memory=host_memory,
        out_variants=make_out_variants(np),
    )


@hookimpl
def plugtorch_register(registrar):
    allocator.tune()  # process-wide glibc settings that stop steps re-faulting their memory
    registrar.add_backend(make_backend())
    kernels = {**FUSED_KERNELS, **OPTIM_KERNELS, **native.kernels()}
    native.share_blas_threads()  # NumPy's OpenBLAS and the native kernels on one pool of threads
    for op, fn in kernels.items():
        registrar.add_kernel(op, NAME, fn)
