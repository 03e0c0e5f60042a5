"""Flatten parameters into one vector and back (for second-order methods, line searches...)."""
from __future__ import annotations

import plugtorch

from ...core.tensor import Tensor


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter, flattened and concatenated in order."""
    return plugtorch.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters) -> None:
    """Point each parameter's data at its slice of ``vec`` (inverse of parameters_to_vector)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected plugtorch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise RuntimeError(
            f"vector_to_parameters: expected a 1-D vector of {total} elements (the parameters' "
            f"total), got shape {list(vec.shape)}"
        )
    pointer = 0
    for p in params:
        n = p.numel()
        p.data = vec[pointer:pointer + n].reshape(p.shape).detach()
        pointer += n
