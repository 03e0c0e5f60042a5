"""The plugin contract: the one pluggy hook every plugtorch plugin implements.

A plugin is any object (usually a module) that

* declares ``PLUGTORCH_CONTRACT = 1`` (the contract version it was written for;
  a plugin written for another version is refused with a message saying what
  to do), and
* implements the hook below, decorated with :data:`hookimpl`.

Plugins are found through the ``plugtorch`` entry-point group, through the
``PLUGTORCH_PLUGINS`` environment variable (comma-separated module names), or
registered at run time with :func:`plugtorch.register_plugin`. The built-in
NumPy and MPI plugins use exactly this mechanism.

Example — a third-party backend::

    import plugtorch
    from plugtorch.core.hookspecs import hookimpl
    from plugtorch.core.backend import Backend

    PLUGTORCH_CONTRACT = 1

    @hookimpl
    def plugtorch_register(registrar):
        registrar.add_backend(Backend(name="mybackend", primitives={...}, dtype_of=...))
        registrar.add_kernel("softmax", "mybackend", my_fused_softmax)

The hook runs once per plugin when the registry is built; dispatch afterwards
is a plain dict lookup, never a hook call.
"""
from __future__ import annotations

import pluggy

__all__ = ["CONTRACT_VERSION", "PROJECT_NAME", "hookimpl", "hookspec", "PlugtorchSpec"]

PROJECT_NAME = "plugtorch"
CONTRACT_VERSION = 1

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class PlugtorchSpec:
    """Hook specifications (the namespace pluggy reads them from)."""

    @hookspec
    def plugtorch_register(self, registrar) -> None:
        """Add this plugin's backends, op definitions, kernels and services.

        ``registrar`` is a :class:`plugtorch.core.registry.Registrar` bound to the
        calling plugin, offering ``add_backend``, ``add_op`` (an :class:`OpDef`),
        ``add_kernel`` and ``add_service``. Conflicting registrations raise an error
        naming both plugins unless the later one passes ``override=True``; a
        registration that could never take effect (a kernel for an unknown op, for a
        primitive, for a view) is refused with the reason.
        """
