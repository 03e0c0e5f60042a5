"""The nested tuples, lists and dicts the transforms take and return, flattened to their leaves.

A spec records the containers (their types, lengths and keys) so ``unflatten`` rebuilds the same
structure; two structures match when their specs are equal.
"""
from __future__ import annotations

from typing import Any

__all__ = ["flatten", "unflatten", "tree_map"]


def flatten(tree: Any) -> tuple[list, Any]:
    """(the leaves of ``tree`` in order, its spec)."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    if isinstance(tree, (tuple, list)):
        return (type(tree), tuple(_flatten(x, leaves) for x in tree))
    if isinstance(tree, dict):
        keys = tuple(tree)
        return (type(tree), keys, tuple(_flatten(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return None


def unflatten(leaves: list, spec: Any) -> Any:
    it = iter(leaves)
    return _build(it, spec)


def _build(it, spec):
    if spec is None:
        return next(it)
    kind = spec[0]
    if issubclass(kind, dict):
        return kind(zip(spec[1], (_build(it, s) for s in spec[2])))
    items = [_build(it, s) for s in spec[1]]
    if hasattr(kind, "_fields"):  # a named tuple
        return kind(*items)
    return kind(items)


def tree_map(fn, tree: Any) -> Any:
    leaves, spec = flatten(tree)
    return unflatten([fn(x) for x in leaves], spec)
