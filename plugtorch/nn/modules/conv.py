"""``Conv2d``: a learnable 2-D cross-correlation over (N, C, H, W) inputs."""
from __future__ import annotations

import math

import plugtorch
from ...core.ops._args import pair
from .. import functional as F, init
from ..parameter import Parameter
from .module import Module


# For each padding mode: the source index of every padded position, given positions
# i in [-lo, n + hi) of a dimension of size n.
_PAD_INDEX = {
    "circular": lambda i, n: i % n,
    "replicate": lambda i, n: plugtorch.clamp(i, 0, n - 1),
    "reflect": lambda i, n: (n - 1) - ((n - 1) - i.abs()).abs(),
}


def _pad_by_index(x, pads_h, pads_w, mode):
    """Pad the last two dims by gathering rows/columns (differentiable through indexing)."""
    for dim, (lo, hi) in ((-2, pads_h), (-1, pads_w)):
        n = x.shape[dim]
        if mode == "reflect" and max(lo, hi) >= n:
            raise RuntimeError(
                f"Conv2d: reflect padding ({lo}, {hi}) must be smaller than the input size {n} "
                f"of dimension {x.ndim + dim}"
            )
        if lo or hi:
            idx = _PAD_INDEX[mode](plugtorch.arange(-lo, n + hi, device=x.device), n)
            x = plugtorch.index_select(x, dim, idx)
    return x


class Conv2d(Module):
    """Weight (out_channels, in_channels / groups, kH, kW); torch's default initialisation
    (``kaiming_uniform_(a=sqrt(5))`` weight, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)))."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, generator=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PAD_INDEX and padding_mode != "zeros":
            raise ValueError(
                f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], "
                f"but got padding_mode='{padding_mode}'"
            )
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}"
                )
            if padding == "same" and any(s != 1 for s in pair(stride, "stride")):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride = pair(stride, "stride")
        self.padding = padding if isinstance(padding, str) else pair(padding, "padding")
        self.dilation = pair(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        kh, kw = self.kernel_size
        self.weight = Parameter(plugtorch.empty(out_channels, in_channels // groups, kh, kw,
                                                device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(plugtorch.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound, generator=generator)

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise RuntimeError(
                f"{self._get_name()}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                f"{list(input.shape)}"
            )
        c = input.shape[-3]
        if c != self.in_channels:
            raise RuntimeError(
                f"{self._get_name()}(in_channels={self.in_channels}): expected input with "
                f"{self.in_channels} channels at dim {input.ndim - 3}, got {c} (input shape "
                f"{list(input.shape)})"
            )
        if self.padding_mode != "zeros":
            ph, pw = self._padding_amounts()
            return F.conv2d(_pad_by_index(input, ph, pw, self.padding_mode), self.weight,
                            self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def _padding_amounts(self):
        """(top, bottom), (left, right) padding for a non-zero padding_mode."""
        if self.padding == "valid":
            return (0, 0), (0, 0)
        if self.padding == "same":
            out = []
            for k, d in zip(self.kernel_size, self.dilation):
                total = d * (k - 1)
                out.append((total // 2, total - total // 2))
            return tuple(out)
        return tuple((p, p) for p in self.padding)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s
