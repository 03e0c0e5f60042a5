"""torch's questions about tensors and dtypes, and its process-wide switches: equal,
is_tensor, is_floating_point, is_nonzero, numel, can_cast, finfo, iinfo, the default
device, and the deterministic-algorithms flag.

None is an op: each answers from shapes, dtypes or (equal, is_nonzero) one value read to the
host, as torch's do.
"""
from __future__ import annotations

import numpy as np

from .. import device as _device
from ..dtypes import bool_, dtype, get_default_dtype
from ..optable import public
from ..tensor import Tensor


@public("plugtorch", "Tensor")
def equal(input, other) -> bool:
    """True if both tensors have the same shape and equal elements (NaN equals nothing)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"equal(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool((input == other).all().item())


@public("plugtorch")
def is_tensor(obj) -> bool:
    """Whether ``obj`` is a plugtorch Tensor."""
    return isinstance(obj, Tensor)


def _tensor_arg(name, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


@public("plugtorch")
def is_floating_point(input) -> bool:
    """Whether the tensor's dtype is a floating dtype."""
    _tensor_arg("is_floating_point", input)
    return input.dtype.is_floating_point


@public("plugtorch")
def numel(input) -> int:
    """The number of elements of the tensor."""
    _tensor_arg("numel", input)
    return input.numel()


@public("plugtorch", "Tensor")
def is_nonzero(input) -> bool:
    """The truth of a one-element tensor."""
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


@public("plugtorch")
def can_cast(from_, to) -> bool:
    """Whether torch's type promotion allows casting ``from_`` to ``to`` (no floating to
    integral, no complex to real, nothing but bool to bool)."""
    for name, d in (("from_", from_), ("to", to)):
        if not isinstance(d, dtype):
            raise TypeError(f"can_cast(): argument '{name}' must be torch.dtype, not {type(d).__name__}")
    if from_.is_complex and not to.is_complex:
        return False
    if from_.is_floating_point and not (to.is_floating_point or to.is_complex):
        return False
    return not (from_ is not bool_ and to is bool_)


class finfo:
    """The limits of a floating dtype (torch.finfo): bits, eps, max, min, tiny,
    smallest_normal, resolution, dtype."""

    def __init__(self, type=None):
        type = get_default_dtype() if type is None else type
        if not isinstance(type, dtype) or not (type.is_floating_point or type.is_complex):
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        info = _np_finfo(type)
        self.dtype = type.name
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # NumPy's float16 resolution is 0.001 rounded to float16

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


def _np_finfo(d):
    if d.name == "bfloat16":
        # NumPy has no bfloat16: float32's exponent range with 8 significant bits
        f32 = np.finfo(np.float32)

        class _BF16:
            bits, eps, max, min = 16, 2.0 ** -7, 3.3895313892515355e38, -3.3895313892515355e38
            smallest_normal, precision = float(f32.smallest_normal), 2
        return _BF16
    name = {"complex64": "float32", "complex128": "float64"}.get(d.name, d.name)
    return np.finfo(getattr(np, name))


class iinfo:
    """The limits of an integral dtype (torch.iinfo): bits, max, min, dtype."""

    def __init__(self, type):
        if not isinstance(type, dtype) or type.is_floating_point or type.is_complex:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        if type is bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        self.dtype = type.name
        info = np.iinfo(getattr(np, type.name))
        self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"  # torch prints them as floats


public("plugtorch")(finfo)
public("plugtorch")(iinfo)


@public("plugtorch")
def set_default_device(device) -> None:
    """Make ``device`` (a backend name, alias or ``device``; None: the NumPy backend) where new
    tensors are created."""
    _device.use("numpy" if device is None else str(device))


@public("plugtorch")
def get_default_device():
    """The device new tensors are created on."""
    return _device.Device(_device.current_backend())


_DETERMINISTIC = {"on": False, "warn_only": False}


@public("plugtorch")
def use_deterministic_algorithms(mode, *, warn_only=False) -> None:
    """Record torch's deterministic-algorithms switch. plugtorch's kernels are deterministic on
    the host (scatter-add sums in index order), so the switch changes no result there."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    _DETERMINISTIC["on"], _DETERMINISTIC["warn_only"] = mode, bool(warn_only)


@public("plugtorch")
def are_deterministic_algorithms_enabled() -> bool:
    """Whether ``use_deterministic_algorithms(True)`` is in force."""
    return _DETERMINISTIC["on"]


@public("plugtorch")
def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether the deterministic switch was set with ``warn_only=True``."""
    return _DETERMINISTIC["warn_only"]

