"""``plugtorch.backends.cuda``: the switches scripts set for CUDA matmuls (kept for backends)."""
from __future__ import annotations

from ..cuda import is_available as is_built


class _Matmul:
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()

__all__ = ["is_built", "matmul"]
