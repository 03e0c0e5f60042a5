"""The direct weight gradient of a convolution (``gemm.c``'s ``conv2d_weight_grad``, through
``native/gemm.py`` and ``native/conv.py``): against torch over channel counts that do not fill a
register block, rows with and without a masked tail, strides (the columns dealt into planes),
padding, dilation, uneven and 1x1 kernels, both dtypes and strided operands; the rule that sends
a convolution to it or to the products; the extension's refusals; and gradcheck through
autograd."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native

import plugtorch as pt

torch = pytest.importorskip("torch", reason="torch is the reference for conv2d's weight gradient")
KERNELS = native.kernels()
pytestmark = pytest.mark.skipif(not KERNELS, reason=native.status())

CASES = [  # batch, in, out, kernel, stride, padding, dilation, input size (rows, columns)
    (3, 16, 16, (3, 3), (1, 1), (1, 1), (1, 1), (32, 32)),   # ResNet's block: whole 16-column vectors
    (2, 3, 5, (3, 3), (1, 1), (1, 1), (1, 1), (7, 9)),       # 5 channels, 27 patch rows: partial register blocks
    (2, 4, 7, (3, 2), (1, 1), (2, 0), (2, 1), (17, 19)),     # dilated, uneven kernel and padding
    (2, 5, 3, (5, 5), (1, 1), (2, 2), (1, 1), (20, 35)),     # a row of two vectors and a tail of three
    (2, 32, 16, (1, 1), (1, 1), (0, 0), (1, 1), (16, 17)),   # 1x1, one column past a vector
    (1, 1, 1, (1, 1), (1, 1), (0, 0), (1, 1), (1, 1)),       # one weight, one element
    (5, 16, 32, (3, 3), (1, 1), (1, 1), (1, 1), (14, 14)),   # the MNIST CNN's second convolution
    (3, 16, 32, (3, 3), (2, 2), (1, 1), (1, 1), (32, 32)),   # ResNet's downsampling convolution
    (2, 16, 32, (1, 1), (2, 2), (0, 0), (1, 1), (32, 32)),   # and its projection shortcut
    (2, 4, 7, (3, 2), (2, 3), (2, 0), (2, 1), (17, 50)),     # strides unequal, dilated, uneven padding
    (2, 5, 3, (5, 5), (3, 1), (2, 2), (1, 1), (20, 35)),     # stride 3 in rows only
    (1, 2, 3, (2, 3), (1, 4), (0, 1), (1, 2), (9, 70)),      # stride 4 in columns, dilated: two planes unread
]


def _spy(monkeypatch):
    """Whether each call of the rule took the kernel, in order."""
    from plugtorch_backends.numpy_backend.native import gemm
    taken = []
    real = gemm.conv2d_weight_grad

    def spy(*args):
        got = real(*args)
        taken.append(got is not None)
        return got
    monkeypatch.setattr(gemm, "conv2d_weight_grad", spy)
    return taken


def _data(case, dtype, seed=0):
    n, c, o, k, stride, padding, dilation, size = case
    out = [(s + 2 * p - d * (kk - 1) - 1) // st + 1 for s, st, p, d, kk in zip(size, stride, padding, dilation, k)]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c) + size).astype(dtype)
    gy = rng.standard_normal((n, o) + tuple(out)).astype(dtype)
    return x, gy


def _torch(case, x, gy):
    _, c, o, k, stride, padding, dilation, _ = case
    w = torch.zeros((o, c) + k, dtype=torch.float64 if x.dtype == np.float64 else torch.float32)
    return torch.ops.aten.convolution_backward(torch.tensor(gy), torch.tensor(x), w, None, list(stride), list(padding),
                                               list(dilation), False, [0, 0], 1, [False, True, False])[1].numpy()


def _kernel(case, x, gy):
    _, c, o, k, stride, padding, dilation, _ = case
    return KERNELS["conv2d_weight_grad"](gy, x, weight_shape=(o, c) + k, stride=stride, padding=padding,
                                         dilation=dilation, groups=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_extension_is_torchs_weight_gradient(case, dtype, one_thread):
    from plugtorch_backends.numpy_backend.native import gemm
    n, c, o, k, stride, padding, dilation, _ = case
    x, gy = _data(case, dtype)
    got = np.full((o, c * k[0] * k[1]), np.nan, dtype)  # every element written
    gemm._gemm.conv2d_weight_grad(x, gy, got, *k, *stride, *padding, *dilation)
    terms = n * gy.shape[2] * gy.shape[3]
    tol = (1e-5 if dtype == np.float32 else 1e-12) * np.sqrt(terms)
    np.testing.assert_allclose(got.reshape((o, c) + k), _torch(case, x, gy), rtol=1e-5, atol=tol)
    # strided operands (a transposed batch, every other column) give the same bits
    x_t = np.ascontiguousarray(x.swapaxes(0, 1)).swapaxes(0, 1)
    wide = np.zeros(x.shape[:3] + (2 * x.shape[3],), dtype)
    wide[..., ::2] = x
    for other in (x_t, wide[..., ::2]):
        again = np.empty_like(got)
        gemm._gemm.conv2d_weight_grad(other, gy, again, *k, *stride, *padding, *dilation)
        np.testing.assert_array_equal(again, got)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_op_takes_it_by_its_rule(case, one_thread, monkeypatch):
    taken = _spy(monkeypatch)
    x, gy = _data(case, np.float32, seed=1)
    got = _kernel(case, x, gy)
    assert taken == [gy.shape[3] >= 14]  # 7/8 of a vector of float32 columns, or more
    assert got.shape == (case[2], case[1]) + case[3] and got.dtype == np.float32 and got.flags.c_contiguous
    n = case[0]
    np.testing.assert_allclose(got, _torch(case, x, gy), rtol=1e-5, atol=1e-5 * np.sqrt(n * gy[0, 0].size))


def test_the_rule_declines_narrow_rows_many_weights_and_groups(one_thread, monkeypatch):
    taken = _spy(monkeypatch)
    rng = np.random.default_rng(2)
    for c, o, size, dtype, stride, want in [
            (8, 8, 8, np.float32, 1, False),     # 8 columns: half a vector of float32
            (8, 8, 8, np.float64, 1, True),      # a whole vector of float64
            (72, 64, 16, np.float32, 1, False),  # 64 x 648 weights: past the largest measured
            (64, 64, 16, np.float32, 1, True)]:
        x = rng.standard_normal((2, c, size, size)).astype(dtype)
        gy = rng.standard_normal((2, o, size // stride, size // stride)).astype(dtype)
        taken.clear()
        got = KERNELS["conv2d_weight_grad"](gy, x, weight_shape=(o, c, 3, 3), stride=(stride, stride), padding=(1, 1),
                                            dilation=(1, 1), groups=1)
        assert taken == [want], (c, o, size, dtype)
        ref = torch.nn.grad.conv2d_weight(torch.tensor(x), (o, c, 3, 3), torch.tensor(gy), padding=1).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
    taken.clear()  # groups never ask it
    x = rng.standard_normal((2, 8, 32, 32)).astype(np.float32)
    KERNELS["conv2d_weight_grad"](rng.standard_normal((2, 8, 32, 32)).astype(np.float32), x, weight_shape=(8, 4, 3, 3),
                                  stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=2)
    assert taken == []


def test_an_empty_batch_gives_zeros(one_thread):
    from plugtorch_backends.numpy_backend.native import gemm
    out = np.full((4, 27), np.nan, np.float32)
    gemm._gemm.conv2d_weight_grad(np.zeros((0, 3, 16, 16), np.float32), np.zeros((0, 4, 16, 16), np.float32), out,
                                  3, 3, 1, 1, 1, 1, 1, 1)
    np.testing.assert_array_equal(out, 0)


def test_the_extension_refuses_what_does_not_fit(one_thread):
    from plugtorch_backends.numpy_backend.native import gemm
    x = np.zeros((2, 3, 16, 16), np.float32)
    gy = np.zeros((2, 4, 16, 16), np.float32)
    with pytest.raises(ValueError, match=r"conv2d_weight_grad: input \(2, 3, 16, 16\), grad_output"):
        gemm._gemm.conv2d_weight_grad(x, gy[:, :, :15], np.empty((4, 27), np.float32), 3, 3, 1, 1, 1, 1, 1, 1)  # rows
    with pytest.raises(ValueError, match=r"kernel \(stride 2, 1; padding 1, 1"):
        gemm._gemm.conv2d_weight_grad(x, gy, np.empty((4, 27), np.float32), 3, 3, 2, 1, 1, 1, 1, 1)  # stride 2 rows
    with pytest.raises(ValueError, match="conv2d_weight_grad: input"):
        gemm._gemm.conv2d_weight_grad(x, gy, np.empty((4, 26), np.float32), 3, 3, 1, 1, 1, 1, 1, 1)  # the weight's size
    with pytest.raises(ValueError, match="conv2d_weight_grad: input"):  # columns not adjacent
        gemm._gemm.conv2d_weight_grad(x, gy[..., ::-1], np.empty((4, 27), np.float32), 3, 3, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="must share one dtype"):
        gemm._gemm.conv2d_weight_grad(x, gy.astype(np.float64), np.empty((4, 27), np.float32), 3, 3, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="float32 or float64"):
        gemm._gemm.conv2d_weight_grad(x.astype(np.int32), gy, np.empty((4, 27), np.float32), 3, 3, 1, 1, 1, 1, 1, 1)


def test_gradcheck_through_autograd(one_thread, monkeypatch):
    taken = _spy(monkeypatch)
    rng = np.random.default_rng(5)
    x = pt.tensor(rng.standard_normal((2, 3, 6, 9)))  # 9 columns of float64: a vector and a tail
    w = pt.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    weights = pt.tensor(rng.standard_normal((2, 4, 6, 9)))  # a scalar output: one backward, 108 weights nudged
    assert pt.autograd.gradcheck(lambda b: (pt.nn.functional.conv2d(x, b, padding=1) * weights).sum(), (w,))
    assert True in taken


def test_two_threads_split_the_output_channels_and_give_the_same_bits(one_thread, two_threads):
    from plugtorch_backends.numpy_backend.native import _kernels, gemm
    case = CASES[0]
    x, gy = _data(case, np.float32, seed=3)
    one = np.empty((16, 144), np.float32)
    gemm._gemm.conv2d_weight_grad(x, gy, one, 3, 3, 1, 1, 1, 1, 1, 1)
    calls = _kernels.pool_info()[2]
    with two_threads():
        two = np.empty_like(one)
        gemm._gemm.conv2d_weight_grad(x, gy, two, 3, 3, 1, 1, 1, 1, 1, 1)
        assert _kernels.pool_info()[2] == calls + 1  # one call split over the pool's two jobs
        # and the op takes the kernel with two threads too (the pool splits it as BLAS would)
        np.testing.assert_array_equal(_kernel(case, x, gy).reshape(16, 144), one)
    np.testing.assert_array_equal(two, one)
