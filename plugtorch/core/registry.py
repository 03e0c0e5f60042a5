"""The registry: backends, op definitions, kernels and services, filled by plugins.

Plugins write into it once, at start-up (or when registered at run time). From what
they wrote, the registry keeps two plain dicts that dispatch reads:

* ``optable.TABLE``: op name -> current definition (:class:`OpDef`);
* ``backend.kernels`` per backend: op name -> the function that computes the op on
  that backend's arrays — a kernel a plugin registered for it, or else the primitive
  (or lowering to primitives) the definition names. An op with no entry runs its
  decomposition.

Whatever a plugin registers is used, or refused at once with the reason:

* an op defined twice is an error naming both plugins, unless the later one passes
  ``override=True``; an override replaces how the op computes and differentiates and
  keeps its signature. Kernels other plugins registered for the op implement the
  definition it replaced, so from then on only the overriding plugin's kernels serve it;
* a kernel must name a defined op that can take one (not a primitive, a view or an
  op with several outputs).

Every registration is also kept, per key, in registration order (``history``), so
:meth:`Registry.remove_plugin` can undo one plugin's registrations and bring back
what they replaced.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .backend import Backend, PrimitiveTable
from .errors import PluginError
from .hookspecs import CONTRACT_VERSION
from .opdef import OpDef, inherit
from .optable import TABLE
from .primitives import PRIMITIVE_NAMES

CORE_PLUGIN = "plugtorch.core"

__all__ = ["OpDef", "Registry", "Registrar", "CORE_PLUGIN"]


@dataclass
class _Kernel:
    fn: Callable
    plugin: str


@dataclass
class Registry:
    backends: dict[str, Backend] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    ops: dict[str, OpDef] = field(default_factory=lambda: TABLE)
    kernels: dict[tuple[str, str], _Kernel] = field(default_factory=dict)
    services: dict[str, tuple[Any, str]] = field(default_factory=dict)
    plugins: list[str] = field(default_factory=list)
    overridden: dict[str, OpDef] = field(default_factory=dict)  # op name -> the definition replaced
    # (kind, key) -> [(plugin, what it registered), ...] in registration order; the last is in force
    history: dict[tuple[str, Any], list[tuple[str, Any]]] = field(default_factory=dict)

    def plugin_names(self) -> list[str]:
        return list(self.plugins)

    def registrar(self, plugin_name: str) -> Registrar:
        if plugin_name not in self.plugins:
            self.plugins.append(plugin_name)
        return Registrar(self, plugin_name)

    # -- lookups -----------------------------------------------------------
    def resolve_name(self, name: str) -> str:
        return self.aliases.get(name, name)

    def kernel_owner(self, op: str, backend: str) -> str | None:
        k = self.kernels.get((op, backend))
        return k.plugin if k else None

    def kernel_is_active(self, op: str, backend: str) -> bool:
        """Whether a registered kernel serves its op (see the module docstring)."""
        k = self.kernels.get((op, backend))
        d = self.ops.get(op)
        if k is None or d is None:
            return False
        return op not in self.overridden or k.plugin == d.plugin

    def service(self, name: str, default=None):
        entry = self.services.get(name)
        return entry[0] if entry else default

    # -- undoing a plugin --------------------------------------------------
    def _log(self, kind: str, key, plugin: str, value, replaced) -> None:
        # nothing in force before: whatever history remains was removed by other means
        if replaced is None:
            self.history[(kind, key)] = [(plugin, value)]
        else:
            self.history.setdefault((kind, key), []).append((plugin, value))

    def remove_plugin(self, name: str) -> None:
        """Undo everything plugin ``name`` registered: its op definitions, kernels, backends and
        services. What they replaced comes back (an op it overrode gets back the definition in
        force before, other plugins' kernels serve that op again), and the dispatch tables of
        the remaining backends are rebuilt. A backend it registered loses its kernels: tensors
        still on it keep their arrays, but ops on them raise MissingKernelError.
        """
        if name == CORE_PLUGIN:
            raise PluginError(f"plugin '{CORE_PLUGIN}' defines the core ops and cannot be removed")
        if name not in self.plugins:
            raise PluginError(f"no plugin named '{name}' is registered; registered plugins: "
                              f"{', '.join(self.plugins) or '(none)'}")
        tables: dict[str, dict[Any, Any]] = {"op": self.ops, "kernel": self.kernels,
                                             "backend": self.backends, "service": self.services}
        before = list(self.backends.values())
        for (kind, key), entries in list(self.history.items()):
            kept = [e for e in entries if e[0] != name]
            if len(kept) == len(entries):
                continue
            if kept:
                self.history[(kind, key)] = kept
                tables[kind][key] = kept[-1][1]
            else:
                del self.history[(kind, key)]
                tables[kind].pop(key, None)
            if kind == "op":
                if kept and kept[-1][0] != kept[0][0]:  # in force: another plugin's than the first
                    self.overridden[key] = kept[0][1]
                else:
                    self.overridden.pop(key, None)
        self.plugins.remove(name)
        for b in before:
            if self.backends.get(b.name) is not b:
                b.kernels.clear()
        self.aliases.clear()
        for b in self.backends.values():
            self.aliases.update((alias, b.name) for alias in b.aliases)
            self._rebuild(b)

    # -- the per-backend dispatch tables ------------------------------------
    def _entry(self, op: str, backend: Backend):
        """What computes ``op`` on ``backend``: its kernel, the mapped primitive, a lowering, or None."""
        if self.kernel_is_active(op, backend.name):
            return self.kernels[(op, backend.name)].fn
        d = self.ops[op]
        if d.primitive is not None:
            return backend.primitives.get(d.primitive)
        if d.lower is not None:
            return functools.partial(d.lower, backend)
        return None

    def _refresh(self, op: str, backend: Backend | None = None) -> None:
        for b in ([backend] if backend is not None else self.backends.values()):
            fn = self._entry(op, b) if op in self.ops else None
            if fn is None:
                b.kernels.pop(op, None)
            else:
                b.kernels[op] = fn

    def _rebuild(self, backend: Backend) -> None:
        backend.kernels.clear()  # the same dict object: tensors already hold the backend
        for op in self.ops:
            self._refresh(op, backend)


def _probed(registry: Registry, plugin_name: str, backend: Backend) -> None:
    """A lazily probed backend turned out usable: check what its probe filled in, then dispatch to it."""
    if registry.backends.get(backend.name) is not backend:
        return  # replaced or removed meanwhile
    unknown = set(backend.primitives) - PRIMITIVE_NAMES
    if unknown:
        backend.available = False
        backend.unavailable_reason = (f"plugin '{plugin_name}': its probe added {sorted(unknown)}, which are not "
                                      f"primitives of contract {CONTRACT_VERSION}")
        return
    if not isinstance(backend.primitives, PrimitiveTable):
        backend.primitives = PrimitiveTable(backend.primitives, backend.name, registry)
    registry._rebuild(backend)


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
        backend.primitives = PrimitiveTable(backend.primitives, backend.name, r)
        backend.on_probed = functools.partial(_probed, r, self.plugin_name)
        r.backends[backend.name] = backend
        r._log("backend", backend.name, self.plugin_name, backend, old)
        for alias in backend.aliases:
            r.aliases[alias] = backend.name
        r._rebuild(backend)

    def add_op(self, op: OpDef, *, override: bool = False) -> None:
        r = self._r
        old = r.ops.get(op.name)
        if old is not None:
            if not override:
                raise PluginError(
                    f"op '{op.name}' is defined by both plugin '{old.plugin}' and plugin "
                    f"'{self.plugin_name}'. Rename one, or pass override=True in '{self.plugin_name}'."
                )
            if op.function is not None and op.function is not old.function:
                raise PluginError(
                    f"plugin '{self.plugin_name}': an override of op '{op.name}' replaces how it "
                    "computes and differentiates, and keeps its signature and public function; "
                    "leave OpDef.function unset, or define an op under a new name."
                )
            if old.rule is not None and op.rule is None:
                raise PluginError(
                    f"plugin '{self.plugin_name}': the override of op '{op.name}' has no derivative and no "
                    "decomposition, so gradients through it would be lost; give OpDef a derivative (or a "
                    "decompose written with differentiable ops)."
                )
            op = inherit(op, old)
        if op.primitive is not None and op.primitive not in PRIMITIVE_NAMES:
            raise PluginError(f"plugin '{self.plugin_name}': op '{op.name}' maps to '{op.primitive}', "
                              f"which is not a primitive of contract {CONTRACT_VERSION}")
        if op.plugin != self.plugin_name:  # the registered definition names its plugin
            op = replace(op, plugin=self.plugin_name)
        if old is not None and old.plugin != self.plugin_name:  # an owner updating its op is no override
            r.overridden.setdefault(op.name, old)
        r.ops[op.name] = op
        r._log("op", op.name, self.plugin_name, op, old)
        r._refresh(op.name)

    def add_kernel(self, op: str, backend: str, fn: Callable, *, override: bool = False) -> None:
        """``fn`` computes ``op`` on ``backend``'s arrays; dispatch prefers it to the op's definition.

        It is called with the op's operands as native arrays (positionally) and its
        attrs by keyword, as the op's ``OpDef`` documents.
        """
        r = self._r
        d = r.ops.get(op)
        if d is None:
            if op in PRIMITIVE_NAMES:
                raise PluginError(
                    f"plugin '{self.plugin_name}': '{op}' is a primitive of the backend contract, "
                    "not an op; a backend provides its primitives through add_backend(Backend(...)).")
            raise PluginError(
                f"plugin '{self.plugin_name}': no op named '{op}' is defined, so a kernel for it "
                "would never run. Define it first (registrar.add_op(OpDef(...))), or check the name "
                "against plugtorch.get_registry().ops.")
        if d.kernel_refusal:
            raise PluginError(f"plugin '{self.plugin_name}': kernel for '{op}' on '{backend}' refused: "
                              f"{d.kernel_refusal}.")
        old = r.kernels.get((op, backend))
        if old is not None and not override and old.plugin != self.plugin_name:
            raise PluginError(
                f"kernel for op '{op}' on backend '{backend}' is registered by both plugin "
                f"'{old.plugin}' and plugin '{self.plugin_name}'. Uninstall one, or pass "
                f"override=True in '{self.plugin_name}' to replace it."
            )
        r.kernels[(op, backend)] = _Kernel(fn, self.plugin_name)
        r._log("kernel", (op, backend), self.plugin_name, r.kernels[(op, backend)], old)
        b = r.backends.get(backend)
        if b is not None:
            r._refresh(op, b)

    def add_service(self, name: str, obj: Any, *, override: bool = False) -> None:
        """A named service such as ``"distributed.process_group"`` (used by the MPI plugin)."""
        old = self._r.services.get(name)
        if old is not None and not override:
            raise PluginError(
                f"service '{name}' is provided by both plugin '{old[1]}' and plugin '{self.plugin_name}'. "
                f"Uninstall one, or pass override=True in '{self.plugin_name}'."
            )
        self._r.services[name] = (obj, self.plugin_name)
        self._r._log("service", name, self.plugin_name, self._r.services[name], old)
