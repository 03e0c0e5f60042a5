"""histogram and histogramdd: counts (or summed weights) of points in bins given by their count
over a range or by their edges.

One op, ``histogramdd``, over the points as an (N, D) tensor and the D dims' edges joined in one
1-D tensor; ``histogram`` is its one-dim case. Each point's bin along a dim is the number of
edges at or below it, less one (torch's upper bound; a point on the last edge goes to the last
bin), found by one stable ``argsort`` of the edges and the points together: O((N + B) log(N + B)),
where comparing every point with every edge would take N x B memory. Without a ``range`` the
data's min and max are read back to the host to place the edges, as torch does.
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

from ..dispatch import call_op, record
from ..dtypes import bool_, int64
from ..grad_mode import _state as _grad
from ..grad_mode import no_grad
from ..optable import TABLE, op, public
from ..return_types import return_type
from ..tensor import Tensor
from . import elementwise as ew
from ._front import written_out
from .counting import _no_derivative
from .creation import linspace, ones, zeros
from .index import scatter_add
from .shape import cat
from .sorting import argsort
from .statistics import cumsum

histogram_result = return_type("histogram", ["hist", "bin_edges"])
histogramdd_result = return_type("histogramdd", ["hist", "bin_edges"])

_C_NAME = {"float16": "Half", "bfloat16": "BFloat16", "float32": "float", "float64": "double", "bool": "bool",
           "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
           "int64": "long int"}
_WORD = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
         "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def _bin_along(values, edges):
    """Each value's bin among ``edges`` (sorted, at least 2): the count of edges <= value, less 1,
    the last edge counted in the last bin; and whether the value lies within the edges."""
    n, m = values.shape[0], edges.shape[0]
    both = cat([edges, values])
    order = argsort(both, stable=True)  # an edge equal to a value sorts first: it is counted
    is_edge = ew.lt(order, m).to(int64)
    below = cumsum(is_edge, 0)  # edges at or before each sorted position
    rank = zeros(n + m, dtype=int64, device=values._backend.name)
    rank[order] = below  # for each entry of ``both``: the edges sorted at or before it
    position = rank[m:] - 1
    inside = ew.logical_and(ew.ge(values, edges[0]), ew.le(values, edges[m - 1]))
    return ew.clamp(position, 0, m - 2), inside


def _run(input, bins, range, weight, density, name):
    """Check torch's arguments, build the edges, run the op: (hist, [edges per dim])."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        word = _WORD.get(input.dtype.name, input.dtype.name)
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{word}': histograms take floating point "
                                  "tensors; convert with .float()")
    if input.ndim < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    dims = input.shape[-1]
    points = input.detach().reshape(-1, dims)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the same shape as the "
                               "input tensor excluding its innermost dimension, but got input with shape "
                               f"{list(input.shape)} and weight with shape {list(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError("torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should "
                               f"have the same dtype, but got input({_C_NAME[input.dtype.name]}), and "
                               f"weight({_C_NAME[weight.dtype.name]})")
    edges = _edges(points, bins, range, dims)
    counts = tuple(e.shape[0] - 1 for e in edges)
    with no_grad():
        hist = call_op("histogramdd", (points, None if weight is None else weight.detach().reshape(-1), cat(edges)),
                       {"bins": counts, "density": bool(density)})
    if _grad.enabled and (input.requires_grad or (weight is not None and weight.requires_grad)):
        record(hist, TABLE["histogramdd"], (input,))  # in the graph, as torch's, but not differentiable
    return hist, edges


def _edges(points, bins, range, dims):
    if isinstance(bins, (Tensor, int)):
        bins = [bins] * dims if isinstance(bins, int) else [bins]
    bins = list(bins)
    if len(bins) != dims:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the input.")
    if range is not None and len(range) != 2 * dims:
        raise RuntimeError(f"torch.histogramdd: for a {dims}-dimensional histogram range should have {2 * dims} "
                           f"elements, but got {len(range)}")
    out = []
    for d, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.ndim != 1:
                raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got {b.ndim} "
                                   f"dimensions in the bins tensor for dimension {d}")
            if b.shape[0] < 2:
                raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b.shape[0] - 1} for dimension {d}")
            if b.dtype is not points.dtype:
                raise RuntimeError("torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
                                   f"got input with dtype {_C_NAME[points.dtype.name]} and bins for dimension {d} "
                                   f"with dtype {_C_NAME[b.dtype.name]}")
            out.append(b.detach())
            continue
        if b <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b} for dimension {d}")
        if range is not None:
            lo, hi = float(range[2 * d]), float(range[2 * d + 1])
        elif points.shape[0]:
            column = points[:, d]
            lo, hi = float(column.min().item()), float(column.max().item())  # read back, as torch
        else:
            lo, hi = 0.0, 1.0
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} for "
                               f"dimension {d}")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo:g}, {hi:g}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        # torch's linspace: the data's min and max are exactly the first and last edges
        out.append(linspace(lo, hi, b + 1, dtype=points.dtype, device=points._backend.name))
    return out


def _histogramdd(input, bins=10, *, range: Sequence[float] | None = None, weight=None, density=False):
    hist, edges = _run(input, bins, range, weight, density, "histogramdd")
    return histogramdd_result(hist, tuple(edges))


# the public function is written out: it builds the edges (reading the data's range back) before
# the op runs, and the op's node (torch's: in the graph, not differentiable) goes on the hist
@op(front=written_out(_histogramdd), derivative=_no_derivative, exposed=("plugtorch",),
    dtypes="floating only; hist in input's dtype")
def histogramdd(input, weight, edges, *, bins, density):
    """The D-dimensional histogram of the points in ``input``'s last dim: (hist, bin_edges), one
    edge tensor per dim; ``bins`` an int, one int per dim, or each dim's edges.

    The op: counts of the (N, D) points ``input`` (with ``weight``: their summed weights) in the grid of
    bins whose edges along each dim d are the next ``bins[d] + 1`` entries of ``edges``; with
    ``density``, normalised to integrate to 1."""
    device = input._backend.name
    flat = zeros(input.shape[0], dtype=int64, device=device)
    keep = ones(input.shape[0], dtype=bool_, device=device)
    start, widths = 0, []
    for d, n in enumerate(bins):
        e = edges[start:start + n + 1]
        start += n + 1
        position, inside = _bin_along(input[:, d], e)
        flat = flat * n + position
        keep = ew.logical_and(keep, inside)
        widths.append(e[1:] - e[:-1])
    w = ones(input.shape[0], dtype=input.dtype, device=device) if weight is None else weight
    size = math.prod(bins)
    hist = scatter_add(zeros(size, dtype=input.dtype, device=device), 0, ew.where(keep, flat, 0),
                       ew.where(keep, w, 0)).reshape(tuple(bins))
    if density:
        hist = hist / hist.sum()
        for d, width in enumerate(widths):
            hist = hist / width.reshape([-1 if i == d else 1 for i in builtins.range(len(bins))])
    return hist


@public("plugtorch", "Tensor")
def histogram(input, bins=100, *, range: Sequence[float] | None = None, weight=None, density=False):
    """(hist, bin_edges): the histogram of ``input``'s values in ``bins`` equal bins over ``range``
    (default: the data's min and max), or in the bins whose edges the 1-D tensor ``bins`` gives."""
    if not isinstance(input, Tensor):
        raise TypeError(f"histogram(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if isinstance(bins, Tensor) and bins.ndim != 1:
        raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got {bins.ndim} "
                           "dimensions in the bins tensor for dimension 0")
    if range is not None and len(range) != 2:
        raise RuntimeError(f"torch.histogramdd: for a 1-dimensional histogram range should have 2 elements, "
                           f"but got {len(range)}")
    w = weight
    if w is not None and tuple(w.shape) != tuple(input.shape):
        raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the same shape as the "
                           f"input tensor excluding its innermost dimension, but got input with shape "
                           f"{list(input.reshape(-1, 1).shape)} and weight with shape {list(w.shape)}")
    hist, edges = _run(input.reshape(-1, 1), [bins], range, None if w is None else w.reshape(-1), density,
                       "histogram")
    return histogram_result(hist, edges[0])


__all__ = ["histogram", "histogramdd"]
