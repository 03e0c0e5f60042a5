"""Turning a list of samples into a batch: ``default_collate`` and ``default_convert``."""
from __future__ import annotations

import collections.abc
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.dtypes import float64
from ...core.ops.creation import as_tensor, tensor
from ...core.ops.shape import stack
from ...core.tensor import Tensor


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch, recursing into tuples, lists and dicts.

    Tensors and NumPy arrays are stacked along a new first dimension; Python
    floats become a float64 tensor and ints an int64 tensor (as in PyTorch);
    strings stay a list; a tuple of fields becomes a list of batched fields.
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUV":
            raise TypeError(f"default_collate: NumPy arrays of dtype {elem.dtype} cannot be "
                            "batched into a tensor")
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        return as_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, (bool, int)):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        out = {key: default_collate([d[key] for d in batch]) for key in elem}
        # the sample's own mapping class (dict, OrderedDict, ...), which takes a dict; the checker
        # only knows it as Mapping, whose constructor takes nothing
        mapping_type: Any = type(elem)
        try:
            return mapping_type(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                    f"lists; found {type(elem)}")


def default_convert(data: Any) -> Any:
    """Convert NumPy arrays (also inside containers) to tensors; leave everything else as is."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUV":
        return as_tensor(data)
    if isinstance(data, np.generic):
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        mapping_type: Any = type(data)  # a concrete mapping class, as in default_collate
        return mapping_type({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data
