"""Names: the dotted name a call target prints as, and the namespace that keeps node names unique."""
from __future__ import annotations

import builtins
import keyword
import re
from collections import defaultdict
from typing import Any

__all__ = ["qualified_name", "public_name", "Namespace", "snake_case"]

_PUBLIC: dict[int, str] = {}


def _public_names() -> dict[int, str]:
    """id(function) -> "plugtorch.<name>" / "plugtorch.nn.functional.<name>" for the public API."""
    if not _PUBLIC:
        import plugtorch
        import plugtorch.nn.functional as F
        from plugtorch.core.optable import API
        for module, prefix in ((F, "plugtorch.nn.functional"), (plugtorch, "plugtorch")):
            for name in list(getattr(module, "__all__", ())):
                fn = getattr(module, name, None)
                if callable(fn) and not isinstance(fn, type):
                    # the function's own name where it is public under it (atan, not arctan)
                    own = getattr(fn, "__name__", name)
                    _PUBLIC[id(fn)] = f"{prefix}.{own if getattr(module, own, None) is fn else name}"
        for place, prefix in (("nn.functional", "plugtorch.nn.functional"), ("plugtorch", "plugtorch")):
            for name, fn in API[place].items():
                _PUBLIC.setdefault(id(fn), f"{prefix}.{name}")
    return _PUBLIC


def public_name(obj: Any) -> str | None:
    """``plugtorch.exp`` for ``plugtorch.exp``, ``plugtorch.ops.ns.op`` for a custom op; else None."""
    name = _public_names().get(id(obj))
    if name is not None:
        return name
    from plugtorch.library import CustomOpDef
    if isinstance(obj, CustomOpDef):
        ns, _, op = obj.name.partition("::")
        return f"plugtorch.ops.{ns}.{op}"
    return None


def qualified_name(obj: Any) -> str:
    """The dotted name a call target prints as (torch.fx's ``_get_qualified_name``)."""
    if getattr(obj, "__module__", None) == "builtins" or obj is getattr:
        return f"builtins.{obj.__name__}"
    public = public_name(obj)
    if public is not None:
        return public
    name = getattr(obj, "__name__", None) or type(obj).__name__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    if module == "_operator":
        module = "operator"
    return f"{module}.{name}"


def snake_case(s: str) -> str:
    """``camelCase`` -> ``camel_case`` (node names from class names)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s).lower()


class Namespace:
    """Unique, legal Python names: ``add``, ``add_1``, ...; builtins and keywords get a suffix."""

    _illegal = re.compile(r"[^0-9a-zA-Z_]+")
    _suffix = re.compile(r"(.*)_(\d+)$")

    def __init__(self) -> None:
        self._obj_to_name: dict[int, str] = {}
        self._used: set[str] = set()
        self._base_count: dict[str, int] = defaultdict(int)

    def create_name(self, candidate: str, obj: Any = None) -> str:
        if obj is not None and id(obj) in self._obj_to_name:
            return self._obj_to_name[id(obj)]
        candidate = self._illegal.sub("_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        match = self._suffix.match(candidate)
        if match is None:
            base, num = candidate, None
        else:
            base, num = match.group(1), int(match.group(2))
        candidate = base if num is None else f"{base}_{num}"
        if not num:
            num = self._base_count[base]
        while candidate in self._used or self._is_illegal(candidate):
            num += 1
            candidate = f"{base}_{num}"
        self._used.add(candidate)
        self._base_count[base] = num
        if obj is not None:
            self._obj_to_name[id(obj)] = candidate
        return candidate

    def associate_name_with_obj(self, name: str, obj: Any) -> None:
        self._obj_to_name[id(obj)] = name

    @staticmethod
    def _is_illegal(name: str) -> bool:
        return keyword.iskeyword(name) or name in builtins.__dict__ or name in ("plugtorch", "self", "inf", "nan")
