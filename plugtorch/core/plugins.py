"""Plugin discovery and loading (pluggy), and the process-wide registry it fills.

Discovery order: the core's own op definitions, then entry points in the
``plugtorch`` group (unless ``PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD=1``), then the
modules named in ``PLUGTORCH_PLUGINS``. ``register_plugin`` adds more at run time, and
``unregister_plugin`` takes one out again.
"""
from __future__ import annotations

import importlib
import os
import threading

import pluggy

from .errors import PluginError
from .hookspecs import CONTRACT_VERSION, PROJECT_NAME, PlugtorchSpec
from .optable import TABLE
from .registry import CORE_PLUGIN, Registry

__all__ = ["get_registry", "get_plugin_manager", "register_plugin", "unregister_plugin", "list_plugins"]

_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_registry: Registry | None = None


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


def _build() -> Registry:
    from . import ops_registry  # the core's own op definitions

    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(PlugtorchSpec)
    TABLE.clear()  # the op table is the registry's: a new registry starts it afresh
    registry = Registry()
    pm.register(ops_registry, name=CORE_PLUGIN)
    if os.environ.get("PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD", "") not in ("1", "true", "True"):
        pm.load_setuptools_entrypoints(PROJECT_NAME)
    for modname in filter(None, (m.strip() for m in os.environ.get("PLUGTORCH_PLUGINS", "").split(","))):
        if pm.has_plugin(modname):
            continue
        try:
            module = importlib.import_module(modname)
        except ImportError as e:
            raise PluginError(f"PLUGTORCH_PLUGINS names '{modname}', which cannot be imported: {e}") from e
        pm.register(module, name=modname)
    # In registration order: the core's ops first, so plugins can add kernels for them.
    for _, plugin in pm.list_name_plugin():
        if plugin is not None:
            _register_into(registry, pm, plugin)
    global _pm
    _pm = pm
    return registry


def get_registry() -> Registry:
    global _registry
    reg = _registry
    if reg is None:
        with _lock:
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
        return registered


def unregister_plugin(name: str) -> None:
    """Undo what plugin ``name`` registered (see :meth:`Registry.remove_plugin`) and forget it,
    so it can be registered again."""
    with _lock:
        get_registry().remove_plugin(name)
        pm = get_plugin_manager()
        if pm.has_plugin(name):
            pm.unregister(name=name)


def list_plugins() -> list[str]:
    return get_registry().plugin_names()
