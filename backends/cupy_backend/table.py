"""The CuPy backend's primitive table and kernels, over any CuPy-like array namespace.

``make_backend(xp, load, ...)`` builds the backend from ``xp`` (``cupy`` on a GPU) and a
kernel loader (``cupy.RawModule`` on a GPU). Built from NumPy checked against CuPy's API
and the CPU-built kernels instead, the same code is what CI runs (``emulation.py``): every
line below runs in CI except the few marked as touching CuPy itself.

Where CuPy differs from NumPy (see ``xp_table.make_table``): its ufuncs always return
arrays (no ``out=...``), repeated-index accumulation is ``cupyx.scatter_add``, strided
views cannot be made read-only, and ``erf`` lives in ``cupyx.scipy.special``.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy
from plugtorch_backends.numpy_backend.xp_table import make_dtype_maps, make_out_variants, make_table

from . import (
    activation_kernels,
    attention_kernels,
    binary_kernels,
    bounds,
    conv_kernels,
    loss_kernels,
    norm_kernels,
    optim_kernels,
    philox,
    rnn_kernels,
)
from .fusion import ElementwiseFuser


def make_primitives(xp, load, *, add_at: Callable, erf: Callable, to_host: Callable,
                    special: Callable | None = None) -> dict[str, Callable]:
    def from_host_array(a):
        return xp.asarray(a)

    def as_strided(x, shape, strides):
        return xp.lib.stride_tricks.as_strided(x, shape=shape, strides=strides)

    table = make_table(xp, to_host=to_host, from_host_array=from_host_array, ufunc_out=False,
                       add_at=add_at, as_strided=as_strided, erf=erf, special=special)
    table.update(bounds.checked(xp, table))  # CuPy wraps bad indices: check them in debug mode
    table.update(binary_kernels.make_primitives(xp, load, table))  # 16-byte loads for large operands
    table.update(philox.make_random_primitives(xp, load))
    return table


def make_kernels(xp, load) -> dict[str, Callable]:
    """op name -> fused kernel (the hand-written CUDA modules, launched through ``load``)."""
    kernels: dict[str, Callable] = {}
    for module in (activation_kernels, attention_kernels, conv_kernels, loss_kernels, norm_kernels, optim_kernels,
                   rnn_kernels):
        kernels.update(module.make_kernels(xp, load))
    return kernels


def install(backend, registrar, xp, load, *, load_source: Callable, add_at: Callable, erf: Callable,
            to_host: Callable, special: Callable | None = None) -> None:
    """Fill a probed backend: its primitives over ``xp``, its dtype map and array module, the
    kernels (registered through ``registrar``, the plugin's own) and the elementwise fuser
    (``load_source`` builds its generated modules). The real backend and the emulated one
    differ only in what they pass here."""
    backend.primitives.update(make_primitives(xp, load, add_at=add_at, erf=erf, to_host=to_host, special=special))
    _, from_native = make_dtype_maps(numpy)
    backend.dtype_of = lambda a: from_native[a.dtype]
    backend.array_module = xp
    backend.out_variants = make_out_variants(xp, quiet=False)
    backend.elementwise_fuser = ElementwiseFuser(xp, load_source)
    for op, fn in make_kernels(xp, load).items():
        registrar.add_kernel(op, backend.name, fn)
