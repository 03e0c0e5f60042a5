"""The named tuples ops return (``max(x, dim)`` -> ``(values, indices)``), printed as torch's.

``print(x.max(1))`` shows ``plugtorch.return_types.max(\\nvalues=tensor(...),\\nindices=tensor(...))``,
torch's layout with the module name changed; they are plain named tuples otherwise, and
pickle by name from ``plugtorch.return_types``.
"""
from __future__ import annotations

from collections import namedtuple

__all__ = ["return_type", "TYPES"]

TYPES: dict[str, type] = {}


def return_type(name: str, fields: list[str]) -> type:
    """The named tuple class ``name`` with ``fields`` (one per op; made once)."""
    if name in TYPES:
        return TYPES[name]
    base = namedtuple(name, fields)  # type: ignore[misc]

    def __repr__(self) -> str:
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"plugtorch.return_types.{name}(\n{body})"
    cls = type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__str__": __repr__,
                               "__module__": "plugtorch.return_types"})
    TYPES[name] = cls
    return cls
