"""``written_out``: the ``front=`` of an op whose public function is written by hand.

An op's public function is generated from its declaration (``optable.op``): from its own
signature, or from a ``bind``. A few are written out instead, each saying why where it is
declared: the views that run several times per layer (reshape, view, permute, expand,
``x[...]``) and ``cast``, which every dtype promotion runs, where a bind's extra call and
``call_op``'s pass over an operand tuple would add a third to a reshape and double a cast;
and the ops whose public function acts after the kernel ran (returns the input itself,
reports the kernel's error in torch's words, records a node on the first of several outputs,
wraps the result on another backend), which a bind, returning before dispatch, cannot say.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["written_out"]


def written_out(fn: Callable) -> Callable[[str], Callable]:
    """``front=`` for an op whose public function is ``fn``: named as the op, so that it reads,
    prints and pickles as ``plugtorch.<op>``; its docstring is the declaration's."""
    def front(name: str) -> Callable:
        public: Any = fn
        public.__name__ = public.__qualname__ = name
        return public
    return front
