"""torch's ``_single``/``_pair``/``_triple``: an int or a sequence as an n-tuple (layer arguments)."""
from __future__ import annotations

from itertools import repeat


def _ntuple(n: int, name: str = "parse"):
    def parse(x):
        if isinstance(x, (list, tuple)):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
