"""The NumPy backend's native matrix product (backends/numpy_backend/native/gemm.c, gemm.py).

Values against NumPy in float64 within the dtype's rounding (the kernel sums in another order than
BLAS, so not bit for bit), over shapes, layouts (transposed, strided, broadcast, misaligned) and
edge sizes; the kernel's own contract bit for bit: each element depends only on its row of A and
column of B (a product computed whole, per row, per image or transposed gives the same bits);
and the switches that send every product to NumPy.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plugtorch_backends.numpy_backend import native

if not native.enabled():
    pytest.skip(f"the native kernels are off here ({native.status()})", allow_module_level=True)

from plugtorch_backends.numpy_backend.native import gemm

if gemm._gemm is None:
    pytest.skip(f"the native product is off here ({gemm.STATUS})", allow_module_level=True)
kernel = gemm._gemm


def _run(a, b):
    """The kernel itself on 2-d operands (no size rule)."""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    kernel.gemm(a[None, None], b[None, None], out[None, None])
    return out


def _close(got, a, b):
    """got == a @ b up to the dtype's rounding, measured against |a| @ |b| (the sum's magnitude)."""
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    eps = np.finfo(a.dtype).eps
    tol = 4 * eps * (a.shape[1] + 1) * scale + np.finfo(a.dtype).tiny
    bad = np.abs(got - want) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} elements off, worst {np.abs(got - want).max()}"


def _layout(x, kind):
    if kind == "C":
        return np.ascontiguousarray(x)
    if kind == "F":
        return np.asfortranarray(x)
    # every other row and column of a larger array
    big = np.zeros((2 * x.shape[0] + 1, 2 * x.shape[1] + 1), x.dtype)
    big[1::2, 1::2] = x
    return big[1::2, 1::2]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 70), k=st.integers(0, 300), n=st.integers(1, 150),
       dtype=st.sampled_from([np.float32, np.float64]), la=st.sampled_from("CFS"), lb=st.sampled_from("CFS"),
       seed=st.integers(0, 2 ** 16))
def test_values_match_numpy_in_float64(m, k, n, dtype, la, lb, seed):
    r = np.random.default_rng(seed)
    a = _layout(r.standard_normal((m, k)).astype(dtype), la)
    b = _layout(r.standard_normal((k, n)).astype(dtype), lb)
    got = _run(a, b)
    _close(got, a, b)
    if k == 0:
        np.testing.assert_array_equal(got, np.zeros((m, n), dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (1, 300, 1), (1, 64, 200), (200, 64, 1), (4, 129, 64), (5, 257, 65),
                                     (20, 256, 1024), (16, 144, 1024), (300, 16, 130),
                                     # row panels sized to the rows (row_group): one to four, even, B in place
                                     (9, 70, 40), (13, 33, 97), (25, 260, 70), (47, 300, 33), (48, 256, 300),
                                     (49, 40, 90),
                                     # C past the cache (rows outer, B packed in blocks of 1024 columns)
                                     (300, 40, 700), (40, 20, 2100)])
def test_edges_and_block_boundaries(m, k, n, dtype):
    r = np.random.default_rng(m * k + n)
    a, b = r.standard_normal((m, k)).astype(dtype), r.standard_normal((k, n)).astype(dtype)
    _close(_run(a, b), a, b)
    _close(_run(a, np.asfortranarray(b)), a, b)  # B's rows copied in tiles


def test_empty_inner_dimension_gives_zeros_and_empty_outputs_are_left_alone():
    a, b = np.ones((3, 0), np.float32), np.ones((0, 70), np.float32)
    out = np.full((3, 70), np.nan, np.float32)
    kernel.gemm(a[None, None], b[None, None], out[None, None])
    np.testing.assert_array_equal(out, np.zeros((3, 70), np.float32))
    empty = np.empty((1, 1, 0, 5), np.float32)
    kernel.gemm(np.ones((1, 1, 0, 4), np.float32), np.ones((1, 1, 4, 5), np.float32), empty)


def test_misaligned_and_offset_buffers():
    r = np.random.default_rng(3)
    want_a, want_b = r.standard_normal((37, 90)).astype(np.float32), r.standard_normal((90, 70)).astype(np.float32)
    # float32 arrays 4 and 8 bytes past an aligned start, and one not on a float boundary at all
    for offset in (4, 8, 1):
        raw = bytearray(4 * (37 * 90 + 90 * 70 + 37 * 70) + 8)
        a = np.frombuffer(raw, np.float32, 37 * 90, offset=offset).reshape(37, 90)
        b = np.frombuffer(raw, np.float32, 90 * 70, offset=offset + 4 * 37 * 90).reshape(90, 70)
        out = np.frombuffer(raw, np.float32, 37 * 70, offset=offset + 4 * (37 * 90 + 90 * 70)).reshape(37, 70)
        a[...], b[...] = want_a, want_b
        kernel.gemm(a[None, None], b[None, None], out[None, None])
        _close(out, want_a, want_b)
        _close(_run(a[1:, 3:], b[3:, 1:]), want_a[1:, 3:], want_b[3:, 1:])


def test_each_element_depends_on_its_row_and_column_only():
    r = np.random.default_rng(4)
    a, b = r.standard_normal((37, 300)).astype(np.float32), r.standard_normal((300, 150)).astype(np.float32)
    whole = _run(a, b)
    for i in (0, 5, 36):  # a row alone: another row block, other masks
        np.testing.assert_array_equal(_run(a[i:i + 1], b)[0], whole[i])
    for rows in (slice(0, 20), slice(3, 16), slice(0, 37)):  # other row panel sizes (row_group)
        np.testing.assert_array_equal(_run(a[rows], b), whole[rows])
    tall = np.concatenate([a, a])  # 74 rows: panels of eight, B packed
    np.testing.assert_array_equal(_run(tall, b), np.concatenate([whole, whole]))
    np.testing.assert_array_equal(_run(a, b[:, 70:]), whole[:, 70:])  # other column panels
    np.testing.assert_array_equal(_run(b.T, a.T).T, whole)  # transposed: the same fused products
    np.testing.assert_array_equal(_run(np.asfortranarray(a), np.asfortranarray(b)), whole)
    # a batch, A broadcast across it (a convolution's weight against each image's patches)
    bs = r.standard_normal((3, 2, 300, 150)).astype(np.float32)
    out = np.empty((3, 2, 37, 150), np.float32)
    kernel.gemm(np.broadcast_to(a, (3, 2, 37, 300)), bs, out)
    for i in range(3):
        for j in range(2):
            np.testing.assert_array_equal(out[i, j], _run(a, bs[i, j]))
    np.testing.assert_array_equal(_run(a, b), whole)  # and again: deterministic


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k", [(1, 33), (7, 1), (20, 64), (64, 32), (100, 300)])
@pytest.mark.parametrize("layouts", ["CC", "FC", "SS", "CF"])
def test_a_small_product_reads_a_in_place_to_the_same_bits(dtype, m, k, layouts):
    """Up to 64 columns of float32 (32 of float64) A is read in place (gemm.c's gemm_small), not packed:
    the same chains, so the bits of those columns inside a wider product (packed A)."""
    r = np.random.default_rng(m * k)
    small = 256 // np.dtype(dtype).itemsize
    a = _layout(r.standard_normal((m, k)).astype(dtype), layouts[0])
    wide = r.standard_normal((k, small + 40)).astype(dtype)
    for n in (small // 2, small - 3, small):
        b = _layout(wide[:, :n], layouts[1])
        np.testing.assert_array_equal(_run(a, b), _run(a, _layout(wide, layouts[1]))[:, :n])


def test_attention_heads_written_out_go_to_the_kernel_with_the_bits_of_a_wider_product(one_thread):
    """minGPT's per-head products over views of one (B, T, 3C) projection (q @ k^T, weights @ v and
    the transposed ones of the backward) take the kernel as given, A in place."""
    r = np.random.default_rng(12)
    qkv = r.standard_normal((4, 64, 384)).astype(np.float32)
    q, k, v = (qkv[..., i * 128:(i + 1) * 128].reshape(4, 64, 4, 32).transpose(0, 2, 1, 3) for i in range(3))
    att = r.standard_normal((4, 4, 64, 64)).astype(np.float32)
    for a, b in ((q, k.swapaxes(-1, -2)), (att, v), (att.swapaxes(-1, -2), q), (q.swapaxes(-1, -2), att)):
        got = gemm._native(a, b, None)
        assert got is not None, "the rule sent this product to NumPy"
        _close(got[0, 0], a[0, 0], b[0, 0])
        for i, j in ((0, 0), (3, 2)):
            wide = np.concatenate([b[i, j], np.ones((b.shape[-2], 70), np.float32)], axis=1)
            np.testing.assert_array_equal(got[i, j], _run(np.ascontiguousarray(a[i, j]), wide)[:, :b.shape[-1]])


def test_bad_arguments_name_the_op_and_the_shapes():
    f = np.ones((1, 1, 2, 3), np.float32)
    with pytest.raises(ValueError, match=r"gemm: shapes do not match: a \(1, 1, 2, 3\) @ b \(1, 1, 2, 3\)"):
        kernel.gemm(f, f, np.empty((1, 1, 2, 3), np.float32))
    with pytest.raises(ValueError, match="one dtype"):
        kernel.gemm(f, np.ones((1, 1, 3, 2)), np.empty((1, 1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="4-d float32 or float64"):
        kernel.gemm(f[0], f, f)
    with pytest.raises(ValueError, match="columns must be adjacent"):
        kernel.gemm(f, np.ones((1, 1, 3, 4), np.float32), np.empty((1, 1, 4, 2), np.float32).swapaxes(2, 3))


def test_a_short_projection_goes_to_the_kernel_as_given_with_the_transposed_bits(one_thread, two_threads,
                                                                                 monkeypatch):
    """minGPT's (1024 x 128) @ (128 x 384) with W^T in place: computed as given (no transpose back),
    on one thread and split by rows on two; the bits of the transposed route, which wins' rule
    alone would take."""
    r = np.random.default_rng(7)
    x, w = r.standard_normal((1024, 128)).astype(np.float32), r.standard_normal((384, 128)).astype(np.float32)
    assert gemm._projection(1024, 128, 384) and not gemm.wins(1024, 128, 384) and gemm.wins(384, 128, 1024)
    transposed = _run(w, x.T).T
    transposes = []
    real = kernel.transpose
    monkeypatch.setattr(gemm, "_gemm", type("Spy", (), {
        "gemm": staticmethod(kernel.gemm),
        "transpose": staticmethod(lambda src, out: (transposes.append(src.shape), real(src, out)))})())
    one = gemm.matmul(x, w.T)
    calls = native._kernels.pool_info()[2]
    with two_threads():
        two = gemm.matmul(x, w.T)
        calls = native._kernels.pool_info()[2] - calls
    assert transposes == [] and calls == 1
    np.testing.assert_array_equal(one, transposed)
    np.testing.assert_array_equal(two, transposed)
    np.testing.assert_allclose(one, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n", [(0, 3), (1, 1), (1, 37), (37, 1), (16, 16), (17, 33), (64, 1024), (130, 47)])
def test_transpose_copies_every_element(dtype, m, n):
    """The product's way back to C order after computing B^T @ A^T: whole tiles and the edges."""
    src = np.random.default_rng(m * n).standard_normal((m, n)).astype(dtype)
    for view in (src, np.pad(src, ((0, 0), (3, 5)))[:, 3:3 + n]):  # rows further apart than n
        out = np.full((n, m), np.nan, dtype)
        kernel.transpose(view, out)
        np.testing.assert_array_equal(out, view.T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,split", [(300, 701, True), (1024, 129, True), (17, 8192, True), (64, 1024, False)],
                         ids=["ragged", "tall", "two-tiles", "one-job"])
def test_transpose_splits_over_the_pool_by_tiles_and_copies_every_element(one_thread, two_threads, dtype, m, n,
                                                                           split):
    """With several BLAS threads the rows of src split over the pool in whole tiles (from 64K
    entries a job); each job writes its own columns of out."""
    src = np.random.default_rng(m + n).standard_normal((m, n + 2)).astype(dtype)[:, 1:n + 1]
    out = np.full((n, m), np.nan, dtype)
    calls = native._kernels.pool_info()[2]
    with two_threads():
        kernel.transpose(src, out)
        calls = native._kernels.pool_info()[2] - calls
    np.testing.assert_array_equal(out, src.T)
    assert calls == split


def test_transpose_arguments_are_checked():
    with pytest.raises(ValueError, match=r"transpose: src \(2, 3\) and out \(2, 3\)"):
        kernel.transpose(np.ones((2, 3), np.float32), np.empty((2, 3), np.float32))
    with pytest.raises(ValueError, match="one dtype"):
        kernel.transpose(np.ones((2, 3), np.float32), np.empty((3, 2)))
    with pytest.raises(ValueError, match="columns adjacent"):
        kernel.transpose(np.ones((3, 2), np.float32).T, np.empty((3, 2), np.float32))
    with pytest.raises(ValueError, match="2-d float32 or float64"):
        kernel.transpose(np.ones(3, np.float32), np.empty(3, np.float32))


def test_a_product_computed_transposed_comes_back_in_the_order_asked_for(one_thread):
    r = np.random.default_rng(8)
    a, b = r.standard_normal((1000, 256)).astype(np.float32), r.standard_normal((256, 30)).astype(np.float32)
    assert not gemm.wins(1000, 256, 30) and gemm.wins(30, 256, 1000)  # the kernel's as B^T @ A^T
    want = _run(b.T, a.T).T  # the kernel's bits
    got = gemm.matmul(a, b)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    for out in (np.empty((1000, 30), np.float32), np.empty((30, 1000), np.float32).T):  # C and Fortran order
        assert gemm.matmul(a, b, out=out) is out
        np.testing.assert_array_equal(out, want)


# -- the size rule and the switches (gemm.matmul, the backend's matmul primitive) -----------------

@pytest.mark.parametrize("shapes", [((20, 256), (256, 1024)), ((2, 3, 16, 144), (3, 144, 256)),
                                    ((144, 16), (16, 1024)), ((5, 100, 64), (64, 130)), ((1000, 256), (256, 30))])
def test_matmul_follows_numpy_where_the_rule_sends_products_to_the_kernel(one_thread, shapes):
    r = np.random.default_rng(5)
    a, b = (r.standard_normal(s).astype(np.float32) for s in shapes)
    assert gemm._native(a, b, None) is not None, "the rule sends this product to NumPy: pick another shape"
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    for x, y in ((a, b), (a, np.asfortranarray(b) if b.ndim == 2 else b)):
        got = gemm.matmul(x, y)
        assert got.shape == want.shape and got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    out = np.empty(want.shape, np.float32)
    assert gemm.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_the_rule_keeps_blas_for_large_products_and_other_dtypes(one_thread):
    r = np.random.default_rng(6)
    big = r.standard_normal((300, 300)).astype(np.float32)
    assert gemm._native(big, big, None) is None  # many rows and a deep sum: BLAS
    small = r.standard_normal((20, 256)).astype(np.float32), r.standard_normal((256, 1024)).astype(np.float32)
    assert gemm._native(*small, None) is not None
    assert gemm._native(small[0].astype(np.float16), small[1].astype(np.float16), None) is None
    assert gemm._native(small[0], small[1].astype(np.float64), None) is None
    assert gemm._native(small[0][0], small[1], None) is None  # a vector: NumPy's
    # the out array overlaps an operand: NumPy buffers it
    x = np.ones((64, 64), np.float32)
    assert gemm._native(x[:, :40], x[:40], x[:40, :]) is None


def test_small_two_dim_products_stay_in_numpy(one_thread):
    """Below MIN_MACS multiply-adds a 2-D product is NumPy's, bit for bit (an MLP's weight gradients,
    which the kernel's fixed cost made slower), though the shape rule alone would take it; the same
    product inside a batch, and a 2-D one of MIN_MACS, still go to the kernel."""
    r = np.random.default_rng(9)
    for m, k, n in ((10, 64, 128), (64, 10, 128), (128, 64, 32)):
        assert m * k * n < gemm.MIN_MACS and (gemm.wins(m, k, n) or gemm.wins(n, k, m))
        a, b = r.standard_normal((m, k)).astype(np.float32), r.standard_normal((k, n)).astype(np.float32)
        assert gemm._native(a, b, None) is None
        np.testing.assert_array_equal(gemm.matmul(a, b), np.matmul(a, b))
    a, b = r.standard_normal((10, 64)).astype(np.float32), r.standard_normal((64, 128)).astype(np.float32)
    assert gemm._native(a[None], b[None], None) is not None  # a batch shares the fixed cost
    a, b = r.standard_normal((16, 256)).astype(np.float32), r.standard_normal((256, 256)).astype(np.float32)
    assert gemm.MIN_MACS == 16 * 256 * 256 and gemm._native(a, b, None) is not None


@pytest.mark.parametrize("a_shape, b_shape, split", [
    ((20, 256), (256, 1024), True),         # one product: runs of its column panels
    ((3, 32, 288), (3, 288, 256), True),    # three items for two jobs: items and column runs
    ((4, 16, 144), (144, 1000), True),      # four items (a broadcast B, a ragged last panel): items
    ((2, 3, 8, 64), (2, 3, 64, 96), False),  # two batch dims, under two jobs' worth of work (gemm.c's
    ((2, 4, 64, 64), (2, 4, 64, 32), True),  # MIN_JOB_MACS): one job; attention's heads, A in place
    ((1024, 64), (64, 512), True),          # more rows than columns: runs of rows
    ((3, 200, 64), (64, 520), True),        # three items, fewer rows than columns: items and column runs
    ((3, 1000, 64), (3, 64, 512), True),    # three items of more rows: items and runs of rows
], ids=["one", "three", "four", "small", "heads", "rows", "items-columns", "items-rows"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_several_blas_threads_split_the_product_over_the_pool_with_the_same_bits(one_thread, two_threads, a_shape,
                                                                                 b_shape, split, dtype):
    r = np.random.default_rng(sum(a_shape))
    a, b = r.standard_normal(a_shape).astype(dtype), r.standard_normal(b_shape).astype(dtype)
    one = gemm._native(a, b, None)
    assert one is not None, "the rule sent this product to NumPy: pick another shape"
    calls = native._kernels.pool_info()[2]
    with two_threads():
        two = gemm._native(a, b, None)
        calls = native._kernels.pool_info()[2] - calls
    np.testing.assert_array_equal(two, one)
    assert calls == split


@pytest.mark.parametrize("images", [1, 3, 4])
def test_several_blas_threads_split_the_convolution_by_images_with_the_same_bits(one_thread, two_threads, images):
    r = np.random.default_rng(images)
    x = r.standard_normal((images, 16, 32, 32)).astype(np.float32)
    w = r.standard_normal((16, 16, 3, 3)).astype(np.float32)
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    one = native.kernels()["conv2d"](x, w, None, **attrs)
    calls = native._kernels.pool_info()[2]
    with two_threads():
        two = native.kernels()["conv2d"](x, w, None, **attrs)
        calls = native._kernels.pool_info()[2] - calls
    np.testing.assert_array_equal(two, one)
    assert calls == (images > 1)


class _Spy:
    """The extension, counting its products."""
    def __init__(self):
        self.calls = 0

    def gemm(self, *args):
        self.calls += 1
        return kernel.gemm(*args)


def test_the_switch_sends_every_product_to_numpy(one_thread, monkeypatch):
    r = np.random.default_rng(7)
    a, b = r.standard_normal((20, 256)).astype(np.float32), r.standard_normal((256, 1024)).astype(np.float32)
    spy = _Spy()
    monkeypatch.setattr(gemm, "_gemm", spy)
    primitive = gemm.wrap(np.matmul)
    gemm.matmul(a, b), primitive(a, b)
    assert spy.calls == 2, "the rule sent the product to NumPy: pick another shape"
    monkeypatch.setattr(gemm, "ON", False)
    np.testing.assert_array_equal(gemm.matmul(a, b), np.matmul(a, b))
    np.testing.assert_array_equal(primitive(a, b), np.matmul(a, b))
    assert spy.calls == 2


@pytest.mark.parametrize("env", ["PLUGTORCH_NATIVE_GEMM", "PLUGTORCH_NATIVE_KERNELS"])
def test_the_environment_variables_turn_it_off(env):
    code = ("import numpy as np, plugtorch\n"
            "from threadpoolctl import threadpool_limits\n"
            "from plugtorch_backends.numpy_backend.native import gemm\n"
            "print(gemm.STATUS)\n"
            "a = np.random.default_rng(0).standard_normal((20, 256)).astype(np.float32)\n"
            "b = np.random.default_rng(1).standard_normal((256, 1024)).astype(np.float32)\n"
            "with threadpool_limits(limits=1, user_api='blas'):\n"
            "    got = (plugtorch.tensor(a) @ plugtorch.tensor(b)).numpy()\n"
            "print(gemm.ON, np.array_equal(got, a @ b))\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, env: "0"}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    status, equal = done.stdout.split("\n")[:2]
    assert status == ("off: PLUGTORCH_NATIVE_GEMM=0" if env == "PLUGTORCH_NATIVE_GEMM" else
                      "off: the native kernels are off")
    assert equal == "False True"


def test_the_backend_primitive_and_the_native_convolution_agree_bit_for_bit(one_thread):
    """The convolution's decomposition (the matmul primitive) and its native kernel call the product
    on the same layouts: with the kernel on they still agree exactly (their contract)."""
    import plugtorch as pt
    from plugtorch.core.ops.conv import _conv
    r = np.random.default_rng(8)
    x = r.standard_normal((4, 16, 16, 16)).astype(np.float32)
    w = r.standard_normal((32, 16, 3, 3)).astype(np.float32)
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    assert gemm._native(w.reshape(1, 32, 144), np.ones((4, 1, 144, 256), np.float32), None) is not None
    got = native.kernels()["conv2d"](x, w, None, **attrs)
    np.testing.assert_array_equal(got, _conv(pt.tensor(x), pt.tensor(w), None, **attrs).numpy())


_GEOMETRIES = [  # (N, C, H, W), (O, kh, kw), stride, padding, dilation: the ResNet's, and edges
    ((3, 16, 32, 32), (16, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 16, 32, 32), (32, 3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 16, 32, 32), (32, 1, 1), (2, 2), (0, 0), (1, 1)),
    ((2, 3, 32, 32), (16, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 5, 13, 21), (24, 3, 5), (1, 2), (2, 0), (2, 1)),
    ((1, 4, 9, 70), (8, 2, 3), (1, 1), (3, 4), (1, 3)),
    # output rows of whole vectors, the patches read in place: two inner blocks (K = 360 > KC) with
    # dilated rows; a row stride with wide padding; a kernel as tall as the image (rows off it)
    ((2, 40, 12, 16), (12, 3, 3), (1, 1), (1, 1), (2, 1)),
    ((2, 4, 18, 30), (9, 5, 5), (2, 1), (2, 3), (1, 1)),
    ((1, 3, 7, 16), (5, 7, 7), (1, 1), (3, 3), (1, 1)),
]


class _ConvSpy(_Spy):
    convs = 0

    def conv2d(self, *args):
        self.convs += 1
        return kernel.conv2d(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", _GEOMETRIES)
def test_the_convolution_packs_patches_to_the_same_bits_as_the_product_on_im2col(one_thread, monkeypatch, geometry,
                                                                                  dtype):
    """The forward without a patch matrix: bit for bit the op's decomposition (im2col + the backend's
    matmul), and within rounding of torch's convolution."""
    import torch

    import plugtorch as pt
    from plugtorch.core.ops.conv import _conv
    shape, (o, kh, kw), stride, padding, dilation = geometry
    r = np.random.default_rng(sum(shape) + o)
    x = r.standard_normal(shape).astype(dtype)
    w = r.standard_normal((o, shape[1], kh, kw)).astype(dtype)
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": 1}
    spy = _ConvSpy()
    monkeypatch.setattr(gemm, "_gemm", spy)
    for view in (x, np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2), np.pad(x, 1)[1:-1, 1:-1,
                                                                                                    1:-1, 1:-1]):
        got = native.kernels()["conv2d"](view, w, None, **attrs)
        want = _conv(pt.tensor(np.ascontiguousarray(view)), pt.tensor(w), None, **attrs).numpy()
        np.testing.assert_array_equal(got, want)
        ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, stride, padding, dilation)
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4 if dtype == np.float32 else 1e-12,
                                   atol=1e-4 if dtype == np.float32 else 1e-12)
    assert spy.convs == 3, "the rule sent this convolution's product to NumPy: pick another geometry"
    assert spy.calls == 3  # and the decomposition's product ran in the kernel too


def test_convolution_arguments_are_checked():
    x = np.ones((1, 2, 5, 5), np.float32)
    with pytest.raises(ValueError, match=r"conv2d: input \(1, 2, 5, 5\), weight \(4, 9\)"):
        kernel.conv2d(x, np.ones((4, 9), np.float32), np.empty((1, 4, 9), np.float32), 3, 3, 1, 1, 0, 0, 1, 1)
    with pytest.raises(ValueError, match="one dtype"):
        kernel.conv2d(x, np.ones((4, 18)), np.empty((1, 4, 9), np.float32), 3, 3, 1, 1, 0, 0, 1, 1)


def test_a_convolution_of_no_images(one_thread):
    w = np.ones((16, 16, 3, 3), np.float32)
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    got = native.kernels()["conv2d"](np.ones((0, 16, 32, 32), np.float32), w, None, **attrs)
    assert got.shape == (0, 16, 32, 32)


def test_the_extension_compiles_without_the_avx512_code():
    """gemm.c built for another architecture (-DGEMM_PORTABLE stands in for one) keeps only the
    module's functions, which refuse to run: it must still compile, or setup.py's optional build
    silently leaves the module out there."""
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler on PATH (gcc or cc): the portable build cannot be tried")
    source = Path(native.__file__).with_name("gemm.c")
    if not source.exists():
        pytest.skip("gemm.c is not beside the installed module (a wheel install): nothing to compile")
    got = subprocess.run([cc, "-fsyntax-only", "-std=c11", "-Wall", "-Werror", "-DGEMM_PORTABLE",
                          f"-I{sysconfig.get_paths()['include']}", str(source)], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr


def test_a_cpu_without_avx512_gets_numpy(monkeypatch):
    """The extension built for any x86-64 (or elsewhere, without the AVX-512 code) answers isa() == '':
    then nothing is sent to it."""
    class Portable:
        conv2d = conv2d_weight_grad = gemm = api = None

        @staticmethod
        def isa():
            return ""

    monkeypatch.setitem(sys.modules, "plugtorch_backends.numpy_backend.native._gemm", Portable)
    monkeypatch.setattr(native, "_gemm", Portable, raising=False)
    assert gemm._load() == (None, "off: this CPU has no AVX-512 (NumPy's BLAS runs every product)")
