"""``Module``: the base class of layers and models.

A module owns three ordered name -> value tables, filled by attribute assignment:
parameters (``Parameter``), buffers (tensors saved in ``state_dict`` but not
trained, e.g. BatchNorm's running statistics) and sub-modules. Everything else
(traversal, ``state_dict``, device moves, train/eval) walks those tables.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Self

from ...compiler.guards import module_changed
from ...core.grad_mode import no_grad
from ...core.tensor import RemovableHandle, Tensor
from ..parameter import Buffer, Parameter
from .state_dict import StateDictMixin


def _addindent(s: str, spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _typename(value: object) -> str:
    if isinstance(value, Tensor):
        return f"plugtorch.Tensor ({value.dtype.name})"
    return type(value).__name__


_MISSING = object()


class _Table(dict):
    """A module's table of parameters, buffers, submodules or hooks: a dict that reports each
    change (``plugtorch.compile``'s replays check their modules only after one)."""

    counts_changes = True

    def __setitem__(self, key, value):
        if self.get(key, _MISSING) is not value:
            module_changed()
        super().__setitem__(key, value)

    def __delitem__(self, key):
        super().__delitem__(key)
        module_changed()

    def pop(self, *args):
        module_changed()
        return super().pop(*args)

    def popitem(self):
        module_changed()
        return super().popitem()

    def clear(self):
        module_changed()
        super().clear()

    def update(self, *args, **kwargs):
        module_changed()
        super().update(*args, **kwargs)

    def setdefault(self, key, default=None):
        module_changed()
        return super().setdefault(key, default)

    # mypy wants an __ior__ to mirror __or__'s overloads, which dict's own __ior__ does not
    def __ior__(self, other):  # type: ignore[misc]
        module_changed()
        return super().__ior__(other)


def _add_hook(hooks: dict, hook: Callable[..., Any], prepend: bool) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    if prepend:
        rest = list(hooks.items())
        hooks.clear()
        hooks[handle.id] = hook
        hooks.update(rest)
    else:
        hooks[handle.id] = hook
    return handle


class Module(StateDictMixin):
    """Base class for all neural network modules; subclasses define ``forward``."""

    training: bool
    _version = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments; Module.__init__ takes none "
                "(call super().__init__() without arguments)"
            )
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", _Table())
        setattr_(self, "_buffers", _Table())
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", _Table())
        setattr_(self, "_forward_pre_hooks", _Table())
        setattr_(self, "_forward_pre_hooks_with_kwargs", set())
        setattr_(self, "_forward_hooks", _Table())
        setattr_(self, "_forward_hooks_with_kwargs", set())
        setattr_(self, "_forward_hooks_always_called", set())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    # -- calling ---------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "forward pre-hook registered with with_kwargs=True must return None or "
                            f"a tuple of (new_args, new_kwargs), but got {result!r}"
                        )
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        try:
            output = self.forward(*args, **kwargs)
        except Exception:
            # hooks registered with always_call=True still run (their errors are dropped)
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called:
                    with contextlib.suppress(Exception):
                        self._run_forward_hook(hid, hook, args, kwargs, None)
            raise
        for hid, hook in list(self._forward_hooks.items()):
            result = self._run_forward_hook(hid, hook, args, kwargs, output)
            if result is not None:
                output = result
        return output

    def _run_forward_hook(self, hid, hook, args, kwargs, output):
        if hid in self._forward_hooks_with_kwargs:
            return hook(self, args, kwargs, output)
        return hook(self, args, output)

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (or ``(module, args, kwargs)``) runs before ``forward``.

        It may return replacement args (a tuple, or a single value that is wrapped in
        one); with ``with_kwargs=True`` it returns ``(args, kwargs)``.
        """
        handle = _add_hook(self._forward_pre_hooks, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` (or ``(module, args, kwargs, output)``) runs after
        ``forward``; a non-None return value replaces the output. With ``always_call`` it
        also runs (with output None) when ``forward`` raises."""
        handle = _add_hook(self._forward_hooks, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        return handle

    # -- registration ------------------------------------------------------------------
    def _check_name(self, kind: str, name: object) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(plugtorch.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly; to express '{name}' as a function of another Tensor, compute "
                "the value in the forward() method."
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self._check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(plugtorch Tensor or None required)"
            )
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent  # type: ignore[attr-defined]  # Buffer's slot, undeclared to mypy
            tensor = tensor.detach()
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        self._check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '{name}': Module.__init__() has "
                f"not run; call super().__init__() first in {type(self).__name__}.__init__"
            )
        for table in ("_parameters", "_buffers", "_modules"):
            t = d[table]
            if name in t:
                return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")

        def remove_from(*tables):
            for t in tables:
                if name in t:
                    if isinstance(t, set):
                        t.discard(name)
                    else:
                        del t[name]

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(plugtorch.nn.Parameter or None expected); to change its values use "
                    f"`with plugtorch.no_grad(): module.{name}.copy_(value)`"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            modules = d.get("_modules")
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(plugtorch.nn.Module or None expected)"
                )
            d["_modules"][name] = value
        elif isinstance(value, Buffer):
            if d.get("_buffers") is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            remove_from(d, self._parameters, self._modules)
            self.register_buffer(name, value)
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(plugtorch Tensor or None expected)"
                )
            d["_buffers"][name] = value
        else:
            if d.get(name, _MISSING) is not value:
                module_changed()
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        module_changed()
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # -- traversal ---------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k), v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> Iterator[tuple[str, Module]]:
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        # Iterative pre-order walk: deep models never hit the recursion limit.
        if memo is None:
            memo = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in memo:
                    continue
                memo.add(id(module))
            yield name, module
            kids = [(name + ("." if name else "") + k, m) for k, m in module._modules.items()
                    if m is not None]
            stack.extend(reversed(kids))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def get_submodule(self, target: str) -> Module:
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            sub = mod._modules.get(item)
            if sub is None:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = sub
        return mod

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        param = mod._parameters.get(name)
        if param is None:  # torch's too: a parameter registered as None is not an nn.Parameter
            raise AttributeError(f"`{name}` is not an nn.Parameter of {mod._get_name()}")
        return param

    def get_buffer(self, target: str) -> Tensor | None:
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer of {mod._get_name()}")
        return mod._buffers[name]

    # -- modes and gradients -------------------------------------------------------------
    def train(self, mode: bool = True) -> Self:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Self:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Self:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad.detach() if p.grad.grad_fn is not None else p.grad
                with no_grad():
                    g.zero_()
                p.grad = g

    # -- conversion ----------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Self:
        """Replace every parameter's values (and grad's) with ``fn(tensor)``, and every buffer.

        Parameters stay the same objects (only their data is rebound), so an optimizer
        built before ``model.to(...)`` still updates the model.
        """
        for module in self.modules():
            with no_grad():
                for p in module._parameters.values():
                    if p is None:
                        continue
                    p.data = fn(p)
                    if p.grad is not None:
                        p.grad = fn(p.grad)
                for k, b in module._buffers.items():
                    if b is not None:
                        module._buffers[k] = fn(b)
        return self

    def share_memory(self) -> Self:
        """Move parameters, their gradients and buffers to shared memory in place
        (``Tensor.share_memory_``), so processes given this module update one set of weights."""
        return self._apply(lambda t: t.share_memory_())

    def __setstate__(self, state: dict) -> None:
        # Unpickling (plugtorch.load(weights_only=False)), also a module torch pickled, whose
        # tables are OrderedDicts: they become _Tables again, and what torch's lacks is added.
        d = self.__dict__
        d.update(state)
        for name in ("_parameters", "_buffers", "_modules", "_forward_pre_hooks", "_forward_hooks"):
            d[name] = _Table(d.get(name) or {})
        for name in ("_non_persistent_buffers_set", "_forward_pre_hooks_with_kwargs",
                     "_forward_hooks_with_kwargs", "_forward_hooks_always_called"):
            d[name] = set(d.get(name) or ())
        d.setdefault("training", True)
        module_changed()

    def apply(self, fn: Callable[[Module], object]) -> Self:
        """Call ``fn(module)`` on every sub-module (children first) and then on self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Self:
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(tensor)``.

        A dtype applies to floating-point parameters and buffers only (integer
        counters such as BatchNorm's ``num_batches_tracked`` keep theirs).
        """
        from ...core.dtypes import dtype as _dtype
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, _dtype):
                dtype = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif a is not None:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype.name}"
            )

        def convert(t):
            out = t.to(device) if device is not None else t
            if dtype is not None and t.dtype.is_floating_point:
                out = out.to(dtype)
            return out
        return self._apply(convert)

    def cpu(self) -> Self:
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> Self:
        """Move to the backend that answers to "cuda" (e.g. CuPy), like torch's ``cuda()``."""
        return self.to("cuda" if device is None else f"cuda:{int(device)}")

    def float(self) -> Self:
        from ...core.dtypes import float32
        return self.to(float32)

    def double(self) -> Self:
        from ...core.dtypes import float64
        return self.to(float64)

    def half(self) -> Self:
        from ...core.dtypes import float16
        return self.to(float16)

    def bfloat16(self) -> Self:
        from ...core.dtypes import bfloat16
        return self.to(bfloat16)

    # -- printing ------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr``; override in subclasses."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"
