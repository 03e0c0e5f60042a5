"""``linear`` and ``embedding``: the two lookups-and-products at the heart of most models."""
from __future__ import annotations

import plugtorch
from ...core.tensor import Tensor


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` with ``weight`` of shape (out_features, in_features)."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("linear(): input and weight must be Tensors")
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise RuntimeError(
            f"linear(): input's last dimension must equal weight's in_features: input shape "
            f"{list(input.shape)}, weight shape {list(weight.shape)} (out_features, in_features) "
            f"expects inputs of shape (*, {weight.shape[-1]})"
        )
    out = plugtorch.matmul(input, weight.t()) if weight.ndim == 2 else plugtorch.matmul(input, weight)
    return out if bias is None else out + bias


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` picked by the integer ``input``; the row ``padding_idx`` gets no gradient."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError(
            "embedding(): max_norm, scale_grad_by_freq and sparse are not supported by plugtorch; "
            "leave them at their defaults"
        )
    if input.dtype.is_floating_point or input.dtype is plugtorch.bool:
        raise RuntimeError(
            f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            f"Long, Int; but got {input.dtype.name} instead (while checking arguments for embedding)"
        )
    n = weight.shape[0]
    if input.numel():
        lo, hi = int(input.min()), int(input.max())
        if lo < 0 or hi >= n:
            raise IndexError(
                f"embedding(): index out of range: got indices in [{lo}, {hi}] for an embedding "
                f"table of {n} rows"
            )
    out = weight[input]
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += n
        # Lookups of the padding row pass no gradient back, so training never moves it.
        out = plugtorch.where((input != padding_idx).unsqueeze(-1), out, out.detach())
    return out
