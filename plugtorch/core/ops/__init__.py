"""The core's op library, written against backend primitives and each other."""
from . import (activation, conv, creation, einsum, elementwise, index, inplace, linalg, movement,
               pointwise, reduce, scatter, shape, sorting, statistics)

MODULES = (elementwise, pointwise, reduce, statistics, sorting, shape, movement, index, scatter, inplace,
           linalg, einsum, activation, conv)


def all_opdefs():
    for m in MODULES:
        yield from m.OPS
