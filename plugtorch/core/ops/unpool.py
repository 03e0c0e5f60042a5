"""max_unpool{1,2,3}d: the partial inverse of max pooling, a scatter into zeros.

Each value of the pooled input goes to the position its index names in the flattened
spatial plane (or volume) of its own (sample, channel); every other position is zero.
The gradient is the matching gather. Where two indices coincide (overlapping windows),
which value lands is unspecified, as in torch (on CPU the last one written).
"""
from __future__ import annotations

import math

from ..debug import checks_values
from ..dtypes import int64
from ..optable import op
from ..tensor import Tensor
from .conv import batched, ntuple, unbatched_call
from .creation import zeros

_F = ("nn.functional",)


def _max_unpool(input, indices, *, output_size):
    """A scatter into zeros (any rank)."""
    n, c = input.shape[0], input.shape[1]
    flat = zeros(n, c, math.prod(output_size), dtype=input.dtype, device=input._backend.name)
    per = math.prod(input.shape[2:])
    out = flat.scatter(2, indices.reshape(n, c, per), input.reshape(n, c, per))
    return out.reshape(n, c, *output_size)


def _max_unpool_rule(ctx, g):
    x, idx = ctx.saved
    n, c = x.shape[0], x.shape[1]
    flat = g.reshape(n, c, math.prod(g.shape[2:]))
    return flat.gather(2, idx.reshape(n, c, math.prod(x.shape[2:]))).reshape(x.shape), None


def _output_size(name, x, nd, kernel_size, stride, padding, output_size):
    k = ntuple(kernel_size, nd, "kernel_size")
    s = ntuple(stride if stride is not None else k, nd, "stride")
    p = ntuple(padding, nd, "padding")
    default = [(x.shape[2 + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nd)]
    if output_size is None:
        return tuple(default)
    size = tuple(output_size)
    if len(size) == nd + 2:
        size = size[2:]
    if len(size) != nd:
        raise ValueError(f"{name}: output_size should be a sequence containing {nd} or {nd + 2} elements, "
                         f"but it has a length of '{len(tuple(output_size))}'")
    for i, (want, d) in enumerate(zip(size, default)):
        if not d - s[i] < want < d + s[i]:
            raise ValueError(f'invalid output_size "{size}" (dim {i} must be between {d - s[i]} and '
                             f"{d + s[i]})")
    return tuple(int(v) for v in size)


def _max_unpool_args(name, nd):
    def bind(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        if not isinstance(input, Tensor) or not isinstance(indices, Tensor):
            raise TypeError(f"{name}(): input and indices must be Tensors")
        if indices.dtype is not int64:
            raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype.name}")
        x, unbatched = batched(name, input, nd + 2)
        idx = indices.unsqueeze(0) if unbatched else indices
        if tuple(idx.shape) != tuple(x.shape):
            raise RuntimeError(f"{name}: Expected shape of indices to be same as that of the input tensor "
                               f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
        size = _output_size(name, x, nd, kernel_size, stride, padding, output_size)
        if idx.numel() and checks_values(idx):  # reads values: see checks_values
            lo, hi = int(idx.min()), int(idx.max())
            if lo < 0 or hi >= math.prod(size):
                bad = hi if hi >= math.prod(size) else lo
                raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                                   f"{'x'.join(map(str, size))}")
        if unbatched:
            return unbatched_call(name, (x, idx), {"output_size": size})
        return (x, idx), {"output_size": size}
    return bind


@op(bind=_max_unpool_args("max_unpool1d", 1), derivative=_max_unpool_rule, save="inputs", exposed=_F)
def max_unpool1d(input, indices, *, output_size):
    """Scatter a max-pooled (N, C, L) input back to the positions its indices name; zeros elsewhere.

    A backend kernel receives the batched input and int64 indices of one shape, and
    ``output_size`` (the spatial size, one int per dim) by name (likewise for 2-D and 3-D).
    """
    return _max_unpool(input, indices, output_size=output_size)


@op(bind=_max_unpool_args("max_unpool2d", 2), derivative=_max_unpool_rule, save="inputs", exposed=_F)
def max_unpool2d(input, indices, *, output_size):
    """Scatter a max-pooled (N, C, H, W) input back to the positions its indices name; zeros elsewhere."""
    return _max_unpool(input, indices, output_size=output_size)


@op(bind=_max_unpool_args("max_unpool3d", 3), derivative=_max_unpool_rule, save="inputs", exposed=_F)
def max_unpool3d(input, indices, *, output_size):
    """Scatter a max-pooled (N, C, D, H, W) input back to the positions its indices name; zeros
    elsewhere."""
    return _max_unpool(input, indices, output_size=output_size)
