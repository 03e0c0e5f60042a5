"""Checking a pickle before ``pickle.Unpickler`` reads it, for what the unpickler would trust.

The C unpickler believes the numbers a pickle states. BINBYTES8 and its kin make it allocate
the stated length before reading a byte; LONG_BINPUT n grows its memo to 2n entries and zeroes
them, so ten bytes can ask for 32 GiB; and a tuple nested a million deep, once hashed as a dict
key, sends C code down a recursion with no limit, which crashes the interpreter. None of that is
code from the file running, so a restricted ``find_class`` does not stop it.

:func:`scan` reads the opcodes with :func:`pickletools.genops`, which reads a stated length as
the bytes that are really there, and replays what each opcode does to the unpickler's stack,
keeping for every object only how deeply it nests. It refuses memo indices beyond the pickle's
size and nesting beyond :data:`MAX_DEPTH`. The depth it keeps is an upper bound for what the
unpickler hashes (tuples and frozensets, which are built bottom-up); lists and dicts filled
after they were put inside another container can end up deeper than it knows, so code walking
the result must not recurse through them.
"""
from __future__ import annotations

import pickletools
from typing import Any

__all__ = ["MAX_DEPTH", "scan"]

# Far deeper than any checkpoint nests (a state dict's tensors sit about ten levels down, counted
# as scan counts), far shallower than what overflows C's stack when hashing nested tuples.
MAX_DEPTH = 1000

_MARK = pickletools.markobject
_GETS = {"GET", "BINGET", "LONG_BINGET"}
_PUTS = {"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"}
# opcodes that add to an object already on the stack (their first input) and leave it there
_FILLS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD", "READONLY_BUFFER"}


class _Depth:
    """How deeply one object nests; shared by the stack and the memo, as the object is."""

    __slots__ = ("depth",)

    def __init__(self, depth: int):
        self.depth = depth


def scan(data: bytes, max_depth: int = MAX_DEPTH) -> None:
    """Raise ValueError, saying where and why, if unpickling ``data`` would allocate more than
    the pickle's size accounts for, or nest objects more than ``max_depth`` deep."""
    stack: list = []          # a _Depth per object the unpickler would hold, or _MARK
    marks: list[int] = []     # where in the stack each open MARK sits
    memo: dict[int, _Depth] = {}
    arg: Any  # of the type each opcode reads: the index, for PUT and GET
    for op, arg, pos in pickletools.genops(data):
        name = op.name
        fence = marks[-1] + 1 if marks else 0  # the unpickler never pops past the last MARK
        if name in _GETS:
            if arg not in memo:
                raise ValueError(f"at byte {pos}, {name} {arg} reads a memo entry never stored")
            stack.append(memo[arg])
            continue
        if name in _PUTS:
            index = len(memo) if name == "MEMOIZE" else arg
            if index > len(data):
                raise ValueError(f"at byte {pos}, {name} {index} would make the unpickler allocate "
                                 f"a memo of {2 * index} entries for a pickle of {len(data)} bytes")
            if len(stack) <= fence:
                raise ValueError(f"at byte {pos}, {name} has no object to store")
            memo[index] = stack[-1]
            continue
        items: list = []
        below = len(op.stack_before)
        if _MARK in op.stack_before or (name == "POP" and marks and marks[-1] == len(stack) - 1):
            if not marks:
                raise ValueError(f"at byte {pos}, {name} needs a MARK and none is open")
            at = marks.pop()
            items = stack[at + 1:]
            del stack[at:]
            fence = marks[-1] + 1 if marks else 0
            below = op.stack_before.index(_MARK) if _MARK in op.stack_before else 0
        if below:
            if len(stack) - fence < below:
                raise ValueError(f"at byte {pos}, {name} needs {below} objects on the stack")
            items = stack[-below:] + items
            del stack[-below:]
        if name == "DUP":
            stack.extend(items * 2)
            continue
        if name in _FILLS:
            target, deepest = items[0], max((i.depth for i in items[1:]), default=-1)
            target.depth = max(target.depth, deepest + 1)
            out = [target]
        else:
            out = [_Depth(max((i.depth for i in items), default=-1) + 1)] * len(op.stack_after)
        if out and out[0].depth > max_depth:
            raise ValueError(f"at byte {pos}, {name} nests objects more than {max_depth} deep")
        for kind in op.stack_after:
            if kind is _MARK:
                marks.append(len(stack))
                stack.append(_MARK)
            else:
                stack.append(out.pop())
