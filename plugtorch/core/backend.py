"""What a backend is: a table of primitives plus a little metadata."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
    synchronize: () -> None, waits until the work queued on the device is done (None for a
                 backend that computes synchronously). Called before handing its memory to
                 code that does not queue behind it (device-direct MPI) and by
                 ``plugtorch.cuda.synchronize()``.
    out_variants: optional primitive name -> ``fn(*arrays, out=buffer)`` for elementwise
                 primitives that can write their result into a given array of its shape and
                 dtype (NumPy's and CuPy's ufuncs; called as a primitive, without a buffer,
                 each returns a new array). ``plugtorch.compile`` uses them to run a
                 replayed chain of elementwise calls in a temporary that is dead anyway,
                 instead of allocating each result, and in-place methods with no graph to
                 keep (``p.add_(t)``) to write into the tensor's own memory. Given a buffer
                 the result does not fit (an operand that broadcasts past it), one raises
                 ValueError before writing anything, as ufuncs do; the in-place method then
                 takes its general path, which raises the op's error. A backend without them
                 replays as recorded and computes in-place ops out of place, then copies.
    elementwise_fuser: optional object with ``fusable(name, operands, result_dtype)`` (a dtype
                 name per array operand, ``("const", value)`` per number; dtype names as
                 NumPy spells them) and ``build(chain) -> fn or None``: ``plugtorch.compile``
                 asks it, link by link, and hands it each chain of
                 consecutive elementwise primitive calls in a captured trace
                 (``plugtorch.compiler.fusion.Chain``) and replays ``fn`` (one kernel) instead.
    probe:       optional ``probe(backend) -> reason or None``, run once on the first question
                 about availability (not at registration), for backends whose check is costly
                 (importing CuPy, asking the driver). A probe that finds the backend usable
                 fills ``backend.primitives`` (and any other attribute) and returns None; the
                 registry then rebuilds the backend's dispatch table. A returned string is the
                 unavailable reason. Until it runs, registration costs nothing.

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
        synchronize: Callable[[], None] | None = None,
        probe: Callable[[Backend], str | None] | None = None,
        out_variants: Mapping[str, Callable] | None = None,
        elementwise_fuser: Any = None,
    ):
        self.name = name
        self.primitives: dict[str, Callable] = dict(primitives)
        self.dtype_of = dtype_of
        self.is_native = is_native
        self.aliases = tuple(aliases)
        self._available = available
        self._unavailable_reason = unavailable_reason
        self._probe = probe if available else None
        self.on_probed: Callable[[Backend], None] | None = None  # set by the registry
        self.device_index = device_index
        self.array_module = array_module
        self.host_memory = host_memory
        self.accelerator = accelerator
        self.device_count = device_count
        self.synchronize = synchronize
        self.out_variants: dict[str, Callable] = dict(out_variants or {})
        self.elementwise_fuser = elementwise_fuser
        self.plugin: str | None = None  # set by the registry: the plugin that registered it
        self.kernels: dict[str, Callable] = {}  # filled by the registry

    def _run_probe(self) -> None:
        probe, self._probe = self._probe, None  # once, even if it raises
        if probe is None:
            return
        try:
            reason = probe(self)
        except Exception as e:  # a probe that breaks makes the backend unavailable, saying how
            reason = f"its availability probe failed: {type(e).__name__}: {e}"
        if reason:
            self._available, self._unavailable_reason = False, reason
        elif self.on_probed is not None:
            self.on_probed(self)

    @property
    def probed(self) -> bool:
        """Whether availability is known without running the probe (so asking costs nothing)."""
        return self._probe is None

    @property
    def available(self) -> bool:
        if self._probe is not None:
            self._run_probe()
        return self._available

    @available.setter
    def available(self, value: bool) -> None:
        self._available = bool(value)

    @property
    def unavailable_reason(self) -> str:
        if self._probe is not None:
            self._run_probe()
        return self._unavailable_reason

    @unavailable_reason.setter
    def unavailable_reason(self, value: str) -> None:
        self._unavailable_reason = value

    def __repr__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.unavailable_reason}"
        return f"<plugtorch backend {self.name!r} ({state}) from plugin {self.plugin!r}>"
