"""Random numbers with a saveable state, which the array API standard does not have.

Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
a counter-based generator: block ``i`` of a stream is a pure function of (key, i),
so the whole state is two integers, ``{"seed", "counter"}``, JSON-serialisable as the
contract asks, and a draw of n numbers is one vectorised evaluation of n/2 or n/4
blocks. 32-bit words are held in uint64 arrays so that every product of two words
fits exactly: the standard leaves integer overflow unspecified, and nothing here
relies on wrap-around. The package's tests check the published known-answer vectors.
"""
from __future__ import annotations

import math

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1


class PhiloxGenerator:
    """A stream: its key (the seed) and how many 128-bit blocks were drawn from it."""

    def __init__(self, seed: int):
        self.seed = int(seed) & _MASK64
        self.counter = 0

    def __repr__(self) -> str:
        return f"PhiloxGenerator(seed={self.seed}, counter={self.counter})"


def philox4x32(xp, counter: tuple, key: int) -> tuple:
    """The four 32-bit output words of the blocks whose counters are the four 32-bit words
    ``counter`` (uint64 arrays), under the 64-bit ``key``."""
    c0, c1, c2, c3 = counter
    k0, k1 = key & _MASK32, key >> 32
    for _ in range(10):
        p0, p1 = c0 * _M0, c2 * _M1  # < 2**64: exact
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & _MASK32
        k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return c0, c1, c2, c3


def _words(xp, gen: PhiloxGenerator, n: int):
    """n fresh 32-bit words (uint64 array); advances the generator by the blocks used."""
    blocks = -(-n // 4)
    ctr = xp.arange(gen.counter, gen.counter + blocks, dtype=xp.uint64)
    gen.counter += blocks
    zeros = xp.zeros((blocks,), dtype=xp.uint64)
    words = philox4x32(xp, (ctr & _MASK32, ctr >> 32, zeros, zeros), gen.seed)
    return xp.reshape(xp.stack(words, axis=1), (4 * blocks,))[:n]


def _unit(xp, gen, n: int, double: bool):
    """n uniforms in [0, 1): 53 random bits each for float64, 24 for float32."""
    if double:
        w = _words(xp, gen, 2 * n)
        hi, lo = w[0::2] >> 5, w[1::2] >> 6  # 27 + 26 bits
        return xp.astype(hi * (1 << 26) + lo, xp.float64) / float(1 << 53)
    return xp.astype(_words(xp, gen, n) >> 8, xp.float32) / float(1 << 24)


def make_random_primitives(xp, native) -> dict:
    def generator(seed):
        return PhiloxGenerator(seed)

    def get_state(gen):
        return {"seed": gen.seed, "counter": gen.counter}

    def set_state(gen, state):
        gen.seed, gen.counter = int(state["seed"]) & _MASK64, int(state["counter"])

    def uniform(gen, shape, low, high, dtype):
        dt = native(dtype)
        u = _unit(xp, gen, math.prod(shape), dt == xp.float64)
        if low != 0.0 or high != 1.0:
            u = u * (high - low) + low
        return xp.astype(xp.reshape(u, tuple(shape)), dt)

    def normal(gen, shape, mean, std, dtype):
        # Box-Muller on float64 uniforms: 1 - u is in (0, 1], so the log is finite
        n = math.prod(shape)
        u = _unit(xp, gen, 2 * (-(-n // 2)), True)
        radius = xp.sqrt(-2.0 * xp.log(1.0 - u[0::2]))
        angle = u[1::2] * (2 * math.pi)
        z = xp.reshape(xp.stack([radius * xp.cos(angle), radius * xp.sin(angle)], axis=1), (-1,))[:n]
        if mean != 0.0 or std != 1.0:
            z = z * std + mean
        return xp.astype(xp.reshape(z, tuple(shape)), native(dtype))

    def randint(gen, low, high, shape, dtype):
        # a 64-bit draw modulo the range: the bias is at most range / 2**64
        n = math.prod(shape)
        w = _words(xp, gen, 2 * n)
        draws = (w[0::2] << 32) | w[1::2]
        picked = xp.astype(draws % (high - low), xp.int64) + low
        return xp.astype(xp.reshape(picked, tuple(shape)), native(dtype))

    def permutation(gen, n):
        w = _words(xp, gen, 2 * n)
        return xp.argsort((w[0::2] << 32) | w[1::2], stable=True)  # random keys sort to a permutation

    return {"generator": generator, "generator_get_state": get_state, "generator_set_state": set_state,
            "uniform": uniform, "normal": normal, "randint": randint, "permutation": permutation}
