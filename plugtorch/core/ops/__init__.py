"""The core's op library, written against backend primitives and each other."""
from . import activation, conv, creation, elementwise, index, inplace, linalg, reduce, shape

MODULES = (elementwise, reduce, shape, index, inplace, linalg, activation, conv)


def all_opdefs():
    for m in MODULES:
        yield from m.OPS
