"""The backend contract: everything a backend or op plugin needs from plugtorch, in one module.

The built-in plugins (``plugtorch_backends.numpy_backend``, ``.cupy_backend``, ``.mpi``) are
written against this module alone, as a third-party package would be; what one of them
needs from the core is declared here, or it is a bug.

What a plugin provides
======================

A plugin is a module (or any object) that declares the contract version it was written for
and implements the one hook::

    from plugtorch.backend_api import Backend, hookimpl

    PLUGTORCH_CONTRACT = 1          # a plugtorch implementing another version refuses it, saying so

    @hookimpl
    def plugtorch_register(registrar):
        registrar.add_backend(Backend("mybackend", PRIMITIVE_FUNCTIONS, dtype_of, is_native))
        registrar.add_kernel("softmax", "mybackend", fused_softmax)

It is found through the ``plugtorch`` entry-point group (or ``PLUGTORCH_PLUGINS``, or
``plugtorch.register_plugin``); the hook runs once, and dispatch afterwards reads plain dicts.
Through the :class:`Registrar` it receives, a plugin adds:

* a **backend**: a :class:`Backend`, whose ``primitives`` map each name of :data:`PRIMITIVES`
  (the closed set of forward primitives; the text there states each one's signature, dtypes
  and edge cases) to a :class:`Kernel` on the backend's native arrays. A missing primitive
  makes only the ops that need it fail, with an error naming the op and the backend;
* **kernels** for ops (``add_kernel(op, backend, fn)``): a faster :class:`Kernel` for an op
  the table defines (``conv2d``, ``softmax``, ``adam_step_``...), which dispatch prefers to
  the op's decomposition. The op's derivative still applies, so a backend writes no backward
  code; it may register kernels for the ops a derivative is written with
  (``conv2d_weight_grad``, ``max_pool2d_backward``) to speed up the backward as well;
* **ops** (``add_op(OpDef(...))``): a new op, or with ``override=True`` a new definition of
  one. :mod:`plugtorch.library` (``custom_op``, ``Library.register_kernel``,
  ``define_backend``) declares the same things from annotated Python functions, as
  ``torch.library`` does;
* **services** (``add_service(name, obj)``): ``"distributed.process_group"`` is a provider
  whose ``create()`` returns a :class:`ProcessGroup` (the MPI plugin is one).

Registration conflicts and registrations that could never take effect are refused at once,
with the reason (:class:`PluginError`).

How kernels are called
======================

A primitive or kernel is called with the op's *operands* positionally, as native arrays (a
number or None where the op's signature allows one), and its *attrs* by keyword, already
checked and normalised by the op's public function (axes non-negative, one int per spatial
dim, dtypes promoted). A ``variadic`` op (``cat``, ``stack``, ``einsum``) passes one list of
arrays. The kernel returns one native array, a new one unless the op is in place
(``adam_step_`` writes its state), of the dtype the op's policy gives; it never returns a
host scalar. :class:`Kernel`, :class:`Lowering`, :class:`DerivativeRule` and
:class:`RuleContext` type these conventions.

A kernel that stands in for a decomposition agrees with its output shape and, where the two
must give the same bits, with its batch chunks and product order: :func:`window_count`,
:func:`batch_chunks` and :func:`weight_grad_product` are that arithmetic, shared with the core.
Checks that need array values on the host (index ranges, labels) run on a device backend only
when :func:`is_debug` is true, so no kernel silently synchronises a GPU.

What a plugin may import
========================

* This module: the contract, versioned by :data:`CONTRACT_VERSION`.
* plugtorch's public library: ``plugtorch``, ``plugtorch.library``, ``plugtorch.nn``,
  ``plugtorch.distributed`` and every other module and name outside ``plugtorch.core`` and
  ``plugtorch.testing`` whose name does not begin with an underscore. A name that begins with
  one (``_ops``, ``_chunks``) is private wherever it is, dunders (``__version__``) aside.
* From ``plugtorch.core``, only the modules in :data:`PUBLIC_CORE_MODULES`; the rest of the
  core is the implementation, which changes without notice.
* From ``plugtorch.testing``, the package's own names (the conformance kit: ``Sample``,
  ``count_transfers``...) anywhere; its submodules (``plugtorch.testing.conformance``,
  ``plugtorch.testing.cuda_cpu``...) only in test-support modules: a plugin's tests
  (``test_*.py``, ``conftest.py``, anything under a ``tests`` directory) and modules that
  declare ``PLUGTORCH_TEST_SUPPORT = True`` (:data:`TEST_SUPPORT`): code that exists to test
  a backend, such as the CuPy backend's ``emulation.py``, which runs its CUDA kernels compiled
  for the CPU in CI.

``tests/test_backend_api.py`` holds everything under ``backends/`` and ``examples/`` to
these rules.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from .compiler.fusion import Chain
from .core.backend import Backend
from .core.debug import is_debug
from .core.dtypes import ALL_DTYPES, dtype, dtype_from_name, promote_types
from .core.errors import MissingKernelError, PluginError
from .core.geometry import CHUNK_BYTES, batch_chunks, weight_grad_product, window_count
from .core.hookspecs import CONTRACT_VERSION, PlugtorchSpec, hookimpl
from .core.opdef import OpDef
from .core.primitives import PRIMITIVE_NAMES, PRIMITIVES
from .core.registry import Registrar
from .distributed.process_group import ProcessGroup, ReduceOp, Work

if TYPE_CHECKING:
    from .core.tensor import Tensor

__all__ = [
    # the plugin and its registrations
    "CONTRACT_VERSION", "hookimpl", "PlugtorchSpec", "Registrar", "Backend", "OpDef",
    "PRIMITIVES", "PRIMITIVE_NAMES", "PluginError", "MissingKernelError",
    # the calling conventions
    "NativeArray", "Kernel", "Lowering", "RuleContext", "DerivativeRule", "Gradients",
    "ElementwiseFuser", "Chain",
    # what kernels share with the core
    "dtype", "ALL_DTYPES", "dtype_from_name", "promote_types", "is_debug",
    "window_count", "batch_chunks", "weight_grad_product", "CHUNK_BYTES",
    # services
    "ProcessGroup", "ReduceOp", "Work",
    # the import rules
    "PUBLIC_CORE_MODULES", "TEST_SUPPORT",
]

PUBLIC_CORE_MODULES: tuple[str, ...] = ("plugtorch.core.geometry",)
"""The modules under ``plugtorch.core`` a plugin may import (this module re-exports them)."""

TEST_SUPPORT = "PLUGTORCH_TEST_SUPPORT"
"""The module-level flag (``PLUGTORCH_TEST_SUPPORT = True``) that makes a module test support,
allowed to import ``plugtorch.testing``'s submodules."""

NativeArray = Any
"""A backend's own array (``numpy.ndarray``, ``cupy.ndarray``...): what kernels take and return."""


@runtime_checkable
class Kernel(Protocol):
    """A primitive, or a kernel registered for an op: ``kernel(*operands, **attrs) -> array``.

    Operands are native arrays (numbers or None where the op allows them; one list for a
    variadic op), attrs come by keyword as the op's function normalised them, and the result
    is one native array.
    """

    def __call__(self, *operands: Any, **attrs: Any) -> NativeArray: ...


@runtime_checkable
class Lowering(Protocol):
    """``OpDef.lower``: an op built from one backend's primitives, ``lower(backend, *operands,
    **attrs) -> array``; it reaches them as ``backend.primitives[name]``, so one function
    serves every backend."""

    def __call__(self, backend: Backend, /, *operands: Any, **attrs: Any) -> NativeArray: ...


@runtime_checkable
class RuleContext(Protocol):
    """What a derivative rule receives as ``ctx``: the graph node its op recorded.

    ``saved``: the operands as given (tensors, numbers, None) where the op's ``save`` names
    "inputs", those at the positions it names (None at the others), else None. ``output``:
    the op's output, where ``save`` names "output", else None. ``attrs``: the op's attrs by
    name. ``meta``: per operand, its ``(shape, dtype)``, or None for a number or None operand.
    ``needs_input_grad``: per operand, whether a gradient for it is wanted (a rule may return
    None for the others). ``next``: per operand, the node its gradient flows into, or None.
    """

    saved: tuple[Any, ...] | None
    output: Tensor | None
    attrs: dict[str, Any]
    meta: tuple[tuple[tuple[int, ...], dtype] | None, ...]
    next: tuple[Any, ...]

    @property
    def needs_input_grad(self) -> tuple[bool, ...]: ...


Gradients = Union["Tensor", None, Sequence[Union["Tensor", None]]]
"""A rule's result: one gradient (or None) per operand, or the gradient alone for one operand."""


@runtime_checkable
class DerivativeRule(Protocol):
    """``OpDef.derivative``: ``rule(ctx, grad) -> gradients``, written with plugtorch ops (so it
    is differentiable itself, and higher-order gradients need nothing more). ``grad`` has the
    output's shape; each gradient returned has its operand's shape, or one that broadcasts to
    it (the engine sums it down)."""

    def __call__(self, ctx: RuleContext, grad: Tensor, /) -> Gradients: ...


@runtime_checkable
class ElementwiseFuser(Protocol):
    """``Backend.elementwise_fuser``: compiles chains of elementwise primitive calls that
    ``plugtorch.compile`` captured into one kernel each.

    ``fusable(name, operands, result_dtype)``: whether primitive ``name`` may join a chain, given
    a dtype name per array operand and ``("const", value)`` per number (dtype names as NumPy
    spells them). ``build(chain)``: one function of the chain's input arrays computing its last
    result, or None to replay the chain call by call.
    """

    def fusable(self, name: str, operands: Sequence[Any], result_dtype: str, /) -> bool: ...

    def build(self, chain: Chain, /) -> Kernel | None: ...
