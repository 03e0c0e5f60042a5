"""torch's legacy tensor types: ``plugtorch.FloatTensor``, ``LongTensor``, ... .

As in torch they are not subclasses of Tensor but markers of a dtype on the host: calling
one makes a plain Tensor (``FloatTensor(2, 3)`` of that shape, ``FloatTensor([1, 2])`` from
data), ``isinstance(t, plugtorch.FloatTensor)`` asks whether ``t`` is a float32 tensor on the
host (a CUDA tensor is not one, as in torch), and ``t.type(plugtorch.DoubleTensor)`` casts.
Their names print as ``plugtorch.FloatTensor``, the string ``Tensor.type()`` returns.
"""
from __future__ import annotations

import numbers

from . import dtypes
from .tensor import Size, Tensor

_USAGE = ("use {name}(*sizes) for an uninitialised tensor of that shape, {name}(data) for a "
          "tensor of sequence data, or {name}(tensor) for a tensor of dtype {dtype}")


class _LegacyTensorType(type):
    """The metaclass: what calling and ``isinstance`` do with ``FloatTensor`` and its kin."""

    dtype: dtypes.dtype

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.is_cpu

    def __subclasscheck__(cls, sub) -> bool:
        return sub is cls

    def __call__(cls, *args, size=None, device=None):
        from .ops.creation import empty, tensor
        name = f"plugtorch.{cls.__name__}"
        usage = _USAGE.format(name=name, dtype=cls.dtype.name)
        if size is not None:
            if args:
                raise TypeError(f"{name}() got both sizes and size=; {usage}")
            args = (tuple(size),)
        if not args:
            return empty(0, dtype=cls.dtype, device=device)
        if len(args) == 1:
            arg = args[0]
            if isinstance(arg, Tensor):
                if arg.dtype is not cls.dtype:
                    raise TypeError(f"{name}(tensor): expected a tensor of dtype {cls.dtype.name}, got "
                                    f"{arg.dtype.name}; convert it with .to(plugtorch.{cls.dtype.name})")
                return arg if device is None else arg.to(device)
            if isinstance(arg, Size):
                return empty(*arg, dtype=cls.dtype, device=device)
            if isinstance(arg, numbers.Integral) and not isinstance(arg, bool):
                return empty(int(arg), dtype=cls.dtype, device=device)
            if isinstance(arg, (numbers.Number, str, bytes)):
                raise TypeError(f"new(): data must be a sequence (got {type(arg).__name__}); {usage}")
            return tensor(arg, dtype=cls.dtype, device=device)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return empty(*(int(a) for a in args), dtype=cls.dtype, device=device)
        got = ", ".join(type(a).__name__ for a in args)
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}); {usage}")


def _legacy(name: str, dtype) -> _LegacyTensorType:
    cls = _LegacyTensorType(name, (), {"__module__": "plugtorch", "__qualname__": name, "dtype": dtype,
                                       "is_cuda": False, "is_sparse": False,
                                       "__doc__": f"torch's legacy type of {dtype.name} host tensors."})
    return cls


FloatTensor = _legacy("FloatTensor", dtypes.float32)
DoubleTensor = _legacy("DoubleTensor", dtypes.float64)
HalfTensor = _legacy("HalfTensor", dtypes.float16)
LongTensor = _legacy("LongTensor", dtypes.int64)
IntTensor = _legacy("IntTensor", dtypes.int32)
ShortTensor = _legacy("ShortTensor", dtypes.int16)
CharTensor = _legacy("CharTensor", dtypes.int8)
ByteTensor = _legacy("ByteTensor", dtypes.uint8)
BoolTensor = _legacy("BoolTensor", dtypes.bool_)

LEGACY_TYPES = (FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor, CharTensor,
                ByteTensor, BoolTensor)

__all__ = [t.__name__ for t in LEGACY_TYPES]
