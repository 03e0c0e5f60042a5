"""Philox4x32-10 random numbers: the CuPy backend's generator and its NumPy reference.

CuPy has no PCG64 and keeps a generator's state in device memory, so the backend uses the
counter-based Philox4x32-10 (Salmon et al., SC'11; Random123), as PyTorch's CUDA generator
does. A :class:`PhiloxGenerator` is two host integers: ``seed`` (the 64-bit key, low word
first) and ``offset`` (how many 128-bit counters earlier draws consumed). A draw launches
one kernel of ``kernels/philox.cu`` over the counters ``offset, offset + 1, ...`` and the
host only advances ``offset``: nothing is read back from the device, and the state is plain
data for checkpoints and ``get_rng_state``.

Counter ``k`` is the 128-bit value ``(lo32(k), hi32(k), 0, 0)``; its block is four 32-bit
words ``w0..w3``. Element ``i`` of a draw at offset ``o`` comes from (the header of
``philox.cu`` gives the arithmetic, which this module repeats bit for bit):

* ``uniform_f32``, ``normal_f32`` -- four elements per counter, element ``i`` in counter
  ``o + i // 4``: uniform from word ``i % 4`` (24 bits), normal by Box-Muller on the pairs
  ``(w0, w1)`` and ``(w2, w3)`` (cos then sin of each);
* ``uniform_f64``, ``normal_f64``, ``randint_i64``, ``keys_u64`` -- two elements per
  counter, element ``i`` in counter ``o + i // 2``, made from the 64-bit words
  ``v0 = w0 | w1 << 32`` and ``v1 = w2 | w3 << 32``: uniform 53 bits of ``v[i % 2]``,
  randint ``low + v[i % 2] % (high - low)``, keys ``v[i % 2]``, normal by Box-Muller on
  ``(v0, v1)``.

A draw of ``n`` elements then advances ``offset`` by ``ceil(n / per_counter)``. The
reference (``reference_draw``) gives the same uniform, randint and key bits as the kernels;
normal agrees to a few ulp (it goes through each platform's log, sqrt, sin and cos).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .modules import THREADS, blocks

__all__ = ["M0", "M1", "W0", "W1", "PER_COUNTER", "counters_for", "philox4x32_10", "stream_blocks",
           "uniform_f32_from_words", "uniform_f64_from_words", "normal_f32_from_blocks",
           "normal_f64_from_words", "reference_draw", "reference_load", "PhiloxGenerator",
           "generator_get_state", "generator_set_state", "make_random_primitives"]

M0, M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # Weyl key increments (golden ratio, sqrt(3) - 1)
ROUNDS = 10
MASK32 = 0xFFFF_FFFF
MASK64 = 0xFFFF_FFFF_FFFF_FFFF

# kernel kind -> (elements per counter, dtype the kernel writes); kernel name "philox_" + kind
PER_COUNTER = {"uniform_f32": 4, "normal_f32": 4, "uniform_f64": 2, "normal_f64": 2, "randint_i64": 2,
               "keys_u64": 2}
_OUT_DTYPE = {"uniform_f32": np.float32, "normal_f32": np.float32, "uniform_f64": np.float64,
              "normal_f64": np.float64, "randint_i64": np.int64, "keys_u64": np.uint64}

_U64 = np.uint64
_TWO_PI_32 = np.float32(2.0 * math.pi)


def counters_for(kind: str, n: int) -> int:
    """Counters a draw of n elements of ``kind`` consumes (how far it moves the offset)."""
    return -(-n // PER_COUNTER[kind])


# -- the reference -----------------------------------------------------------------------------

def philox4x32_10(counter, key) -> np.ndarray:
    """Philox4x32-10 of ``counter`` (uint32, shape (..., 4)) under ``key`` (uint32, (..., 2)).

    Vectorised over the leading axes (which broadcast); the 32-bit products are formed
    exactly in uint64, so ``p >> 32`` is mulhi and ``p & MASK32`` mullo.
    """
    counter = np.asarray(counter, dtype=np.uint32).astype(_U64)
    key = np.asarray(key, dtype=np.uint32).astype(_U64)
    c0, c1, c2, c3 = (counter[..., j] for j in range(4))
    k0, k1 = key[..., 0], key[..., 1]
    mask = _U64(MASK32)
    for r in range(ROUNDS):
        if r:
            k0 = (k0 + _U64(W0)) & mask
            k1 = (k1 + _U64(W1)) & mask
        p0 = _U64(M0) * c0
        p1 = _U64(M1) * c2
        c0, c1, c2, c3 = (p1 >> _U64(32)) ^ c1 ^ k0, p1 & mask, (p0 >> _U64(32)) ^ c3 ^ k1, p0 & mask
    return np.stack(np.broadcast_arrays(c0, c1, c2, c3), axis=-1).astype(np.uint32)


def stream_blocks(seed: int, offset: int, count: int) -> np.ndarray:
    """The blocks (uint32, shape (count, 4)) of the counters offset .. offset + count - 1."""
    seed, offset = int(seed) & MASK64, int(offset) & MASK64
    k = _U64(offset) + np.arange(count, dtype=_U64)  # wraps modulo 2**64 as the kernels do
    counter = np.stack([k & _U64(MASK32), k >> _U64(32), np.zeros_like(k), np.zeros_like(k)], axis=-1)
    return philox4x32_10(counter, [seed & MASK32, seed >> 32])


def _words64(blocks_: np.ndarray) -> np.ndarray:
    """(count, 4) uint32 blocks -> (count, 2) uint64 words v0 = w0 | w1 << 32, v1 = w2 | w3 << 32."""
    w = blocks_.astype(_U64)
    return w[:, 0::2] | (w[:, 1::2] << _U64(32))


def uniform_f32_from_words(w) -> np.ndarray:
    """uint32 words -> float32 in [0, 1 - 2**-24]: the top 24 bits, exactly."""
    return (np.asarray(w, dtype=np.uint32) >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)


def uniform_f64_from_words(v) -> np.ndarray:
    """uint64 words -> float64 in [0, 1 - 2**-53]: the top 53 bits, exactly."""
    return (np.asarray(v, dtype=_U64) >> _U64(11)).astype(np.float64) * np.float64(2.0 ** -53)


def normal_f32_from_blocks(w) -> np.ndarray:
    """(count, 4) uint32 blocks -> 4 * count float32 normals (Box-Muller on (w0, w1), (w2, w3))."""
    w = np.asarray(w, dtype=np.uint32)
    u1 = (w[:, 0::2].astype(np.float32) + np.float32(0.5)) * np.float32(2.0 ** -32)  # (0, 1]: no log(0)
    theta = _TWO_PI_32 * uniform_f32_from_words(w[:, 1::2])
    radius = np.sqrt(np.float32(-2.0) * np.log(u1))
    return np.stack([radius * np.cos(theta), radius * np.sin(theta)], axis=-1).reshape(-1)


def normal_f64_from_words(v) -> np.ndarray:
    """(count, 2) uint64 words -> 2 * count float64 normals (Box-Muller on (v0, v1))."""
    v = np.asarray(v, dtype=_U64)
    u1 = (v[:, 0].astype(np.float64) + 0.5) * 2.0 ** -64  # (0, 1]
    theta = 2.0 * math.pi * uniform_f64_from_words(v[:, 1])
    radius = np.sqrt(-2.0 * np.log(u1))
    return np.stack([radius * np.cos(theta), radius * np.sin(theta)], axis=-1).reshape(-1)


def reference_draw(kind: str, seed: int, offset: int, n: int, low: int = 0, range_: int = 1) -> np.ndarray:
    """What kernel ``philox_<kind>`` writes for n elements at (seed, offset), in NumPy.

    ``low`` and ``range_`` are randint's (``range_ = high - low``, 1 to 2**64 - 1).
    """
    b = stream_blocks(seed, offset, counters_for(kind, n))
    with np.errstate(over="ignore"):
        if kind == "uniform_f32":
            out = uniform_f32_from_words(b.reshape(-1))
        elif kind == "normal_f32":
            out = normal_f32_from_blocks(b)
        elif kind == "uniform_f64":
            out = uniform_f64_from_words(_words64(b).reshape(-1))
        elif kind == "normal_f64":
            out = normal_f64_from_words(_words64(b))
        elif kind == "randint_i64":
            out = (_U64(int(low) & MASK64) + _words64(b).reshape(-1) % _U64(range_)).view(np.int64)
        elif kind == "keys_u64":
            out = _words64(b).reshape(-1)
        else:
            raise ValueError(f"unknown Philox draw {kind!r}; known: {', '.join(PER_COUNTER)}")
    return np.ascontiguousarray(out[:n], dtype=_OUT_DTYPE[kind])


class _ReferenceKernel:
    """Stands in for ``philox_<kind>``: same arguments, filled by :func:`reference_draw`."""

    def __init__(self, kind: str):
        self.kind = kind

    def __call__(self, grid, block, args) -> None:
        out, n, seed, offset, *extra = args
        out[...] = reference_draw(self.kind, int(seed), int(offset), int(n), *(int(a) for a in extra))


class _ReferenceModule:
    def get_function(self, name: str) -> _ReferenceKernel:
        kind = name.removeprefix("philox_")
        if kind not in PER_COUNTER:
            raise AttributeError(f"the Philox reference has no kernel {name!r}")
        return _ReferenceKernel(kind)


def reference_load(stem: str) -> _ReferenceModule:
    """A loader whose ``philox`` module runs the NumPy reference: ``make_random_primitives(numpy,
    reference_load)`` is the same generator on the host, with no compiler."""
    if stem != "philox":
        raise FileNotFoundError(f"the Philox reference provides only the 'philox' module, not {stem!r}")
    return _ReferenceModule()


# -- the generator -----------------------------------------------------------------------------

class PhiloxGenerator:
    """The native generator: a 64-bit seed (the Philox key) and the next unused counter."""

    __slots__ = ("seed", "offset")

    def __init__(self, seed: int, offset: int = 0):
        self.seed = int(seed) & MASK64
        self.offset = int(offset) & MASK64

    def advance(self, counters: int) -> int:
        """Reserve ``counters`` counters; returns the first."""
        start = self.offset
        self.offset = (start + counters) & MASK64
        return start

    def __repr__(self) -> str:
        return f"PhiloxGenerator(seed={self.seed}, offset={self.offset})"


def _state_int(state: Any, key: str) -> int:
    value = state.get(key) if isinstance(state, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) <= MASK64:
        raise ValueError(f"generator_set_state: a Philox state is {{'seed': int, 'offset': int}} with both in "
                         f"[0, 2**64); got {state!r}")
    return int(value)


def generator_get_state(gen: PhiloxGenerator) -> dict:
    return {"seed": gen.seed, "offset": gen.offset}


def generator_set_state(gen: PhiloxGenerator, state: dict) -> None:
    seed, offset = _state_int(state, "seed"), _state_int(state, "offset")
    gen.seed, gen.offset = seed, offset


def make_random_primitives(xp, load: Callable[[str], Any]) -> dict:
    """The contract's random primitives over array module ``xp``, drawing with the kernels of
    ``load("philox")`` (``cupy.RawModule``, a ``CpuModule`` or :func:`reference_load`)."""
    kernels: dict[str, Any] = {}

    def draw(kind: str, gen: PhiloxGenerator, n: int, *extra):
        out = xp.empty(n, dtype=_OUT_DTYPE[kind])
        if n == 0:
            return out  # CUDA refuses an empty grid, and nothing is consumed
        kernel = kernels.get(kind)
        if kernel is None:
            kernel = kernels[kind] = load("philox").get_function("philox_" + kind)
        counters = counters_for(kind, n)
        start = gen.advance(counters)
        kernel((blocks(counters),), (THREADS,), (out, np.int64(n), _U64(gen.seed), _U64(start), *extra))
        return out

    def uniform(gen, shape, low, high, dtype):
        shape = tuple(shape)
        native = np.dtype(dtype.name)
        kind = "uniform_f64" if native == np.float64 else "uniform_f32"
        out = draw(kind, gen, math.prod(shape))
        scaled = low != 0.0 or high != 1.0
        if scaled:
            out = out * (high - low) + low  # separate ops, as the NumPy backend: no fused rounding
        if out.dtype != native:
            out = out.astype(native)
        if scaled or out.dtype != np.dtype(_OUT_DTYPE[kind]):
            # rounding (of the affine map or of the cast) can reach `high`: keep [low, high)
            top = np.nextafter(native.type(high), native.type(low))
            out = xp.minimum(out, float(top)).astype(native, copy=False)
        return out.reshape(shape)

    def normal(gen, shape, mean, std, dtype):
        shape = tuple(shape)
        native = np.dtype(dtype.name)
        out = draw("normal_f64" if native == np.float64 else "normal_f32", gen, math.prod(shape))
        if mean != 0.0 or std != 1.0:
            out = out * std + mean
        if out.dtype != native:
            out = out.astype(native)
        return out.reshape(shape)

    def randint(gen, low, high, shape, dtype):
        shape = tuple(shape)
        low, high = int(low), int(high)
        span = high - low
        if not (0 < span <= MASK64 and low >= -2 ** 63 and high <= 2 ** 63):
            raise ValueError(f"randint: needs low < high, both within int64 (high may be 2**63) and high - low "
                             f"< 2**64; got low={low}, high={high}")
        out = draw("randint_i64", gen, math.prod(shape), np.int64(low), _U64(span))
        native = np.dtype(dtype.name)
        if out.dtype != native:
            out = out.astype(native)
        return out.reshape(shape)

    def permutation(gen, n):
        n = int(n)
        if n < 0:
            raise ValueError(f"permutation: n must be non-negative, got {n}")
        keys = draw("keys_u64", gen, n)
        if n == 0:
            return xp.empty(0, dtype=np.int64)
        return xp.argsort(keys).astype(np.int64, copy=False)

    return {
        "generator": PhiloxGenerator,
        "generator_get_state": generator_get_state,
        "generator_set_state": generator_set_state,
        "uniform": uniform,
        "normal": normal,
        "randint": randint,
        "permutation": permutation,
    }
