"""searchsorted and bucketize: where values fall among sorted boundaries.

Each value's index is how many boundaries lie before it, counted with one broadcast
comparison: O(values x boundaries) work, no primitive beyond the comparisons and a sum, so
every backend runs them. A NaN value goes past every boundary, as in torch.
"""
from __future__ import annotations

from ..dtypes import int32, int64
from ..optable import op
from ..tensor import Tensor
from . import elementwise as ew


def _count_before(boundaries, values, right):
    """How many of ``boundaries``' last-dim entries lie before each value (``right``: at or
    before); the boundaries' leading dims match the values'."""
    b = boundaries.unsqueeze(-2)  # (..., 1, n) against values (..., m, 1)
    v = values.unsqueeze(-1)
    before = ew.logical_not(b > v) if right else ew.logical_not(b >= v)  # NaN values: past every boundary
    return before.sum(-1)


def _searchsorted_args(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    if out is not None:
        raise TypeError("searchsorted(): out= is not supported; assign the result instead")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    seq = sorted_sequence
    scalar = not isinstance(input, Tensor)
    if scalar:
        input = seq._full_like_scalar(input).reshape(())
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(input.shape)}")
    if seq.ndim > 1 and (input.ndim != seq.ndim or tuple(input.shape[:-1]) != tuple(seq.shape[:-1])):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(input.shape)}")
    if sorter is not None:
        if tuple(sorter.shape) != tuple(seq.shape):
            raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same size, but got "
                               f"boundary tensor {list(seq.shape)}and got sorter tensor {list(sorter.shape)}")
        seq = seq.gather(-1, sorter)
    return (seq, input), {"right": bool(right), "out_int32": bool(out_int32)}


@op(bind=_searchsorted_args, exposed=("plugtorch",))
def searchsorted(sorted_sequence, input, *, right, out_int32):
    """For each value, the index in the sorted last dim of ``sorted_sequence`` where inserting it
    keeps the order: before equal entries, or after them with ``right``."""
    seq = sorted_sequence
    if seq.ndim == 1:
        flat = input.reshape(1, -1)
        idx = _count_before(seq.unsqueeze(0), flat, right).reshape(input.shape)
    else:
        idx = _count_before(seq, input, right)
    return idx.to(int32 if out_int32 else int64)


def _bucketize_args(input, boundaries, *, out_int32=False, right=False, out=None):
    if out is not None:
        raise TypeError("bucketize(): out= is not supported; assign the result instead")
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    if not isinstance(input, Tensor):
        input = boundaries._full_like_scalar(input).reshape(())
    return (input, boundaries), {"right": bool(right), "out_int32": bool(out_int32)}


@op(bind=_bucketize_args, exposed=("plugtorch",))
def bucketize(input, boundaries, *, right, out_int32):
    """The bucket of each value among 1-D sorted ``boundaries``: i with boundaries[i-1] < x <=
    boundaries[i] (with ``right``, boundaries[i-1] <= x < boundaries[i])."""
    return searchsorted(boundaries, input, right=right, out_int32=out_int32)
