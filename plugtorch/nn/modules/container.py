"""Containers: ``Sequential`` (a pipeline), ``ModuleList`` and ``ModuleDict`` (registered holders)."""
from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from itertools import islice
from typing import Any, Self

from .module import Module, _addindent


def _index(idx: int, n: int, what: str) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {what} of length {n}")
    return idx + n if idx < 0 else idx


class Sequential(Module):
    """Modules called in order, each on the previous one's output.

    ``Sequential(m1, m2, ...)`` names them "0", "1", ...; ``Sequential(OrderedDict(...))``
    keeps the given names.
    """

    # entries are modules, as torch's containers declare (Module's table also admits None)
    _modules: dict[str, Module]  # type: ignore[assignment]

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (dict, OrderedDict)):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input: Any) -> Any:
        for module in self._modules.values():
            input = module(input)
        return input

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        i = _index(idx, len(self), "Sequential")
        return next(islice(self._modules.values(), i, None))

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                del self._modules[key]
        else:
            del self._modules[keys[_index(idx, len(self), "Sequential")]]
        # Keep the default "0", "1", ... names contiguous, as torch does.
        items = list(self._modules.items())
        if all(k.isdigit() for k, _ in items):
            self._modules.clear()
            self._modules.update((str(i), m) for i, (_, m) in enumerate(items))

    def append(self, module: Module) -> Self:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Self:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Self:
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self


class ModuleList(Module):
    """A list of modules whose parameters the parent module sees (a plain list would hide them)."""

    # entries are modules, as torch's containers declare (Module's table also admits None)
    _modules: dict[str, Module]  # type: ignore[assignment]

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx: int | slice) -> None:
        mods = list(self._modules.values())
        del mods[idx if isinstance(idx, slice) else _index(idx, len(self), "ModuleList")]
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __iadd__(self, modules: Iterable[Module]) -> Self:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList(list(self) + list(other))

    def append(self, module: Module) -> Self:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Self:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(f"ModuleList.extend should be called with an iterable, "
                            f"but got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, idx: int = -1) -> Module:
        m = self[idx]
        del self[idx]
        return m

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "ModuleList has no forward(); iterate over it in your module's forward instead"
        )

    def __repr__(self) -> str:
        """Runs of identical entries print once, as ``(0-2): 3 x Linear(...)`` (torch's format)."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs: list[list[Any]] = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules whose parameters the parent module sees."""

    # entries are modules, as torch's containers declare (Module's table also admits None)
    _modules: dict[str, Module]  # type: ignore[assignment]

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        m = self[key]
        del self[key]
        return m

    def keys(self) -> KeysView[str]:
        return self._modules.keys()

    def items(self) -> ItemsView[str, Module]:
        return self._modules.items()

    def values(self) -> ValuesView[Module]:
        return self._modules.values()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if hasattr(modules, "items") else modules
        for j, pair in enumerate(pairs):
            if not hasattr(modules, "items") and len(pair) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is required"
                )
            key, module = pair
            self[key] = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "ModuleDict has no forward(); index it in your module's forward instead"
        )
