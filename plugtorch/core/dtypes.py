"""plugtorch dtypes and PyTorch's type-promotion rules.

A dtype here is a backend-neutral name; each backend maps it to its native
dtype. Promotion follows ``torch.result_type``: operands are ranked by
priority (dimensioned tensors, then zero-dim tensors, then Python scalars),
and a lower-priority operand only changes the result when it belongs to a
higher *category* (bool < integer < floating < complex).
"""
from __future__ import annotations

import builtins
from functools import cache, lru_cache

__all__ = [
    "dtype", "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
    "bool_", "get_default_dtype", "set_default_dtype", "promote_types", "result_type",
    "dtype_from_name", "ALL_DTYPES", "complex64", "complex128", "to_complex", "to_real",
]

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type. Instances are singletons; compare with ``is`` or ``==``."""

    __slots__ = ("name", "itemsize", "category", "is_floating_point", "is_complex", "is_signed", "_rank")

    def __init__(self, name: str, itemsize: int, category: int, rank: int, is_signed: bool = True):
        self.name = name
        self.itemsize = itemsize
        self.category = category
        self.is_floating_point = category == _FLOAT
        self.is_complex = category == _COMPLEX
        self.is_signed = is_signed
        self._rank = rank  # order within a category, for promotion

    def __repr__(self) -> str:
        return f"plugtorch.{self.name}"

    def __reduce__(self):
        return (dtype_from_name, (self.name,))


bool_ = dtype("bool", 1, _BOOL, 0, is_signed=False)
uint8 = dtype("uint8", 1, _INT, 0, is_signed=False)
int8 = dtype("int8", 1, _INT, 1)
int16 = dtype("int16", 2, _INT, 2)
int32 = dtype("int32", 4, _INT, 3)
int64 = dtype("int64", 8, _INT, 4)
float16 = dtype("float16", 2, _FLOAT, 0)
bfloat16 = dtype("bfloat16", 2, _FLOAT, 0)
float32 = dtype("float32", 4, _FLOAT, 1)
float64 = dtype("float64", 8, _FLOAT, 2)
complex64 = dtype("complex64", 8, _COMPLEX, 1)
complex128 = dtype("complex128", 16, _COMPLEX, 2)

ALL_DTYPES = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"float": float32, "double": float64, "long": int64, "int": int32,
                 "half": float16, "short": int16, "char": int8, "byte": uint8,
                 "cfloat": complex64, "cdouble": complex128})

_default_float = float32


def dtype_from_name(name: str) -> dtype:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(f"unknown dtype {name!r}; known dtypes: {sorted(set(_BY_NAME))}") from None


def get_default_dtype() -> dtype:
    return _default_float


def set_default_dtype(d: dtype) -> None:
    global _default_float
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point dtypes are supported, got {d!r}")
    _default_float = d
    _result_type_key.cache_clear()


def to_complex(d: dtype) -> dtype:
    """The complex dtype whose parts are ``d`` (float64 -> complex128; other floats -> complex64,
    plugtorch having no complex32)."""
    return d if d.is_complex else (complex128 if d is float64 else complex64)


def to_real(d: dtype) -> dtype:
    """The dtype of a complex dtype's parts (complex64 -> float32); others unchanged."""
    return (float64 if d is complex128 else float32) if d.is_complex else d


def _combine(higher: dtype, lower: dtype) -> dtype:
    """torch's combine_categories for a complex operand meeting a float one: the float's
    precision is kept (float64 with complex64 is complex128)."""
    if lower.is_complex and higher.category == _FLOAT:
        return to_complex(higher)
    return higher if higher.category >= lower.category else lower


@cache
def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype both ``a`` and ``b`` convert to safely (torch.promote_types)."""
    if a is b:
        return a
    if _COMPLEX in (a.category, b.category) and _FLOAT in (a.category, b.category):
        real = promote_types(to_real(a), to_real(b))
        return to_complex(real)
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == _INT and (a is uint8 or b is uint8):
        other = b if a is uint8 else a
        # uint8 with a signed type needs the next signed type that holds 0..255.
        return int16 if other in (int8,) else other
    if a._rank == b._rank:  # float16 and bfloat16
        return float32
    return a if a._rank > b._rank else b


def _scalar_dtype(value) -> dtype:
    if isinstance(value, builtins.bool):
        return bool_
    if isinstance(value, builtins.int):
        return int64
    if isinstance(value, builtins.float):
        return _default_float
    if isinstance(value, builtins.complex):
        return to_complex(_default_float)
    raise TypeError(f"expected a Tensor or a Python number, got {type(value).__name__}")


@lru_cache(maxsize=4096)
def _result_type_key(dims: tuple, zero_dims: tuple, scalars: tuple) -> dtype:
    def fold(ds):
        out = None
        for d in ds:
            out = d if out is None else promote_types(out, d)
        return out

    result = fold(dims)
    for group, is_scalar in ((zero_dims, False), (scalars, True)):
        g = fold(group)
        if g is None:
            continue
        if result is None:
            result = g
        elif g.category > result.category:
            # A Python float meeting an integer tensor gives the default dtype,
            # not float64; a zero-dim tensor keeps its own dtype.
            if g.is_complex:
                result = _combine(result, g)
            elif is_scalar and g.category == _FLOAT:
                result = _default_float
            elif is_scalar and g.category == _INT:
                result = int64
            else:
                result = g
    return result


def result_type(*operands) -> dtype:
    """torch.result_type over tensors (anything with ``dtype`` and ``ndim``) and Python scalars."""
    dims: list[dtype] = []
    zero_dims: list[dtype] = []
    scalars: list[dtype] = []
    for op in operands:
        d = getattr(op, "dtype", None)
        if isinstance(d, dtype):
            (dims if op.ndim else zero_dims).append(d)
        else:
            scalars.append(_scalar_dtype(op))
    if not (dims or zero_dims or scalars):
        raise TypeError("result_type() needs at least one operand")
    return _result_type_key(tuple(dims), tuple(zero_dims), tuple(scalars))
