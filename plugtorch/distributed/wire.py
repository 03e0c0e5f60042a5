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


# Each codec runs over CHUNK elements at a time into preallocated scratch: a bucket is
# megabytes, and a dozen whole-array passes with fresh temporaries spend their time in page
# faults and main memory (a 25 MB float16 bucket: encode 25 -> 6 ms, summing 45 -> 13 ms).
CHUNK = 1 << 15


class _Scratch:
    """Work arrays of one chunk (uint32, float32, a mask), sliced to a shorter last chunk."""

    def __init__(self, n: int):
        m = min(n, CHUNK)
        self.u = (np.empty(m, np.uint32), np.empty(m, np.uint32))
        self.f = (np.empty(m, np.float32), np.empty(m, np.float32))
        self.mask = np.empty(m, bool)
        self.spare = np.empty(m, np.uint32)  # the encoders' own: add_into hands them s.f[0] as input


def _chunks(n: int):
    for start in range(0, n, CHUNK):
        yield start, min(start + CHUNK, n)


def _encoder(encode_chunk):
    def encode(values: np.ndarray) -> np.ndarray:
        values = np.ascontiguousarray(values, dtype=np.float32)
        bits, out = values.reshape(-1).view(np.uint32), np.empty(values.shape, np.uint16)
        flat, s = out.reshape(-1), _Scratch(values.size)
        for a, b in _chunks(values.size):
            encode_chunk(bits[a:b], flat[a:b], s, b - a)
        return out
    encode.__doc__ = encode_chunk.__doc__
    return encode


def _decoder(decode_chunk):
    def decode(words: np.ndarray) -> np.ndarray:
        words = np.ascontiguousarray(words, dtype=np.uint16)
        out = np.empty(words.shape, np.float32)
        src, flat = words.reshape(-1), out.reshape(-1)
        for a, b in _chunks(words.size):
            decode_chunk(src[a:b], flat[a:b])
        return out
    decode.__doc__ = decode_chunk.__doc__
    return decode


# -- bfloat16: the top half of a float32 -------------------------------------------------------

def _bf16_encode(bits, out, s, m):
    """float32 -> the uint16 words of the nearest bfloat16 (ties to even; NaN stays NaN)."""
    word = np.right_shift(bits, 16, out=s.u[0][:m])
    word &= 1
    word += 0x7FFF
    word += bits               # wraps only for NaNs with the top mantissa bits set, mended below
    word >>= 16
    np.copyto(out, word, casting="unsafe")
    nan = np.isnan(bits.view(np.float32), out=s.mask[:m])
    if nan.any():
        out[nan] = (bits[nan] >> 16).astype(np.uint16) | 0x0040


def _bf16_decode(words, out):
    """uint16 bfloat16 words -> float32 (exact)."""
    np.left_shift(words, 16, out=out.view(np.uint32), dtype=np.uint32)


bf16_encode, bf16_decode = _encoder(_bf16_encode), _decoder(_bf16_decode)


# -- float16 ---------------------------------------------------------------------------------

_F16_TO_F32: np.ndarray | None = None           # all 65536 float16 values, widened
_NORMAL_BIAS = np.uint32((((15 - 127) << 23) + 0xFFF) & 0xFFFFFFFF)
_SUBNORMAL_MAGIC = np.uint32(126 << 23)          # 0.5: adding it aligns float16's subnormal bits


def _f16_encode(bits, out, s, m):
    """float32 -> the uint16 words of the nearest float16 (ties to even), branch-free.

    F. Giesen's float_to_half_fast3_rtne, on whole arrays: normal results round by
    integer arithmetic on the bits, subnormal ones by one float32 addition.
    """
    absolute = np.bitwise_and(bits, np.uint32(0x7FFFFFFF), out=s.u[0][:m])
    word = np.right_shift(absolute, 13, out=s.u[1][:m])
    word &= 1
    word += _NORMAL_BIAS
    word += absolute
    word >>= 13
    small = np.less(absolute, np.uint32(113 << 23), out=s.mask[:m])
    if small.any():  # gradients have many: computed for all and selected, cheaper than indexing
        with np.errstate(invalid="ignore"):  # NaN lanes compute garbage here; they are not selected
            sub = np.add(absolute.view(np.float32), np.float32(0.5),
                         out=s.spare[:m].view(np.float32)).view(np.uint32)
        sub -= _SUBNORMAL_MAGIC
        np.copyto(word, sub, where=small)
    big = np.greater_equal(absolute, np.uint32(143 << 23), out=s.mask[:m])
    if big.any():  # overflow to infinity; NaN stays NaN
        word[big] = np.where(absolute[big] > np.uint32(0x7F800000), 0x7E00, 0x7C00)
    sign = np.right_shift(bits, 16, out=absolute)
    sign &= np.uint32(0x8000)
    word |= sign
    np.copyto(out, word, casting="unsafe")


def _f16_decode(words, out):
    """uint16 float16 words -> float32 (exact; a table lookup)."""
    global _F16_TO_F32
    if _F16_TO_F32 is None:
        _F16_TO_F32 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    np.take(_F16_TO_F32, words, out=out)


f16_encode, f16_decode = _encoder(_f16_encode), _decoder(_f16_decode)

CODECS = {"float16": (f16_encode, f16_decode), "bfloat16": (bf16_encode, bf16_decode)}
_CHUNK_CODECS = {"float16": (_f16_encode, _f16_decode), "bfloat16": (_bf16_encode, _bf16_decode)}


def add_into(wire_dtype: str, incoming: np.ndarray, accumulator: np.ndarray) -> None:
    """``accumulator += incoming`` on 16-bit words of ``wire_dtype``, rounding the sum to it."""
    encode, decode = _CHUNK_CODECS[wire_dtype]
    src, acc = incoming.reshape(-1), accumulator.reshape(-1)
    s = _Scratch(acc.size)
    with np.errstate(over="ignore"):  # a sum past the largest value is inf, as in torch
        for a, b in _chunks(acc.size):
            m = b - a
            total, other = s.f[0][:m], s.f[1][:m]
            decode(src[a:b], total)
            decode(acc[a:b], other)
            total += other
            encode(total.view(np.uint32), acc[a:b], s, m)


def round_to(tensor, wire_dtype: str) -> None:
    """Round ``tensor`` in place as a one-process all-reduce on ``wire_dtype`` would."""
    from ..core.grad_mode import no_grad
    from ..core.ops.creation import from_numpy
    encode, decode = CODECS[wire_dtype]
    rounded = decode(encode(tensor.detach().numpy()))
    with no_grad():
        tensor.copy_(from_numpy(rounded).to(tensor.device))
