"""Plugin discovery and loading (pluggy), and the process-wide registry it fills.

Discovery order: the core's own op definitions, then entry points in the
``plugtorch`` group (unless ``PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD=1``; only the ones named
in ``PLUGTORCH_PLUGINS_ALLOW=a,b`` when that is set), then the modules named in
``PLUGTORCH_PLUGINS``, then the ``plugtorch.library`` libraries declared so far.
``register_plugin`` adds more at run time, and ``unregister_plugin`` takes one out again.

An installed plugin that fails — its import raises, or its hook does — is isolated:
what it registered is rolled back, the others load, one warning names it, and
``plugtorch.plugins()`` / ``plugtorch plugins`` show its traceback. A plugin the user
named explicitly (``PLUGTORCH_PLUGINS``, ``register_plugin``) raises instead.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
import traceback
import warnings
from dataclasses import dataclass

import pluggy

from .errors import PluginError
from .hookspecs import CONTRACT_VERSION, PROJECT_NAME, PlugtorchSpec
from .optable import TABLE
from .registry import CORE_PLUGIN, Registry

__all__ = ["get_registry", "get_plugin_manager", "register_plugin", "unregister_plugin", "list_plugins",
           "PluginRecord", "plugin_records"]

_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_registry: Registry | None = None
_building = False
_registering_now = None  # the library register_library is adding (not _build's to add)
_records: dict[str, PluginRecord] = {}


@dataclass
class PluginRecord:
    """Where a plugin came from and how its loading went (what ``plugtorch plugins`` shows)."""

    name: str
    source: str                       # "core", "entry point", "PLUGTORCH_PLUGINS", "register_plugin", "library"
    status: str = "loaded"            # "loaded", "failed", or "not allowed" (PLUGTORCH_PLUGINS_ALLOW)
    module: str | None = None
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None    # "name = module" as the package declares it
    contract: int | None = None
    error: str | None = None          # the traceback, when it failed


def plugin_records() -> dict[str, PluginRecord]:
    """Every plugin plugtorch found, loaded or not, by name."""
    get_registry()
    return dict(_records)


def _check_contract(plugin, name: str) -> None:
    declared = getattr(plugin, "PLUGTORCH_CONTRACT", None)
    if declared is None:
        raise PluginError(
            f"plugin '{name}' does not declare PLUGTORCH_CONTRACT; set PLUGTORCH_CONTRACT = "
            f"{CONTRACT_VERSION} in it if it was written for plugtorch's plugin contract {CONTRACT_VERSION}."
        )
    if declared != CONTRACT_VERSION:
        raise PluginError(
            f"plugin '{name}' was written for plugin contract {declared}, but this plugtorch "
            f"implements contract {CONTRACT_VERSION}. Upgrade the plugin (or plugtorch) so they "
            f"match, or uninstall the plugin."
        )


def _register_into(registry: Registry, pm: pluggy.PluginManager, plugin) -> None:
    name = pm.get_name(plugin)
    assert name is not None, "the plugin manager names every plugin it holds"
    _check_contract(plugin, name)
    # Each implementation is called on its own so the registrar knows which plugin is
    # writing; conflict errors can then name both plugins. This runs once per plugin.
    for impl in pm.hook.plugtorch_register.get_hookimpls():
        if impl.plugin is plugin:
            impl.function(registrar=registry.registrar(name))


def _allowed() -> set[str] | None:
    raw = os.environ.get("PLUGTORCH_PLUGINS_ALLOW")
    return None if raw is None else {n.strip() for n in raw.split(",") if n.strip()}


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Import each installed plugin on its own, so one that fails cannot stop the others."""
    allowed = _allowed()
    for ep in importlib.metadata.entry_points(group=PROJECT_NAME):
        dist = getattr(ep, "dist", None)
        record = PluginRecord(ep.name, "entry point", module=ep.value,
                              distribution=dist.name if dist is not None else None,
                              version=dist.version if dist is not None else None,
                              entry_point=f"{ep.name} = {ep.value}")
        if pm.has_plugin(ep.name) or ep.name in _records:
            continue  # the same entry point seen twice (an editable install beside a wheel)
        _records[ep.name] = record
        if allowed is not None and ep.name not in allowed and record.distribution not in allowed:
            record.status = "not allowed"
            continue
        try:
            plugin = ep.load()
        except Exception:
            record.status, record.error = "failed", traceback.format_exc()
            continue
        record.contract = getattr(plugin, "PLUGTORCH_CONTRACT", None)
        if pm.is_registered(plugin):
            continue
        pm.register(plugin, name=ep.name)


def _register_isolated(registry: Registry, pm: pluggy.PluginManager, name: str, plugin) -> None:
    try:
        _register_into(registry, pm, plugin)
    except Exception:
        if name == CORE_PLUGIN:
            raise
        if name in registry.plugins:
            registry.remove_plugin(name)
        pm.unregister(plugin)
        record = _records.setdefault(name, PluginRecord(name, "entry point"))
        record.status, record.error = "failed", traceback.format_exc()


def _build() -> Registry:
    from . import ops_registry  # the core's own op definitions

    global _pm, _building
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(PlugtorchSpec)
    TABLE.clear()  # the op table is the registry's: a new registry starts it afresh
    _records.clear()
    registry = Registry()
    _building = True
    try:
        pm.register(ops_registry, name=CORE_PLUGIN)
        _records[CORE_PLUGIN] = PluginRecord(CORE_PLUGIN, "core", module=ops_registry.__name__,
                                             distribution="plugtorch", version=_version("plugtorch"),
                                             contract=CONTRACT_VERSION)
        if os.environ.get("PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD", "") not in ("1", "true", "True"):
            _load_entry_points(pm)
        explicit = set()
        for modname in filter(None, (m.strip() for m in os.environ.get("PLUGTORCH_PLUGINS", "").split(","))):
            if pm.has_plugin(modname):
                continue
            try:
                module = importlib.import_module(modname)
            except ImportError as e:
                raise PluginError(f"PLUGTORCH_PLUGINS names '{modname}', which cannot be imported: {e}") from e
            pm.register(module, name=modname)
            explicit.add(modname)
            _records[modname] = PluginRecord(modname, "PLUGTORCH_PLUGINS", module=modname,
                                             contract=getattr(module, "PLUGTORCH_CONTRACT", None))
        # In registration order: the core's ops first, so plugins can add kernels for them.
        for name, plugin in pm.list_name_plugin():
            if plugin is None:
                continue
            if name in explicit or name == CORE_PLUGIN:
                _register_into(registry, pm, plugin)  # asked for by name: its failure is the user's error
            else:
                _register_isolated(registry, pm, name, plugin)
        _pm = pm
        for lib in _declared_libraries():  # declared before, or while the plugins were imported
            if lib is _registering_now:
                continue  # register_library registers it itself, so its errors reach the caller
            lib._registrar = None
            _add_library(registry, pm, lib, isolated=True)
    finally:
        _building = False
    failed = [r for r in _records.values() if r.status == "failed"]
    if failed:
        warnings.warn(
            "plugtorch: these plugins failed to load and were left out: "
            + "; ".join(f"{r.name} ({r.error.strip().splitlines()[-1] if r.error else 'unknown error'})"
                        for r in failed)
            + ". `plugtorch plugins` shows the tracebacks; PLUGTORCH_PLUGINS_ALLOW=... chooses which load.",
            RuntimeWarning, stacklevel=4)
    return registry


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _add_library(registry: Registry, pm: pluggy.PluginManager, lib, isolated: bool) -> None:
    name = lib.namespace
    if pm.is_registered(lib):
        return
    pm.register(lib, name=name)
    _records[name] = PluginRecord(name, "library", module=lib.module, contract=lib.PLUGTORCH_CONTRACT)
    if isolated:
        _register_isolated(registry, pm, name, lib)
        return
    try:
        _register_into(registry, pm, lib)
    except Exception:
        if name in registry.plugins:
            registry.remove_plugin(name)
        pm.unregister(lib)
        del _records[name]
        raise


def _declared_libraries() -> list:
    import sys
    library = sys.modules.get("plugtorch.library")
    return list(library._LIBRARIES.values()) if library is not None else []


def register_library(lib) -> None:
    """Register a ``plugtorch.library.Library`` now: its errors are the caller's. A library
    declared while an installed plugin is imported waits for the plugins to be loaded, and
    is registered (isolated, like that plugin) right after."""
    global _registering_now
    with _lock:
        if _building:
            return  # _build registers every declared library once the plugins are in
        _registering_now = lib
        try:
            registry = get_registry()  # builds it if need be (the other libraries join then)
        finally:
            _registering_now = None
        pm = get_plugin_manager()
        if not pm.is_registered(lib):
            _add_library(registry, pm, lib, isolated=False)


def get_registry() -> Registry:
    global _registry
    reg = _registry
    if reg is None:
        with _lock:
            if _building:
                raise PluginError(
                    "a plugin used plugtorch (made a tensor, looked up a backend) while it was being "
                    "imported; register through the plugtorch_register hook or plugtorch.library, and "
                    "compute in functions called later")
            if _registry is None:
                _registry = _build()
            reg = _registry
    return reg


def get_plugin_manager() -> pluggy.PluginManager:
    get_registry()
    assert _pm is not None, "get_registry() builds the plugin manager"
    return _pm


def register_plugin(plugin, name: str | None = None) -> str:
    """Register a plugin object (module or instance) at run time; returns its name.

    A plugin whose hook raises leaves nothing behind: what it registered before the error
    is undone, so the registry stays as it was.
    """
    with _lock:
        registry = get_registry()
        pm = get_plugin_manager()
        registered = pm.register(plugin, name=name)
        if registered is None:
            raise PluginError(f"plugin {plugin!r} is already registered")
        try:
            _register_into(registry, pm, plugin)
        except Exception:
            if registered in registry.plugins:
                registry.remove_plugin(registered)
            pm.unregister(plugin)
            raise
        _records[registered] = PluginRecord(registered, "register_plugin",
                                            module=getattr(plugin, "__name__", type(plugin).__name__),
                                            contract=getattr(plugin, "PLUGTORCH_CONTRACT", None))
        return registered


def unregister_plugin(name: str) -> None:
    """Undo what plugin ``name`` registered (see :meth:`Registry.remove_plugin`) and forget it,
    so it can be registered again."""
    with _lock:
        get_registry().remove_plugin(name)
        pm = get_plugin_manager()
        if pm.has_plugin(name):
            plugin = pm.get_plugin(name)
            pm.unregister(name=name)
            if plugin is not None and getattr(plugin, "_registrar", None) is not None:
                plugin._registrar = None  # a library can register again
        _records.pop(name, None)


def list_plugins() -> list[str]:
    return get_registry().plugin_names()
