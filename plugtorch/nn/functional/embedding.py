"""``embedding`` (a learnable table lookup); ``linear`` is an op (``core/ops/linalg.py``)."""
from __future__ import annotations

import plugtorch

from ...core.debug import checks_values


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` picked by the integer ``input``; the row ``padding_idx`` gets no gradient.

    ``max_norm``: looked-up rows whose ``norm_type``-norm exceeds it are rescaled to it
    in place first (torch's embedding_renorm_). ``scale_grad_by_freq``: each row's
    gradient is divided by how often it occurs in ``input``. Indices outside the table
    raise IndexError on host-memory backends and, on device backends, in debug mode
    (``plugtorch.set_debug``); otherwise the backend's indexing decides, with no sync.
    """
    if sparse:
        raise ValueError(
            "embedding(): sparse=True needs sparse gradients, which plugtorch does not have; "
            "use sparse=False (dense gradients)"
        )
    if input.dtype.is_floating_point or input.dtype is plugtorch.bool:
        raise RuntimeError(
            f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            f"Long, Int; but got {input.dtype.name} instead (while checking arguments for embedding)"
        )
    n = weight.shape[0]
    if input.numel() and checks_values(input):
        _check_indices(input, n)
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    out = weight[input]
    if scale_grad_by_freq and input.numel():
        flat = input.reshape(-1).to(plugtorch.int64)
        counts = plugtorch.zeros(n, dtype=weight.dtype, device=weight.device).scatter_add(
            0, flat, plugtorch.ones(flat.shape, dtype=weight.dtype, device=weight.device))
        inv = (1.0 / counts[input]).unsqueeze(-1)
        out = out.detach() + (out - out.detach()) * inv  # same values, gradient scaled
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += n
        # Lookups of the padding row pass no gradient back, so training never moves it.
        out = plugtorch.where((input != padding_idx).unsqueeze(-1), out, out.detach())
    return out


def _check_indices(input, n):
    # Reads the indices on the host: free on host memory; on a device backend a sync per
    # call, so it runs there only in debug mode (see core.debug). One transfer for both.
    lo, hi = plugtorch.stack((input.min(), input.max())).tolist()
    if lo < 0 or hi >= n:
        raise IndexError(
            f"embedding(): index out of range: got indices in [{lo}, {hi}] for an embedding "
            f"table of {n} rows; indices must lie in [0, {n - 1}]"
        )


def _renorm_rows(weight, input, max_norm, norm_type):
    with plugtorch.no_grad():
        rows = input.reshape(-1).to(plugtorch.int64)
        picked = weight[rows]
        norms = plugtorch.norm(picked, norm_type, dim=1, keepdim=True)
        scale = plugtorch.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[rows] = picked * scale
