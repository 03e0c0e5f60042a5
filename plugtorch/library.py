"""``plugtorch.library``: define ops, kernels and backends from Python, as ``torch.library`` does.

The public, versioned way to extend plugtorch (``CONTRACT_VERSION``)::

    import numpy as np
    import plugtorch
    from plugtorch import library

    @library.custom_op("mylib::swish", mutates_args=())
    def swish(x: plugtorch.Tensor, beta: float = 1.0) -> plugtorch.Tensor:
        return x / (1 + np.exp(-beta * x))          # on backend arrays

    @swish.register_autograd
    def _(ctx, grad):                                 # written with plugtorch ops
        x, beta = ctx.inputs["x"], ctx.inputs["beta"]
        s = plugtorch.sigmoid(x * beta)
        return grad * (s + x * beta * s * (1 - s)), None

    plugtorch.ops.mylib.swish(plugtorch.randn(3, requires_grad=True))

A custom op's function receives the tensor arguments as the backend's native arrays
and returns one; it is the op's kernel on every backend that has none of its own
(``.register_kernel("numpy")`` adds one per backend). Parameters annotated ``Tensor``
(``Tensor | None``, or a first ``list[Tensor]``) are the operands; the rest are attributes.

Everything declared here is registered by a :class:`Library`, which is a plugin like
any other: defined in a package's entry-point module, it registers while plugtorch
loads its plugins; defined in a script, as soon as it is declared.
"""
from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from .core.backend import Backend
from .core.dispatch import NO_ATTRS, call_op, record
from .core.grad_mode import _state as _grad
from .core.hookspecs import CONTRACT_VERSION, hookimpl
from .core.opdef import OpDef
from .core.optable import INTERCEPT, TABLE
from .core.tensor import Tensor

if TYPE_CHECKING:
    from .core.graph import Node
    from .core.registry import Registrar

__all__ = ["CONTRACT_VERSION", "Library", "CustomOpDef", "custom_op", "register_kernel", "define_backend",
           "get_library"]

_LIBRARIES: dict[str, Library] = {}


class Library:
    """The ops, kernels and backends one namespace (or one package) adds: registered as a plugin.

    ``Library("mylib")`` is what ``custom_op("mylib::...")`` uses; a package that also
    registers kernels for existing ops or a backend can make its own and pass
    ``lib=`` to those functions. Its plugin name is the namespace.
    """

    PLUGTORCH_CONTRACT = CONTRACT_VERSION

    def __init__(self, namespace: str, *, contract: int = CONTRACT_VERSION):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", namespace):
            raise ValueError(f"library namespace {namespace!r} must be a Python identifier")
        if namespace in _LIBRARIES:
            raise ValueError(f"a library for namespace '{namespace}' already exists; get it with "
                             f"plugtorch.library.get_library({namespace!r})")
        self.namespace = namespace
        self.PLUGTORCH_CONTRACT = contract  # checked like any plugin's when it registers
        self.module = _caller_module()
        self._entries: list[tuple] = []
        self._registrar: Registrar | None = None
        _LIBRARIES[namespace] = self

    def __repr__(self) -> str:
        return f"<plugtorch.library.Library '{self.namespace}' from {self.module}>"

    # -- the plugin side ------------------------------------------------------------------
    @hookimpl
    def plugtorch_register(self, registrar: Registrar) -> None:
        self._registrar = registrar
        for entry in self._entries:
            self._apply(registrar, entry)

    @staticmethod
    def _apply(r: Registrar, entry: tuple) -> None:
        kind, *args = entry
        if kind == "op":
            opdef, override = args
            r.add_op(opdef, override=override)
        elif kind == "kernel":
            op, backend, fn = args
            r.add_kernel(op, backend, fn, override=True)
        elif kind == "backend":
            r.add_backend(args[0])

    def _add(self, *entry: Any) -> None:
        self._entries.append(entry)
        if self._registrar is not None:  # already registered: what is added now applies now
            self._apply(self._registrar, entry)
        else:
            from .core import plugins
            plugins.register_library(self)

    # -- what a library declares ----------------------------------------------------------
    def custom_op(self, name: str, fn: Callable | None = None, /, *, mutates_args: str | Iterable[str] = (),
                  samples: Callable | None = None):
        """``custom_op`` in this library's namespace (``name`` without the ``ns::`` prefix)."""
        return custom_op(f"{self.namespace}::{name}", fn, mutates_args=mutates_args, samples=samples)

    def register_kernel(self, op: str, backend: str, fn: Callable | None = None, /):
        return register_kernel(op, backend, fn, lib=self)

    def define_backend(self, name: str, **kwargs) -> Backend:
        return define_backend(name, lib=self, **kwargs)


def get_library(namespace: str) -> Library:
    """The library of ``namespace``, made on first use."""
    lib = _LIBRARIES.get(namespace)
    return lib if lib is not None else Library(namespace)


def _caller_module() -> str:
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("plugtorch.library"):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "?") if frame is not None else "?"


# -- custom ops ---------------------------------------------------------------------------------

_TENSOR = re.compile(r"^(plugtorch\.)?Tensor$")
_OPTIONAL = re.compile(r"^(Optional\[(plugtorch\.)?Tensor\]"
                       r"|(plugtorch\.)?Tensor \| None|None \| (plugtorch\.)?Tensor)$")
_LIST = re.compile(r"^(list|List|Sequence|typing\.Sequence|tuple)\[(plugtorch\.)?Tensor(, \.\.\.)?\]$")


def _kind(annotation: Any) -> str:
    """'tensor', 'optional', 'list' or 'attr', from a parameter's annotation (text or object)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    if annotation is Tensor or _TENSOR.match(text):
        return "tensor"
    if _OPTIONAL.match(text.replace("typing.", "")):
        return "optional"
    if _LIST.match(text):
        return "list"
    return "attr"


class CustomOpDef:
    """What ``@custom_op`` returns: the op (call it like a function) and the methods that extend it."""

    def __init__(self, qualname: str, fn: Callable, mutates_args: str | Iterable[str],
                 samples: Callable | None) -> None:
        namespace, _, name = qualname.partition("::")
        if not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"custom_op name {qualname!r} must be 'namespace::name' with identifiers")
        self.name = qualname
        self.library = get_library(namespace)
        self._fn = fn
        sig = inspect.signature(fn)
        self._params = list(sig.parameters.values())
        kinds = {}
        for p in self._params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"custom_op '{qualname}': *args and **kwargs are not supported; name "
                                "each argument (tensors annotated Tensor)")
            if p.annotation is p.empty:
                raise TypeError(f"custom_op '{qualname}': parameter '{p.name}' needs a type annotation "
                                "(Tensor for the tensors it computes on, its type for the others)")
            kinds[p.name] = _kind(p.annotation)
        lists = [n for n, k in kinds.items() if k == "list"]
        if lists and (len(lists) > 1 or self._params[0].name != lists[0]
                      or any(k in ("tensor", "optional") for k in kinds.values())):
            raise TypeError(f"custom_op '{qualname}': a list of tensors must be the only tensor argument "
                            "and come first")
        self._operands = [n for n, k in kinds.items() if k != "attr"]
        self._attrs = [n for n, k in kinds.items() if k == "attr"]
        if not self._operands:
            raise TypeError(f"custom_op '{qualname}': no parameter is annotated Tensor, so the op has "
                            "nothing to compute on")
        mutates = (mutates_args,) if isinstance(mutates_args, str) else tuple(mutates_args)
        bad = [m for m in mutates if kinds.get(m) not in ("tensor", "optional")]
        if bad:
            raise ValueError(f"custom_op '{qualname}': mutates_args {bad} are not tensor parameters")
        self._mutates = mutates
        self._returns_none = sig.return_annotation in (None, "None")
        if self._returns_none and not mutates:
            raise TypeError(f"custom_op '{qualname}' returns None and mutates nothing: it would do nothing")
        self._variadic = bool(lists)
        self.__signature__ = sig
        self.__doc__ = fn.__doc__
        self.__name__ = name
        self._opdef = OpDef(qualname, lower=self._adapt_lowering(fn), function=self, samples=samples,
                            variadic=self._variadic, module=self.library.module,
                            no_kernel="returns nothing (it mutates its inputs), so dispatch cannot wrap a "
                                      "kernel's result; register kernels for ops that return a tensor"
                                      if self._returns_none else "")
        self.library._add("op", self._opdef, False)

    def __repr__(self) -> str:
        return f"<plugtorch custom op {self.name}>"

    # -- calling it ---------------------------------------------------------------------------
    def _split(self, args, kwargs):
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.name}(): {e}") from None
        bound.apply_defaults()
        values = bound.arguments
        if self._variadic:
            operands = tuple(values[self._operands[0]])
        else:
            operands = tuple(values[n] for n in self._operands)
        return operands, {n: values[n] for n in self._attrs} or NO_ATTRS, values

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        operands, attrs, values = self._split(args, kwargs)
        for n, o in zip(self._operands, operands):
            if o is not None and not isinstance(o, Tensor):
                if INTERCEPT.on and (out := INTERCEPT.call(self, args, kwargs)) is not NotImplemented:
                    return out  # an fx.Proxy argument: the call is recorded
                raise TypeError(f"{self.name}(): argument '{n}' must be a Tensor, not {type(o).__name__}")
        for m in self._mutates:
            t = values[m]
            if t is not None and t.requires_grad and _grad.enabled:
                raise RuntimeError(f"{self.name}(): argument '{m}' is mutated by the op and requires grad; "
                                   "mutate it under plugtorch.no_grad(), or pass a tensor that does not")
        if self._returns_none:
            self._run_for_effect(operands, attrs)
            out = None
        else:
            out = call_op(self.name, operands, attrs)
            d = TABLE[self.name]
            if (d.rule is None and out.grad_fn is None and _grad.enabled
                    and any(isinstance(o, Tensor) and o.requires_grad for o in operands)):
                # a node whose rule says what is missing, as torch's custom ops raise in backward
                record(out, _missing_derivative(d), operands, attrs)
        for m in self._mutates:
            if values[m] is not None:
                values[m]._vc[0] += 1  # saved copies of it now fail the version check
        return out

    def _run_for_effect(self, operands, attrs) -> None:
        from .core.dispatch import backend_of
        b = backend_of(self.name, operands)
        fn = b.kernels.get(self.name)
        if fn is None:
            from .core.errors import MissingKernelError
            from .core.plugins import get_registry
            raise MissingKernelError(self.name, b.name, get_registry().plugin_names())
        arrays = [o._data if isinstance(o, Tensor) else o for o in operands]
        fn(arrays, **attrs) if self._variadic else fn(*arrays, **attrs)

    # -- extending it ---------------------------------------------------------------------------
    def _adapt_kernel(self, fn: Callable) -> Callable:
        """A kernel in the op's own signature, called the dispatch way (operands first, attrs by name)."""
        names = self._operands
        kernel: Callable[..., Any]
        if self._variadic:
            def kernel(arrays, **attrs):
                return fn(arrays, **attrs)
        else:
            def kernel(*arrays, **attrs):
                return fn(**dict(zip(names, arrays)), **attrs)
        kernel.__name__ = getattr(fn, "__name__", "kernel")
        kernel.__wrapped__ = fn  # type: ignore[attr-defined]
        return kernel

    def _adapt_lowering(self, fn: Callable) -> Callable:
        kernel = self._adapt_kernel(fn)
        return lambda backend, *arrays, **attrs: kernel(*arrays, **attrs)

    def register_kernel(self, backends: str | Iterable[str], fn: Callable | None = None, /):
        """``fn`` (the op's signature, on arrays) computes the op on ``backends`` (a name or names)."""
        names = (backends,) if isinstance(backends, str) else tuple(backends)

        def deco(f):
            for b in names:
                self.library._add("kernel", self.name, b, self._adapt_kernel(f))
            return f
        return deco(fn) if fn is not None else deco

    def register_autograd(self, backward: Callable | None = None, /, *, setup_context: Callable | None = None):
        """The op's derivative, written with plugtorch ops (so higher-order gradients work).

        ``backward(ctx, grad)`` returns one gradient (or None) per argument of the op, as
        torch's does. ``ctx.inputs`` maps argument names to their values, ``ctx.output`` is
        the op's output; an optional ``setup_context(ctx, inputs, output)`` may save tensors
        with ``ctx.save_for_backward(...)`` (read back as ``ctx.saved_tensors``) and set
        attributes on ``ctx``, as torch's. Usable as a decorator.
        """
        def deco(bw):
            self._opdef = replace(self._opdef, derivative=_autograd_rule(self, bw, setup_context),
                                  save=("inputs", "output"), plugin=None)
            self.library._add("op", self._opdef, True)
            return bw
        return deco(backward) if backward is not None else deco

    def register_samples(self, samples: Callable) -> Callable:
        """Sample inputs for the conformance kit: ``samples(g) -> [plugtorch.testing.Sample(...)]``."""
        self._opdef = replace(self._opdef, samples=samples, plugin=None)
        self.library._add("op", self._opdef, True)
        return samples


class _AutogradContext:
    """What a custom op's ``setup_context`` and ``backward`` see (torch's ctx, over the graph node)."""

    def __init__(self, node: Node, op: CustomOpDef) -> None:
        operands = node.saved
        values = dict(zip(op._operands, operands)) if not op._variadic else {op._operands[0]: list(operands)}
        values.update(node.attrs)
        # defaults too: a call through call_op (the conformance kit's default call) passes only
        # the attrs it was given, and the op's function alone filled in the rest
        self.inputs = {p.name: values.get(p.name, None if p.default is p.empty else p.default)
                       for p in op._params}
        self.output = node.output
        self.needs_input_grad = tuple(
            any(node.needs_input_grad) if (op._variadic and p.name == op._operands[0])
            else (node.needs_input_grad[op._operands.index(p.name)] if p.name in op._operands else False)
            for p in op._params)
        self.saved_tensors: tuple = ()

    def save_for_backward(self, *tensors: Tensor) -> None:
        self.saved_tensors = tensors


def _autograd_rule(op: CustomOpDef, backward: Callable, setup_context: Callable | None):
    n_args = len(op._params)

    def rule(ctx, g):
        actx = _AutogradContext(ctx, op)
        if setup_context is not None:
            setup_context(actx, tuple(actx.inputs.values()), actx.output)
        grads = backward(actx, g)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != n_args:
            raise RuntimeError(f"{op.name}: backward returned {len(grads)} gradients, expected one per "
                               f"argument ({n_args}: {', '.join(p.name for p in op._params)})")
        by_name = dict(zip((p.name for p in op._params), grads))
        if op._variadic:
            listed = by_name[op._operands[0]]
            return tuple(listed) if listed is not None else (None,) * len(ctx.next)
        return tuple(by_name[n] for n in op._operands)
    return rule


def _missing_derivative(d: OpDef) -> OpDef:
    """``d`` with a derivative that raises, saying how to register one."""
    name = d.name

    def rule(ctx, g):
        ns, _, op = name.partition("::")
        raise RuntimeError(f"custom op '{name}' has no derivative registered, so it cannot be "
                           f"differentiated; add one with plugtorch.ops.{ns}.{op}.register_autograd(...) "
                           "(or the decorator's @<op>.register_autograd)")
    return replace(d, derivative=rule, save=())


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: str | Iterable[str] = (),
              samples: Callable | None = None):
    """Make ``fn`` (annotated; on backend arrays) the op ``"namespace::name"``: a registered op
    reachable as ``plugtorch.ops.namespace.name`` and as the returned object.

    ``mutates_args`` names the tensor arguments ``fn`` writes in place (their version
    counters are bumped, so a stale saved copy fails the autograd check); it must be
    given, as in torch (``()`` for none).
    """
    def deco(f):
        return CustomOpDef(name, f, mutates_args, samples)
    return deco(fn) if fn is not None else deco


def register_kernel(op: str, backend: str, fn: Callable | None = None, /, *, lib: Library | None = None):
    """``fn`` computes the existing op ``op`` on ``backend``: a fused kernel dispatch prefers.

    It receives the op's operands as native arrays, positionally (a list for cat, stack,
    einsum), and its attrs by keyword, as the op's entry in ``docs/ops.md`` says. For a
    custom op use ``<op>.register_kernel(backend)`` instead (the op's own signature).
    """
    library = lib or get_library(_package_namespace())

    def deco(f):
        library._add("kernel", op, backend, f)
        return f
    return deco(fn) if fn is not None else deco


def define_backend(name: str, *, primitives: dict, dtype_of: Callable, is_native: Callable,
                   lib: Library | None = None, **options: Any) -> Backend:
    """Register a whole backend: a table of primitives (``plugtorch.core.primitives`` lists
    them) and how to read its arrays. ``options`` are :class:`Backend`'s (``aliases``,
    ``available``, ``unavailable_reason``, ``host_memory``, ...)."""
    backend = Backend(name, primitives, dtype_of, is_native, **options)
    (lib or get_library(_package_namespace()))._add("backend", backend)
    return backend


def _package_namespace() -> str:
    module = _caller_module()
    top = module.split(".")[0]
    return re.sub(r"\W", "_", top) if top and top != "__main__" else "user"


# namespaces of ``plugtorch.ops`` whose functions are no ops of the table: the profiler's ranges
# (``ops.profiler._record_function_enter``), which take no tensor
FUNCTIONS: dict[str, Any] = {}


class _OpsNamespace:
    """``plugtorch.ops.<namespace>.<name>``: the registered ops, by their qualified names."""

    def __init__(self, namespace: str | None = None):
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._namespace is None:
            return FUNCTIONS.get(name) or _OpsNamespace(name)
        from .core.plugins import get_registry
        qualified = f"{self._namespace}::{name}"
        d = get_registry().ops.get(qualified)
        if d is None:
            known = sorted(n for n in get_registry().ops if n.startswith(self._namespace + "::"))
            raise AttributeError(f"no op '{qualified}' is registered"
                                 + (f"; namespace '{self._namespace}' has {known}" if known else ""))
        return d.function if d.function is not None else (lambda *a, **k: call_op(qualified, a, k))

    def __repr__(self) -> str:
        return f"<plugtorch.ops{'.' + self._namespace if self._namespace else ''}>"


ops = _OpsNamespace()
