"""index_select along the first axis as row copies on the pool (native/gather.py, take_rows):
NumPy's x[index] values in every dtype and shape it takes, NumPy's rules for negative and
out-of-range indices, the lowering elsewhere, and the same rows when split over two threads.
And its adjoint, rows added in at an index (add_rows, the backend's add_at): np.add.at's values."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native

import plugtorch as pt

pytestmark = pytest.mark.skipif(not native.enabled(), reason=native.status())

if native.enabled():
    from plugtorch_backends.numpy_backend.native import _kernels
    from plugtorch_backends.numpy_backend.native.gather import add_at, index_select


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, np.int64, np.bool_, np.complex64])
@pytest.mark.parametrize("shape", [(50, 3), (50, 1, 4, 5), (50, 0), (7, 1)])
def test_rows_are_numpys(dtype, shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    for index in (rng.integers(-shape[0], shape[0], 40), np.array([], np.int64), np.array([3, 3, -1, 0])):
        index = index.astype(np.int64)
        got = index_select(x, index, dim=0)
        want = x[index]
        assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)


def test_strided_indices_and_other_layouts_give_numpys_values():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20, 6)).astype(np.float32)
    index = rng.integers(0, 20, 30)[::3]  # a DistributedSampler's share: a strided view
    np.testing.assert_array_equal(index_select(x, index, dim=0), x[index])
    for y, dim in ((x.T, 0), (x[:, ::2], 0), (x, 1), (x[0], 0)):  # the lowering's NumPy indexing
        idx = np.array([1, 0, -1])
        want = y[(slice(None),) * dim + (idx,)]
        np.testing.assert_array_equal(index_select(y, idx, dim=dim), want)


def test_out_of_range_raises_numpys_error_before_writing():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = np.full((2, 3), -7, np.float32)
    for bad in (4, -5):
        with pytest.raises(IndexError, match=rf"index {bad} is out of bounds for axis 0 with size 4"):
            _kernels.take_rows(x, np.array([1, bad]), out)
        assert (out == -7).all()
    with pytest.raises(IndexError, match=r"index_select\(\): index out of range in self: dimension 0 has size 4"):
        pt.tensor(x).index_select(0, pt.tensor([0, 9]))  # the op's torch message over NumPy's


def test_mismatched_arguments_are_refused():
    x = np.zeros((4, 3), np.float32)
    idx = np.array([0, 1])
    for out, index in ((np.zeros((2, 3), np.float64), idx), (np.zeros((3, 3), np.float32), idx),
                       (np.zeros((2, 4), np.float32), idx), (np.zeros((2, 3), np.float32), idx.astype(np.int32)),
                       (np.zeros((6, 2), np.float32).T, np.array([0, 1, 2, 3, 0, 1]))):
        with pytest.raises(ValueError, match="take_rows: expected C-contiguous"):
            _kernels.take_rows(x, index, out)


def test_split_over_two_threads_gives_the_same_rows(native_pool_width):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5000, 1, 28, 28)).astype(np.float32)
    index = rng.permutation(5000)[:512]
    calls = _kernels.pool_info()[2]
    got = native_pool_width(2, lambda: index_select(x, index, dim=0))
    assert _kernels.pool_info()[2] > calls, "a 1.6 MB gather splits over the pool"
    np.testing.assert_array_equal(got, x[index])


def test_a_loader_batch_runs_the_kernel(numpy_kernel_calls):
    calls = numpy_kernel_calls("index_select")
    data = pt.utils.data.TensorDataset(pt.randn(30, 2, 3), pt.arange(30))
    (xb, yb), = list(pt.utils.data.DataLoader(data, batch_size=30, shuffle=True))
    assert calls == ["index_select", "index_select"]
    np.testing.assert_array_equal(xb.numpy(), data.tensors[0].numpy()[yb.numpy()])


def _add_at_calls(fallback_calls):
    def fallback(out, index, values):
        fallback_calls.append(index)
        np.add.at(out, index, values)
    return add_at(fallback)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(50, 3), (50, 2, 4), (7,), (9, 128)])
def test_rows_added_at_an_index_are_numpys_add_at(dtype, shape):
    """Repeated and negative indices accumulate, in index order (each row's sum in the order of
    np.add.at's sequential loop, so the bits are its)."""
    rng = np.random.default_rng(2)
    calls: list = []
    ours = _add_at_calls(calls)
    for index in (rng.integers(-shape[0], shape[0], (5, 8)), np.array([3, 3, -1, 0, 3, -shape[0]]),
                  np.array([], np.int64), np.array(2)):
        values = rng.standard_normal(index.shape + shape[1:]).astype(dtype)
        base = rng.standard_normal(shape).astype(dtype)
        got, want = base.copy(), base.copy()
        ours(got, (index,), values)
        np.add.at(want, (index,), values)
        np.testing.assert_array_equal(got, want)
    assert not calls  # every case in C


def test_other_indices_and_dtypes_go_to_the_fallback():
    calls: list = []
    ours = _add_at_calls(calls)
    x = np.zeros((4, 3), np.float32)
    ours(x, (np.array([0, 1]), np.array([2, 2])), np.ones(2, np.float32))  # elements, not rows
    ours(np.zeros((4, 3), np.int64), (np.array([1, 1]),), np.ones((2, 3), np.int64))  # not a float
    ours(np.zeros((3, 4), np.float32).T, (np.array([1]),), np.ones((1, 3), np.float32))  # not C-contiguous
    ours(x, (np.array([True, False, True, False]),), np.ones((2, 3), np.float32))  # a mask
    assert len(calls) == 4


def test_rows_added_out_of_range_raise_numpys_error_before_writing():
    out = np.zeros((4, 3), np.float32)
    for bad in (4, -5):
        with pytest.raises(IndexError, match=rf"index {bad} is out of bounds for axis 0 with size 4"):
            _kernels.add_rows(out, np.array([1, bad]), np.ones((2, 3), np.float32))
        assert not out.any()
    with pytest.raises(ValueError, match="add_rows: expected C-contiguous 2-D out and values of one float dtype"):
        _kernels.add_rows(out, np.array([1]), np.ones((1, 3), np.float64))


def test_an_embeddings_gradient_is_torchs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((50, 8)).astype(np.float32)
    idx = rng.integers(0, 50, (6, 7))
    up = rng.standard_normal((6, 7, 8)).astype(np.float32)
    grads = []
    for lib in (pt, torch):
        w = lib.tensor(weight, requires_grad=True)
        (lib.nn.functional.embedding(lib.tensor(idx), w) * lib.tensor(up)).sum().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6, atol=1e-6)
