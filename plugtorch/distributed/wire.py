"""16-bit floats on the wire: the number formats of ``fp16_compress_hook`` and
``bf16_compress_hook``.

A compressed bucket exists only on the wire: each float32 is rounded to the 16-bit
format (round to nearest even, as torch's ``.to(torch.float16)`` / ``.to(torch.bfloat16)``),
the 16-bit words are reduced with a sum that rounds after every addition (as a sum of
float16 or bfloat16 tensors does), and the result is widened back into the float32
tensor. plugtorch has no bfloat16 tensor dtype, hence the wire format; and float16 goes
the same way because these conversions run at the same speed for every value, where
NumPy's float32 -> float16 cast takes ~25x longer on the tiny values gradients are
made of (float16 subnormals). These helpers work on NumPy arrays; the MPI plugin uses
them on the arrays it hands to MPI.
"""
from __future__ import annotations

import numpy as np

WIRE_DTYPES = ("float16", "bfloat16")


def check(wire_dtype: str | None, dtype, op_name: str) -> None:
    """Raise unless ``wire_dtype`` can carry a ``dtype`` tensor reduced with ``op_name``."""
    if wire_dtype is None:
        return
    if wire_dtype not in WIRE_DTYPES:
        raise ValueError(f"all_reduce: unknown wire_dtype {wire_dtype!r}; plugtorch offers {WIRE_DTYPES}")
    if dtype.name != "float32" or op_name not in ("SUM", "AVG"):
        raise TypeError(f"all_reduce(wire_dtype={wire_dtype!r}) reduces float32 tensors with SUM or AVG; got "
                        f"{dtype.name} with {op_name}")


# -- bfloat16: the top half of a float32 -------------------------------------------------------

def bf16_encode(values: np.ndarray) -> np.ndarray:
    """float32 -> the uint16 words of the nearest bfloat16 (ties to even; NaN stays NaN)."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    bits = values.view(np.uint32)
    word = bits >> 16          # in place from here: a bucket is megabytes
    word &= 1
    word += 0x7FFF
    word += bits               # wraps only for negative NaNs, mended below
    word >>= 16
    rounded = word.astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = (bits[nan] >> 16).astype(np.uint16) | 0x0040
    return rounded


def bf16_decode(words: np.ndarray) -> np.ndarray:
    """uint16 bfloat16 words -> float32 (exact)."""
    wide = np.asarray(words, dtype=np.uint16).astype(np.uint32)
    wide <<= 16
    return wide.view(np.float32)


# -- float16 ---------------------------------------------------------------------------------

_F16_TO_F32: np.ndarray | None = None           # all 65536 float16 values, widened
_NORMAL_BIAS = np.uint32((((15 - 127) << 23) + 0xFFF) & 0xFFFFFFFF)
_SUBNORMAL_MAGIC = np.uint32(126 << 23)          # 0.5: adding it aligns float16's subnormal bits


def f16_encode(values: np.ndarray) -> np.ndarray:
    """float32 -> the uint16 words of the nearest float16 (ties to even), branch-free.

    F. Giesen's float_to_half_fast3_rtne, on whole arrays: normal results round by
    integer arithmetic on the bits, subnormal ones by one float32 addition.
    """
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    absolute = bits & np.uint32(0x7FFFFFFF)
    word = absolute >> 13
    word &= 1
    word += _NORMAL_BIAS
    word += absolute
    word >>= 13
    small = absolute < np.uint32(113 << 23)
    if small.any():
        word[small] = (absolute[small].view(np.float32) + np.float32(0.5)).view(np.uint32) - _SUBNORMAL_MAGIC
    big = absolute >= np.uint32(143 << 23)
    if big.any():  # overflow to infinity; NaN stays NaN
        word[big] = np.where(absolute[big] > np.uint32(0x7F800000), 0x7E00, 0x7C00)
    word |= (bits >> 16) & np.uint32(0x8000)
    return word.astype(np.uint16)


def f16_decode(words: np.ndarray) -> np.ndarray:
    """uint16 float16 words -> float32 (exact; a table lookup)."""
    global _F16_TO_F32
    if _F16_TO_F32 is None:
        _F16_TO_F32 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    return np.take(_F16_TO_F32, np.asarray(words, dtype=np.uint16))


CODECS = {"float16": (f16_encode, f16_decode), "bfloat16": (bf16_encode, bf16_decode)}


def add_into(wire_dtype: str, incoming: np.ndarray, accumulator: np.ndarray) -> None:
    """``accumulator += incoming`` on 16-bit words of ``wire_dtype``, rounding the sum to it."""
    encode, decode = CODECS[wire_dtype]
    total = decode(incoming)
    with np.errstate(over="ignore"):  # a sum past the largest value is inf, as in torch
        total += decode(accumulator)
    accumulator[...] = encode(total)


def round_to(tensor, wire_dtype: str) -> None:
    """Round ``tensor`` in place as a one-process all-reduce on ``wire_dtype`` would."""
    from ..core.grad_mode import no_grad
    from ..core.ops.creation import from_numpy
    encode, decode = CODECS[wire_dtype]
    rounded = decode(encode(tensor.detach().numpy()))
    with no_grad():
        tensor.copy_(from_numpy(rounded).to(tensor.device))
