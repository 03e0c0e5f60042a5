"""Errors raised by the core. Each message names the op, the backends involved and the remedy."""
from __future__ import annotations

__all__ = ["PluginError", "MissingKernelError", "BackendMismatchError", "BackendUnavailableError"]


class PluginError(RuntimeError):
    """A plugin could not be loaded or registered something that conflicts."""


class MissingKernelError(NotImplementedError):
    """An op (or primitive) cannot run on a backend: it needs something the backend lacks."""

    def __init__(self, op: str, backend: str, plugins: list[str], needs: str = "a kernel"):
        self.op, self.backend, self.plugins = op, backend, plugins
        super().__init__(
            f"op '{op}' needs {needs}, which backend '{backend}' does not provide. Loaded plugins: "
            f"{', '.join(plugins) or '(none)'}. Install or register a plugin that provides "
            f"'{op}' for '{backend}', or move the tensors to a backend that has it with .to(...)."
        )


class BackendMismatchError(RuntimeError):
    def __init__(self, op: str, a: str, b: str):
        super().__init__(
            f"{op}: expected all tensors to be on the same backend, but found tensors on "
            f"'{a}' and '{b}'. Move one of them with .to('{a}') or .to('{b}')."
        )


class BackendUnavailableError(RuntimeError):
    pass
