"""plugtorch on array_api_strict: a whole backend, written against the array API standard.

``array_api_strict`` is the reference implementation of the Python array API standard:
its own array type, only the standard's functions, on NumPy underneath. This package
maps plugtorch's primitives (``plugtorch.backend_api.PRIMITIVES``) onto that namespace
(table.py), builds what the standard lacks from what it has (indexing.py, special.py,
philox.py), adds two fused kernels, and registers it all as the backend ``"arrayapi"``::

    import plugtorch
    x = plugtorch.randn(3, 4, device="arrayapi", requires_grad=True)

Installed (``pip install .``), plugtorch finds the Library below through the
``plugtorch`` entry point in pyproject.toml. The table is written against ``xp``, any
array API namespace, so the same module can back another standard library.
"""
from __future__ import annotations

import array_api_strict as xp

from plugtorch import library

from .table import make_dtype_maps, make_primitives

__version__ = "0.1.0"
NAME = "arrayapi"

# The plugin contract this package was written for (a number, not library.CONTRACT_VERSION,
# which is whatever the installed plugtorch implements): a plugtorch implementing another
# refuses the package, saying so, instead of failing somewhere inside it.
PLUGTORCH_CONTRACT = 1
lib = library.Library(NAME, contract=PLUGTORCH_CONTRACT)

_TO_NATIVE, _FROM_NATIVE = make_dtype_maps(xp)
_ARRAY = type(xp.asarray(0))

BACKEND = lib.define_backend(
    NAME,
    primitives=make_primitives(xp, NAME),
    dtype_of=lambda a: _FROM_NATIVE[a.dtype],
    is_native=lambda obj: isinstance(obj, _ARRAY),
    array_module=xp,
    host_memory=True,  # array_api_strict computes in host memory: reading values costs no sync
)


# Fused kernels for two composite ops: one pass each instead of the decomposition's five
# or six ops. The core's derivatives apply to them; the conformance kit checks them here
# and checks the decompositions on the "arrayapi_bare" twin.
@lib.register_kernel("softmax", NAME)
def _softmax(x, *, dim):
    e = xp.exp(x - xp.max(x, axis=dim, keepdims=True))
    return e / xp.sum(e, axis=dim, keepdims=True)


@lib.register_kernel("log_softmax", NAME)
def _log_softmax(x, *, dim):
    z = x - xp.max(x, axis=dim, keepdims=True)
    return z - xp.log(xp.sum(xp.exp(z), axis=dim, keepdims=True))


__all__ = ["BACKEND", "NAME", "lib"]
