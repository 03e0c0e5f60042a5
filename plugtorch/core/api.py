"""Binding the public API from the op table: ``plugtorch.*``, ``Tensor.*`` and ``nn.functional.*``.

Every op declares where it is exposed (``OpDef.exposed``), and public helpers that are not
ops declare it with ``optable.public``; this module turns those declarations into
attributes. The same declarations generate the type stubs (``plugtorch.core.stubs``), so
what type checkers see and what runs come from one place.
"""
from __future__ import annotations

from .optable import API, INPLACE

__all__ = ["names", "bind_module", "bind_tensor"]


def names(place: str) -> dict:
    """name -> callable for one place ("plugtorch", "Tensor" or "nn.functional")."""
    return dict(API[place])


def bind_module(namespace: dict, place: str) -> list[str]:
    """Put the functions declared for ``place`` into a module's namespace; returns their names."""
    bound = names(place)
    namespace.update(bound)
    return sorted(bound)


def bind_tensor(cls) -> None:
    """Attach the methods declared for "Tensor" and the in-place ``<op>_`` forms to ``cls``."""
    from .ops.inplace import inplace
    for name, fn in API["Tensor"].items():
        setattr(cls, name, fn)
    for name, fn in INPLACE.items():
        setattr(cls, name, inplace(fn, name))
