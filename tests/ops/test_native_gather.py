"""index_select along the first axis as row copies on the pool (native/gather.py, take_rows):
NumPy's x[index] values in every dtype and shape it takes, NumPy's rules for negative and
out-of-range indices, the lowering elsewhere, and the same rows when split over two threads."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native

import plugtorch as pt

pytestmark = pytest.mark.skipif(not native.enabled(), reason=native.status())

if native.enabled():
    from plugtorch_backends.numpy_backend.native import _kernels
    from plugtorch_backends.numpy_backend.native.gather import index_select


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
