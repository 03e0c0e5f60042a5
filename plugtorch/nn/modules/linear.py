"""``Linear`` (an affine map) and ``Identity``."""
from __future__ import annotations

import math

import plugtorch

from ...core.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments (a placeholder)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features).

    Initialised as torch does: weight by ``kaiming_uniform_(a=sqrt(5))``, i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and bias by the same bound.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, generator=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(plugtorch.empty(out_features, in_features, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(plugtorch.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound, generator=generator)

    def forward(self, input):
        try:
            return F.linear(input, self.weight, self.bias)
        except RuntimeError:
            # the layer's own words for a wrong input size, checked only once linear has refused
            # (not before the call: two shape reads on every call of every layer)
            if isinstance(input, Tensor) and (input.ndim == 0 or input.shape[-1] != self.in_features):
                raise RuntimeError(
                    f"Linear(in_features={self.in_features}, out_features={self.out_features}): expected "
                    f"input of shape (*, {self.in_features}), got {list(input.shape)}; check the "
                    f"previous layer's output size (e.g. flatten images before a Linear layer)"
                ) from None
            raise

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
