"""Small plugins the core tests register at run time (each one a plain module-like object)."""
from __future__ import annotations

import types

from plugtorch_backends.numpy_backend import make_backend, make_primitives

from plugtorch.core.backend import Backend
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl

_counter = [0]


def plugin(register, contract=CONTRACT_VERSION, name=None):
    """A plugin object whose hook calls ``register(registrar)``."""
    _counter[0] += 1
    mod = types.ModuleType(name or f"test_plugin_{_counter[0]}")
    if contract is not None:
        mod.PLUGTORCH_CONTRACT = contract

    @hookimpl
    def plugtorch_register(registrar):
        register(registrar)

    mod.plugtorch_register = plugtorch_register
    return mod


def numpy_clone_backend(name: str, host_memory: bool = True) -> Backend:
    """A second backend over NumPy, with no aliases and none of the fused kernels.

    ``host_memory=False`` makes it declare device memory, as a GPU backend does, so its
    value checks run in debug mode only and a test can count its host syncs without a GPU.
    """
    return make_backend(name=name, aliases=(), host_memory=host_memory)


def unavailable_backend(name: str, why: str) -> Backend:
    return Backend(name=name, primitives={}, dtype_of=lambda a: None, is_native=lambda o: False,
                   available=False, unavailable_reason=why)


__all__ = ["plugin", "numpy_clone_backend", "unavailable_backend", "make_primitives"]
