"""The CuPy backend's Philox4x32-10 generator: the NumPy reference against published answers,
the kernels (run on the CPU) against the reference, and the random primitives' contract."""
from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import philox as P
from plugtorch_backends.cupy_backend.modules import THREADS, blocks

from plugtorch.core import dtypes as D
from plugtorch.core.primitives import PRIMITIVES

# Random123's tests/kat_vectors (DEShawResearch/random123 at 9545ff6), the "philox4x32 10" lines:
# counter (4 words), key (2 words), expected block.
KAT_4X32 = [
    ([0x00000000] * 4, [0x00000000] * 2, [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]
# ... and the "philox4x64 10" lines, which numpy.random.Philox (a Philox4x64-10) must also give.
KAT_4X64 = [
    ([0] * 4, [0] * 2, [0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B, 0x7E68B68AEC7BA23B]),
    ([2 ** 64 - 1] * 4, [2 ** 64 - 1] * 2,
     [0x87B092C3013FE90B, 0x438C3C67BE8D0224, 0x9CC7D7C69CD777B6, 0xA09CAEBF594F0BA0]),
    ([0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89],
     [0x452821E638D01377, 0xBE5466CF34E90C6C],
     [0xA528F45403E61D95, 0x38C72DBD566E9788, 0xA5A1610E72FD18B5, 0x57BD43B5E52B7FE6]),
]
# Multipliers and Weyl increments of Philox4xW (Salmon et al. 2011, table 2).
_CONSTANTS = {32: (0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85),
              64: (0xD2E7470EE14C6C93, 0xCA5A826395121157, 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)}


def philox_scalar(ctr, key, width, rounds=10):
    """An independent Philox4xW on Python ints (the key bumped after each round, not before)."""
    m0, m1, w0, w1 = _CONSTANTS[width]
    mask = (1 << width) - 1
    c, k = list(ctr), list(key)
    for _ in range(rounds):
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> width) ^ c[1] ^ k[0], p1 & mask, (p0 >> width) ^ c[3] ^ k[1], p0 & mask]
        k = [(k[0] + w0) & mask, (k[1] + w1) & mask]
    return c


def numpy_philox4x64(ctr, key):
    """numpy.random.Philox's block for counter ``ctr``: it steps the counter before each block."""
    c = sum(v << (64 * j) for j, v in enumerate(ctr))
    k = key[0] | key[1] << 64
    gen = np.random.Philox(counter=(c - 1) % 2 ** 256, key=k)
    return [int(v) for v in gen.random_raw(4)]


# -- the round function ----------------------------------------------------------------------------

@pytest.mark.parametrize("ctr,key,want", KAT_4X64)
def test_scalar_oracle_and_numpy_philox_agree_on_random123_4x64_answers(ctr, key, want):
    assert numpy_philox4x64(ctr, key) == want
    assert philox_scalar(ctr, key, 64) == want


def test_scalar_oracle_matches_numpy_philox_on_random_inputs():
    rng = np.random.default_rng(7)
    for _ in range(20):
        ctr = [int(v) for v in rng.integers(0, 2 ** 64, 4, dtype=np.uint64)]
        key = [int(v) for v in rng.integers(0, 2 ** 64, 2, dtype=np.uint64)]
        assert philox_scalar(ctr, key, 64) == numpy_philox4x64(ctr, key)


@pytest.mark.parametrize("ctr,key,want", KAT_4X32)
def test_reference_gives_random123_4x32_answers(ctr, key, want):
    assert philox_scalar(ctr, key, 32) == want
    got = P.philox4x32_10(np.array(ctr, np.uint32), np.array(key, np.uint32))
    assert got.dtype == np.uint32 and got.tolist() == want


def test_reference_matches_scalar_oracle_vectorised():
    rng = np.random.default_rng(11)
    ctr = rng.integers(0, 2 ** 32, (300, 4), dtype=np.uint32)
    key = rng.integers(0, 2 ** 32, (300, 2), dtype=np.uint32)
    got = P.philox4x32_10(ctr, key)
    assert got.tolist() == [philox_scalar(c, k, 32) for c, k in zip(ctr.tolist(), key.tolist())]


def test_kernel_round_function_gives_random123_answers(cpu_load):
    rng = np.random.default_rng(3)
    ctr = np.concatenate([np.array([c for c, _, _ in KAT_4X32], np.uint32),
                          rng.integers(0, 2 ** 32, (300, 4), dtype=np.uint32)])
    key = np.concatenate([np.array([k for _, k, _ in KAT_4X32], np.uint32),
                          rng.integers(0, 2 ** 32, (300, 2), dtype=np.uint32)])
    out = np.zeros_like(ctr)
    cpu_load("philox").get_function("philox4x32_10_raw")((blocks(len(ctr)),), (THREADS,),
                                                         (out, ctr, key, np.int64(len(ctr))))
    assert out[:3].tolist() == [want for _, _, want in KAT_4X32]
    np.testing.assert_array_equal(out, P.philox4x32_10(ctr, key))


@pytest.mark.parametrize("seed,offset", [(0, 0), (2 ** 64 - 1, 2 ** 32 - 2), (0x0123456789ABCDEF, 2 ** 64 - 2)])
def test_stream_counter_k_is_lo_hi_0_0_under_the_seed_halves(seed, offset):
    got = P.stream_blocks(seed, offset, 5)
    for j in range(5):
        k = (offset + j) % 2 ** 64  # the 64-bit counter wraps, carrying from word 0 into word 1
        want = philox_scalar([k & 0xFFFFFFFF, k >> 32, 0, 0], [seed & 0xFFFFFFFF, seed >> 32], 32)
        assert got[j].tolist() == want


# -- kernels against the reference -----------------------------------------------------------------

SIZES = [0, 1, 3, 4, 5, 1000, 257 * 3]


def _kernel_draw(cpu_load, kind, seed, offset, n, *extra):
    out = np.full(n, 7, dtype=P._OUT_DTYPE[kind])
    if n:
        kernel = cpu_load("philox").get_function("philox_" + kind)
        kernel((blocks(P.counters_for(kind, n)),), (THREADS,), (out, np.int64(n), np.uint64(seed), np.uint64(offset),
                                                               *extra))
    return out


@pytest.mark.parametrize("kind", sorted(P.PER_COUNTER))
def test_kernel_is_the_reference(cpu_load, kind):
    extra = (np.int64(-(2 ** 40)), np.uint64(3 * 2 ** 41 + 5)) if kind == "randint_i64" else ()
    for n in SIZES:
        for seed, offset in [(0, 0), (0xDEADBEEFCAFEF00D, 2 ** 64 - 3)]:
            got = _kernel_draw(cpu_load, kind, seed, offset, n, *extra)
            want = P.reference_draw(kind, seed, offset, n, *(int(a) for a in extra))
            assert got.dtype == want.dtype and got.shape == want.shape == (n,)
            if kind.startswith("normal"):  # log/sqrt/sin/cos of two libraries: a few ulp apart
                tol = 1e-6 if kind.endswith("f32") else 1e-14
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
            else:
                np.testing.assert_array_equal(got, want)


def test_element_i_comes_from_counter_offset_plus_i_div_per_counter():
    blocks_ = P.stream_blocks(99, 40, 3)
    u32 = P.reference_draw("uniform_f32", 99, 40, 12)
    np.testing.assert_array_equal(u32, P.uniform_f32_from_words(blocks_.reshape(-1)))
    keys = P.reference_draw("keys_u64", 99, 40, 6)
    w = blocks_.astype(np.uint64)
    np.testing.assert_array_equal(keys, (w[:, 0::2] | w[:, 1::2] << np.uint64(32)).reshape(-1))
    np.testing.assert_array_equal(P.reference_draw("uniform_f64", 99, 40, 6), P.uniform_f64_from_words(keys))
    # a shorter draw is a prefix of a longer one at the same offset
    np.testing.assert_array_equal(P.reference_draw("uniform_f32", 99, 40, 5), u32[:5])
    longer = P.reference_draw("normal_f64", 99, 40, 6)
    np.testing.assert_array_equal(P.reference_draw("normal_f64", 99, 40, 3), longer[:3])


# -- the primitives --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prims(cpu_load):
    return P.make_random_primitives(np, cpu_load)


@pytest.fixture(scope="module")
def ref_prims():
    return P.make_random_primitives(np, P.reference_load)


def test_primitives_are_the_contracts_random_primitives(prims):
    assert set(prims) == {"generator", "generator_get_state", "generator_set_state", "uniform", "normal",
                          "randint", "permutation"}
    assert set(prims) <= set(PRIMITIVES)


CALLS = [
    ("uniform", lambda p, g, shape: p["uniform"](g, shape, 0.0, 1.0, D.float32)),
    ("uniform", lambda p, g, shape: p["uniform"](g, shape, -2.0, 3.5, D.float64)),
    ("uniform", lambda p, g, shape: p["uniform"](g, shape, 0.0, 1.0, D.float16)),
    ("normal", lambda p, g, shape: p["normal"](g, shape, 0.0, 1.0, D.float64)),
    ("normal", lambda p, g, shape: p["normal"](g, shape, 1.5, 0.25, D.float32)),
    ("randint", lambda p, g, shape: p["randint"](g, -3, 1000, shape, D.int64)),
    ("randint", lambda p, g, shape: p["randint"](g, 0, 2, shape, D.bool_)),
]


@pytest.mark.parametrize("which", range(len(CALLS)))
@pytest.mark.parametrize("shape", [(0,), (2, 0), (), (1,), (3,), (2, 2), (5,), (10, 100), (257, 3)])
def test_primitives_on_the_kernels_match_the_reference(prims, ref_prims, which, shape):
    _, call = CALLS[which]
    g, h = prims["generator"](1234), ref_prims["generator"](1234)
    got, want = call(prims, g, shape), call(ref_prims, h, shape)
    assert isinstance(got, np.ndarray) and got.shape == want.shape == shape and got.dtype == want.dtype
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    else:
        np.testing.assert_array_equal(got, want)
    assert prims["generator_get_state"](g) == ref_prims["generator_get_state"](h)


def test_primitive_dtypes(prims):
    g = prims["generator"](5)
    for dt in (D.float16, D.float32, D.float64):
        assert prims["uniform"](g, (7,), 0.0, 1.0, dt).dtype == np.dtype(dt.name)
        assert prims["normal"](g, (7,), 0.0, 1.0, dt).dtype == np.dtype(dt.name)
    for dt in (D.int64, D.int32, D.int16, D.uint8, D.bool_, D.float32):
        assert prims["randint"](g, 0, 2, (7,), dt).dtype == np.dtype(dt.name)
    assert prims["permutation"](g, 7).dtype == np.int64


def test_offset_advances_by_the_counters_a_draw_reads(prims):
    g = prims["generator"](42)
    cases = [(("uniform", 5, D.float32), 2), (("uniform", 5, D.float64), 3), (("normal", 9, D.float32), 3),
             (("normal", 3, D.float64), 2), (("uniform", 4, D.float16), 1), (("uniform", 0, D.float32), 0)]
    for (kind, n, dt), counters in cases:
        before = g.offset
        prims[kind](g, (n,), 0.0, 1.0, dt)
        assert g.offset - before == counters, (kind, n, dt)
    before = g.offset
    prims["randint"](g, 0, 10, (3,), D.int64)
    prims["permutation"](g, 5)
    assert g.offset - before == 2 + 3


def test_consecutive_draws_differ_and_continue_the_stream(prims):
    g = prims["generator"](2 ** 63 + 17)
    a = prims["uniform"](g, (5,), 0.0, 1.0, D.float32)
    b = prims["uniform"](g, (5,), 0.0, 1.0, D.float32)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, P.reference_draw("uniform_f32", 2 ** 63 + 17, 0, 5))
    np.testing.assert_array_equal(b, P.reference_draw("uniform_f32", 2 ** 63 + 17, 2, 5))
    c = prims["randint"](g, 0, 2 ** 40, (3,), D.int64)
    np.testing.assert_array_equal(c, P.reference_draw("randint_i64", 2 ** 63 + 17, 4, 3, 0, 2 ** 40))


def test_seeds_give_different_streams_and_reseeding_repeats(prims):
    draw = lambda seed: prims["normal"](prims["generator"](seed), (64,), 0.0, 1.0, D.float32)
    np.testing.assert_array_equal(draw(3), draw(3))
    assert not np.array_equal(draw(3), draw(4))
    assert not np.array_equal(draw(0), draw(2 ** 32))  # the key's high word counts
    assert prims["generator"](-1).seed == 2 ** 64 - 1


def test_state_round_trips_through_json_and_pickle(prims):
    g = prims["generator"](67280421310721)
    prims["normal"](g, (13,), 0.0, 1.0, D.float32)
    state = prims["generator_get_state"](g)
    assert state == {"seed": 67280421310721, "offset": 4}
    expected = prims["uniform"](g, (9,), 0.0, 1.0, D.float64)
    h = prims["generator"](0)
    prims["generator_set_state"](h, json.loads(json.dumps(state)))
    np.testing.assert_array_equal(prims["uniform"](h, (9,), 0.0, 1.0, D.float64), expected)
    for clone in (pickle.loads(pickle.dumps(h)), copy.deepcopy(h)):
        assert prims["generator_get_state"](clone) == prims["generator_get_state"](h)
    state["offset"] = 99
    assert h.offset != 99  # get_state hands out a copy


@pytest.mark.parametrize("bad", [None, {}, {"seed": 1}, {"seed": 1, "offset": -1}, {"seed": 2 ** 64, "offset": 0},
                                 {"seed": 1.5, "offset": 0}, {"seed": True, "offset": 0}])
def test_set_state_refuses_what_is_not_a_philox_state(prims, bad):
    g = prims["generator"](1)
    with pytest.raises(ValueError, match="generator_set_state"):
        prims["generator_set_state"](g, bad)
    assert (g.seed, g.offset) == (1, 0)


# -- ranges and distributions ----------------------------------------------------------------------

# Found by scanning the reference stream of seed 2024: counter 1317326's word 1 is 0xffffff33
# (the largest float32 uniform, 1 - 2**-24); counter 5926005's word 2 is 0x00000086 (exactly 0).
EXTREME_SEED, TOP_COUNTER, BOTTOM_COUNTER = 2024, 1317326, 5926005


def test_uniform_f32_top_of_the_stream_stays_below_one_and_below_high(prims):
    assert int(P.stream_blocks(EXTREME_SEED, TOP_COUNTER, 1)[0, 1]) >> 8 == 0xFFFFFF

    def draw(low, high, dt):
        return prims["uniform"](P.PhiloxGenerator(EXTREME_SEED, TOP_COUNTER), (4,), low, high, dt)[1]

    assert draw(0.0, 1.0, D.float32) == np.float32(1 - 2 ** -24)
    # 1 + (1 - 2**-24) rounds to 2.0 in float32: the result is clamped below `high`
    assert draw(1.0, 2.0, D.float32) == np.nextafter(np.float32(2), np.float32(1))
    assert draw(0.0, 1.0, D.float16) == np.nextafter(np.float16(1), np.float16(0))
    assert draw(-3.0, -3.0, D.float32) == -3.0
    bottom = prims["uniform"](P.PhiloxGenerator(EXTREME_SEED, BOTTOM_COUNTER), (4,), 0.25, 0.75, D.float32)
    assert bottom[2] == np.float32(0.25) and bottom.min() >= 0.25 and bottom.max() < 0.75


def test_word_conversions_at_their_extremes():
    assert P.uniform_f32_from_words([0, 0xFFFFFFFF]).tolist() == [0.0, 1 - 2 ** -24]
    assert P.uniform_f64_from_words([0, 2 ** 64 - 1]).tolist() == [0.0, 1 - 2 ** -53]
    edges32 = np.array([[0, 0, 0xFFFFFFFF, 0xFFFFFFFF], [0, 0xFFFFFFFF, 0xFFFFFFFF, 0]], np.uint32)
    z32 = P.normal_f32_from_blocks(edges32)
    assert np.isfinite(z32).all() and np.abs(z32).max() < 6.8  # u1 = 2**-33 at the very worst
    edges64 = np.array([[0, 0], [2 ** 64 - 1, 2 ** 64 - 1], [0, 2 ** 64 - 1]], np.uint64)
    z64 = P.normal_f64_from_words(edges64)
    assert np.isfinite(z64).all() and np.abs(z64).max() < 9.6  # u1 = 2**-65 at the very worst


@pytest.mark.parametrize("dt", [D.float32, D.float64])
def test_uniform_moments_and_range(prims, dt):
    x = prims["uniform"](prims["generator"](77), (20000,), 0.0, 1.0, dt).astype(np.float64)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 1 / 12) < 0.005
    assert np.histogram(x, bins=10, range=(0, 1))[0].min() > 1800
    y = prims["uniform"](prims["generator"](78), (20000,), -4.0, 6.0, dt)
    assert y.min() >= -4.0 and y.max() < 6.0 and abs(y.mean() - 1.0) < 0.1


@pytest.mark.parametrize("dt", [D.float32, D.float64])
def test_normal_moments(prims, dt):
    z = prims["normal"](prims["generator"](91), (20000,), 0.0, 1.0, dt).astype(np.float64)
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 0.03 and abs(z.var() - 1.0) < 0.05
    assert abs(np.mean(np.abs(z) < 1.0) - 0.6827) < 0.015
    assert abs((z ** 3).mean()) < 0.1 and abs((z ** 4).mean() - 3.0) < 0.2
    w = prims["normal"](prims["generator"](92), (20000,), -2.0, 0.5, dt)
    assert abs(w.mean() + 2.0) < 0.02 and abs(w.std() - 0.5) < 0.02


def test_randint_range_and_uniformity(prims):
    x = prims["randint"](prims["generator"](5), -3, 7, (20000,), D.int64)
    assert x.min() == -3 and x.max() == 6
    counts = np.bincount(x + 3, minlength=10)
    assert len(counts) == 10 and np.abs(counts - 2000).max() < 200  # 4.7 standard deviations
    assert (prims["randint"](prims["generator"](6), 5, 6, (50,), D.int64) == 5).all()


def test_randint_at_the_ends_of_int64(prims):
    g = prims["generator"](8)
    full = prims["randint"](g, -2 ** 63, 2 ** 63 - 1, (1000,), D.int64)
    np.testing.assert_array_equal(full, P.reference_draw("randint_i64", 8, 0, 1000, -2 ** 63, 2 ** 64 - 1))
    assert (full < 0).any() and (full > 0).any() and full.max() < 2 ** 63 - 1
    top = prims["randint"](g, 2 ** 63 - 4, 2 ** 63, (100,), D.int64)
    assert set(top.tolist()) == {2 ** 63 - 4, 2 ** 63 - 3, 2 ** 63 - 2, 2 ** 63 - 1}
    for low, high in [(3, 3), (4, 3), (-2 ** 63 - 1, 0), (0, 2 ** 63 + 1)]:
        with pytest.raises(ValueError, match="randint"):
            prims["randint"](g, low, high, (2,), D.int64)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 1000])
def test_permutation_is_a_permutation_and_the_reference(prims, ref_prims, n):
    p = prims["permutation"](prims["generator"](n + 100), n)
    assert p.dtype == np.int64 and p.shape == (n,)
    np.testing.assert_array_equal(np.sort(p), np.arange(n))
    np.testing.assert_array_equal(p, ref_prims["permutation"](ref_prims["generator"](n + 100), n))
    if n == 1000:
        assert (p != np.arange(n)).mean() > 0.99
        assert not np.array_equal(p, prims["permutation"](prims["generator"](n + 101), n))


def test_empty_draws_launch_nothing_and_consume_nothing():
    def refuse(stem):
        raise AssertionError("an empty draw must not load or launch a kernel")
    prims = P.make_random_primitives(np, refuse)
    g = prims["generator"](1)
    assert prims["uniform"](g, (0, 4), 0.0, 1.0, D.float32).shape == (0, 4)
    assert prims["normal"](g, (3, 0), 0.0, 1.0, D.float64).shape == (3, 0)
    assert prims["randint"](g, 0, 5, (0,), D.int32).dtype == np.int32
    assert prims["permutation"](g, 0).shape == (0,)
    assert g.offset == 0
