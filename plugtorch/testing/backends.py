"""Derived backends for conformance runs.

``bare_backend("numpy")`` registers ``numpy_bare``: the same primitive table with none
of the plugin's kernels for composite ops, so every composite runs its core
decomposition. Running the suite on both checks the fused kernels *and* the
decompositions a new backend would start from.
"""
from __future__ import annotations

from plugtorch.core.backend import Backend
from plugtorch.core.plugins import get_registry

PLUGIN_NAME = "plugtorch.testing"
SUFFIX = "_bare"


def bare_backend(base: str) -> str:
    """Register (once) and return the name of ``base``'s primitives-only twin."""
    reg = get_registry()
    name = base + SUFFIX
    if name in reg.backends:
        return name
    b = reg.backends[reg.resolve_name(base)]
    twin = Backend(name=name, primitives=b.primitives, dtype_of=b.dtype_of, is_native=b.is_native,
                   available=b.available, unavailable_reason=b.unavailable_reason,
                   device_index=b.device_index, array_module=b.array_module,
                   host_memory=b.host_memory)
    reg.registrar(PLUGIN_NAME).add_backend(twin)
    return name


def remove_backend(name: str) -> None:
    """Undo ``bare_backend``, so later tests see the registry as the plugins left it."""
    reg = get_registry()
    backend = reg.backends.get(name)
    if backend is None or backend.plugin != PLUGIN_NAME:
        raise ValueError(f"backend '{name}' was not registered by {PLUGIN_NAME}; not removing it")
    del reg.backends[name]
    for key in [k for k in reg.kernels if k[1] == name]:
        del reg.kernels[key]
    if not any(b.plugin == PLUGIN_NAME for b in reg.backends.values()) and PLUGIN_NAME in reg.plugins:
        reg.plugins.remove(PLUGIN_NAME)


def conformance_backends(include_bare: bool = True) -> list[str]:
    """Every available backend, plus each one's bare twin (the twins are registered on first use)."""
    reg = get_registry()
    names = [n for n, b in reg.backends.items() if b.available and b.plugin != PLUGIN_NAME]
    return names + ([n + SUFFIX for n in names] if include_bare else [])
