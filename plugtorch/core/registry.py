"""The registry: backends, op definitions, kernels and services, filled by plugins.

Plugins write into it once, at start-up (or when registered at run time);
afterwards dispatch reads plain dicts: ``backend.kernels[op_name]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .backend import Backend, KernelTable
from .errors import PluginError
from .hookspecs import CONTRACT_VERSION
from .primitives import PRIMITIVE_NAMES


@dataclass
class OpDef:
    """An op's definition, independent of any backend.

    name:       the op's public name.
    decompose:  the op written with other plugtorch ops (composite ops); it is what
                runs when the backend has no kernel of its own for this op.
    derivative: ``rule(ctx, grad) -> tuple of input grads`` written with plugtorch ops;
                needed for primitives, and for composites so that a backend's fused
                kernel stays differentiable. ``None`` for non-differentiable ops.
    save:       what the derivative reads: any of "inputs", "output".
    plugin:     the plugin that defined it (set by the registry).
    """

    name: str
    decompose: Callable | None = None
    derivative: Callable | None = None
    save: tuple[str, ...] = ()
    doc: str = ""
    plugin: str | None = None
    samples: Callable | None = None  # sample inputs for the conformance kit


@dataclass
class _Kernel:
    fn: Callable
    plugin: str


@dataclass
class Registry:
    backends: dict[str, Backend] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    ops: dict[str, OpDef] = field(default_factory=dict)
    kernels: dict[tuple[str, str], _Kernel] = field(default_factory=dict)
    services: dict[str, tuple[Any, str]] = field(default_factory=dict)
    plugins: list[str] = field(default_factory=list)

    def plugin_names(self) -> list[str]:
        return list(self.plugins)

    def registrar(self, plugin_name: str) -> "Registrar":
        if plugin_name not in self.plugins:
            self.plugins.append(plugin_name)
        return Registrar(self, plugin_name)

    # -- lookups -----------------------------------------------------------
    def resolve_name(self, name: str) -> str:
        return self.aliases.get(name, name)

    def kernel_owner(self, op: str, backend: str) -> str | None:
        k = self.kernels.get((op, backend))
        return k.plugin if k else None

    def service(self, name: str, default=None):
        entry = self.services.get(name)
        return entry[0] if entry else default

    def _rebuild_table(self, backend: Backend) -> None:
        table = KernelTable(backend.name, self)
        for (op, bname), k in self.kernels.items():
            if bname == backend.name:
                table[op] = k.fn
        if backend.kernels is None:
            backend.kernels = table
        else:  # keep the same dict object: tensors already hold the backend
            backend.kernels.clear()
            backend.kernels.update(table)


class Registrar:
    """What a plugin's ``plugtorch_register`` hook receives: the registry, bound to that plugin."""

    def __init__(self, registry: Registry, plugin_name: str):
        self._r = registry
        self.plugin_name = plugin_name

    def add_backend(self, backend: Backend, *, override: bool = False) -> None:
        r = self._r
        old = r.backends.get(backend.name)
        if old is not None and not override:
            raise PluginError(
                f"backend '{backend.name}' is registered by both plugin '{old.plugin}' and plugin "
                f"'{self.plugin_name}'. Uninstall one, or pass override=True in '{self.plugin_name}'."
            )
        unknown = set(backend.primitives) - PRIMITIVE_NAMES
        if unknown:
            raise PluginError(
                f"plugin '{self.plugin_name}': backend '{backend.name}' lists {sorted(unknown)}, which "
                f"are not primitives of contract {CONTRACT_VERSION}. "
                "Register fused kernels for composite ops with registrar.add_kernel(op, backend, fn)."
            )
        backend.plugin = self.plugin_name
        r.backends[backend.name] = backend
        for alias in backend.aliases:
            r.aliases[alias] = backend.name
        for prim, fn in backend.primitives.items():
            self._put_kernel(prim, backend.name, fn, override=True if old is not None else override)
        r._rebuild_table(backend)

    def add_op(self, op: OpDef, *, override: bool = False) -> None:
        old = self._r.ops.get(op.name)
        if old is not None and not override:
            raise PluginError(
                f"op '{op.name}' is defined by both plugin '{old.plugin}' and plugin "
                f"'{self.plugin_name}'. Rename one, or pass override=True in '{self.plugin_name}'."
            )
        op.plugin = self.plugin_name
        self._r.ops[op.name] = op

    def add_kernel(self, op: str, backend: str, fn: Callable, *, override: bool = False) -> None:
        """A kernel for ``op`` on ``backend``; for a composite op, dispatch prefers it to the decomposition."""
        self._put_kernel(op, backend, fn, override)
        b = self._r.backends.get(backend)
        if b is not None:
            self._r._rebuild_table(b)

    def add_service(self, name: str, obj: Any, *, override: bool = False) -> None:
        """A named service such as ``"distributed.process_group"`` (used by the MPI plugin)."""
        old = self._r.services.get(name)
        if old is not None and not override:
            raise PluginError(
                f"service '{name}' is provided by both plugin '{old[1]}' and plugin '{self.plugin_name}'. "
                f"Uninstall one, or pass override=True in '{self.plugin_name}'."
            )
        self._r.services[name] = (obj, self.plugin_name)

    def _put_kernel(self, op: str, backend: str, fn: Callable, override: bool) -> None:
        old = self._r.kernels.get((op, backend))
        if old is not None and not override and old.plugin != self.plugin_name:
            raise PluginError(
                f"kernel for op '{op}' on backend '{backend}' is registered by both plugin "
                f"'{old.plugin}' and plugin '{self.plugin_name}'. Uninstall one, or pass "
                f"override=True in '{self.plugin_name}' to replace it."
            )
        self._r.kernels[(op, backend)] = _Kernel(fn, self.plugin_name)
