"""When an elementwise kernel can run on its operands' flat memory, for NumPy's and CuPy's
arrays alike (the NumPy backend's native kernels and the CuPy backend's CUDA ones use it).

Two operands of one shape and one strides that fill their memory without gaps, in any order
of their dims (C order, or a permuted tensor's order, such as the channel-major view
x.transpose(0, 1)), hold element i at the same place; so does an ``empty_like`` output (order 'K').
Transposed into that memory order, all three are C-contiguous views a flat loop can take.
"""
from __future__ import annotations


def memory_order(a) -> tuple:
    """``a``'s dims from the largest stride down."""
    return tuple(sorted(range(a.ndim), key=lambda i: -a.strides[i]))


def dense_alike(first, second) -> bool:
    """Whether ``first`` and ``second`` share one shape and strides and fill their memory."""
    return (first.shape == second.shape and first.strides == second.strides
            and (first.flags.c_contiguous or first.transpose(memory_order(first)).flags.c_contiguous))


def flat_views(*arrays) -> list:
    """``arrays`` (laid out alike and densely) as C-contiguous views, in the first's memory order."""
    axes = memory_order(arrays[0])
    return [a.transpose(axes) for a in arrays]
