"""What a backend is: a table of primitives plus a little metadata."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from .errors import MissingKernelError

__all__ = ["Backend", "PrimitiveTable"]


class PrimitiveTable(dict):
    """primitive name -> function for one backend. A miss raises a readable error, never a KeyError."""

    __slots__ = ("backend_name", "registry")

    def __init__(self, primitives: Mapping[str, Callable], backend_name: str, registry):
        super().__init__(primitives)
        self.backend_name = backend_name
        self.registry = registry

    def __missing__(self, name: str):
        raise MissingKernelError(name, self.backend_name, self.registry.plugin_names(),
                                 f"the primitive '{name}'")


class Backend:
    """A compute backend, as a plugin declares it.

    name:        the key users pass to ``plugtorch.use`` and ``device=`` ("numpy").
    primitives:  primitive name -> function on native arrays (see ``core.primitives``).
    dtype_of:    native array -> plugtorch dtype.
    is_native:   obj -> bool, whether ``obj`` is one of this backend's arrays.
    aliases:     other names for it (the NumPy backend answers to "cpu").
    available:   False when it cannot run here; ``unavailable_reason`` then says why.
    device_index: native array -> device ordinal, or None for a single-device backend.
    array_module: the array namespace (``numpy``, ``cupy``), for plugins that want it.
    host_memory: whether its arrays live in host memory, so reading their values costs no
                 device synchronisation. Checks that need tensor values (label ranges,
                 embedding indices) run on such backends always, on others only in debug
                 mode (``plugtorch.set_debug``).
    accelerator: the kind of device it computes on when that is an accelerator ("cuda",
                 "mps", "xpu", ...), None for the host CPU. ``plugtorch.accelerator``,
                 ``plugtorch.cuda`` and ``plugtorch.backends`` answer from it.
    device_count: () -> how many devices of that kind it can use (1 when not given).

    ``kernels`` is filled by the registry: op name -> the function that computes the op
    here (a registered kernel, or the primitive the op's definition maps to).
    """

    def __init__(
        self,
        name: str,
        primitives: Mapping[str, Callable],
        dtype_of: Callable[[Any], Any],
        is_native: Callable[[Any], bool],
        *,
        aliases: tuple[str, ...] = (),
        available: bool = True,
        unavailable_reason: str = "",
        device_index: Callable[[Any], int | None] | None = None,
        array_module: Any = None,
        host_memory: bool = True,
        accelerator: str | None = None,
        device_count: Callable[[], int] | None = None,
    ):
        self.name = name
        self.primitives: dict[str, Callable] = dict(primitives)
        self.dtype_of = dtype_of
        self.is_native = is_native
        self.aliases = tuple(aliases)
        self.available = available
        self.unavailable_reason = unavailable_reason
        self.device_index = device_index
        self.array_module = array_module
        self.host_memory = host_memory
        self.accelerator = accelerator
        self.device_count = device_count
        self.plugin: str | None = None  # set by the registry: the plugin that registered it
        self.kernels: dict[str, Callable] = {}  # filled by the registry

    def __repr__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.unavailable_reason}"
        return f"<plugtorch backend {self.name!r} ({state}) from plugin {self.plugin!r}>"
