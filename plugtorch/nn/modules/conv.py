"""Convolution layers: ``Conv1d``/``Conv2d``/``Conv3d`` and ``ConvTranspose1d``/``2d``/``3d``.

One base class per kind holds torch's constructor checks, parameters and initialisation
(``kaiming_uniform_(a=sqrt(5))`` weight, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))); the
subclasses name the rank and the functional op. Non-zero ``padding_mode`` pads with
``F.pad`` (reflect, replicate, circular) before an unpadded convolution.
"""
from __future__ import annotations

import math

import plugtorch

from ...core.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _ntuple

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    _rank = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                 padding_mode, output_padding=0, device=None, dtype=None, generator=None) -> None:
        super().__init__()
        n = self._rank
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _ntuple(n)(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(n)(kernel_size)
        self.stride = _ntuple(n)(stride)
        self.padding = padding if isinstance(padding, str) else _ntuple(n)(padding)
        self.dilation = _ntuple(n)(dilation)
        self.transposed = self._transposed
        self.output_padding = _ntuple(n)(output_padding)
        self.groups = groups
        self.padding_mode = padding_mode
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(plugtorch.empty(*shape, device=device, dtype=dtype))
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

    def _check_input(self, input: Tensor) -> None:
        n = self._rank
        if input.ndim not in (n + 1, n + 2):
            raise RuntimeError(f"{self._get_name()}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) "
                               f"input, got shape {list(input.shape)}")
        c = input.shape[-n - 1]
        if c != self.in_channels:
            raise RuntimeError(
                f"{self._get_name()}(in_channels={self.in_channels}): expected input with {self.in_channels} "
                f"channels at dim {input.ndim - n - 1}, got {c} (input shape {list(input.shape)})"
            )

    def extra_repr(self) -> str:
        n = self._rank
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None,
                 generator=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype, generator)

    def _pad_widths(self):
        """F.pad widths (last dim first) for a non-zero padding_mode."""
        padding = self.padding
        if padding == "valid":
            pairs = [(0, 0)] * self._rank
        elif isinstance(padding, str):  # "same" (the constructor refuses other strings)
            pairs = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                     for k, d in zip(self.kernel_size, self.dilation)]
        else:
            pairs = [(p, p) for p in padding]
        return tuple(w for pair in reversed(pairs) for w in pair)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input(input)
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._rank - 1]
        if self.padding_mode != "zeros":
            widths = self._pad_widths()
            x = F.pad(input, widths, mode=self.padding_mode) if any(widths) else input
            return conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_Conv):
    """1-D convolution over (N, C, L); weight (out_channels, in_channels / groups, kL)."""
    _rank = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C, H, W); weight (out_channels, in_channels / groups, kH, kW)."""
    _rank = 2


class Conv3d(_Conv):
    """3-D convolution over (N, C, D, H, W); weight (out_channels, in_channels / groups, kD, kH, kW)."""
    _rank = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None, generator=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype, generator)

    def _output_padding(self, input, output_size):
        """The output_padding that makes the output ``output_size`` (torch's rule), else the module's."""
        if output_size is None:
            return self.output_padding
        n = self._rank
        size = list(output_size)
        if len(size) == n + 2 or (len(size) == n + 1 and input.ndim == n + 1):
            size = size[-n:]
        if len(size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have {n} or "
                             f"{n + 2} elements (got {len(output_size)})")
        out = []
        for i in range(n):
            low = ((input.shape[input.ndim - n + i] - 1) * self.stride[i] - 2 * self.padding[i]
                   + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            high = low + self.stride[i] - 1
            if not low <= size[i] <= high:
                raise ValueError(f"requested an output size of {size}, but valid sizes range from "
                                 f"{[low]} to {[high]} (for an input of {list(input.shape[input.ndim - n:])})")
            out.append(size[i] - low)
        return tuple(out)

    def forward(self, input: Tensor, output_size: list[int] | None = None) -> Tensor:
        self._check_input(input)
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._rank - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution; weight (in_channels, out_channels / groups, kL)."""
    _rank = 1


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution; weight (in_channels, out_channels / groups, kH, kW)."""
    _rank = 2


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution; weight (in_channels, out_channels / groups, kD, kH, kW)."""
    _rank = 3
