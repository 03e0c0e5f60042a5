"""conv2d's gradients on the NumPy backend (``native/conv.py``). The input gradient: with stride 1
and groups 1 a convolution of the output gradient with the flipped weight in the native GEMM,
elsewhere the decomposition's products and fold. The weight gradient: per-image native products
where the GEMM takes them (with the direct kernel turned off; its own tests are in
test_native_conv_weight_grad.py). Against torch (values and, through autograd, gradients) over strides,
padding, dilation, 1x1 and odd sizes, groups, dtypes and layouts; which path ran; and gradcheck
through the op."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native

import plugtorch as pt

torch = pytest.importorskip("torch", reason="torch is the reference for conv2d's gradient")
KERNELS = native.kernels()
pytestmark = pytest.mark.skipif(not KERNELS, reason=native.status())

CASES = [  # in, out, kernel, stride, padding, dilation, groups, input size
    (16, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, (9, 11)),     # a ResNet block's convolution, odd sizes
    (7, 5, (3, 3), (1, 1), (0, 0), (1, 1), 1, (8, 10)),       # no padding: the flipped kernel pads by 2
    (6, 4, (3, 2), (1, 1), (2, 0), (2, 1), 1, (11, 9)),       # dilated, uneven kernel and padding
    (12, 8, (1, 1), (1, 1), (0, 0), (1, 1), 1, (7, 13)),      # 1x1
    (16, 32, (3, 3), (1, 1), (1, 1), (1, 1), 1, (14, 14)),    # fewer input than output channels: decomposition
    (6, 9, (3, 3), (1, 1), (3, 1), (1, 1), 1, (6, 12)),       # padding past the kernel's reach: decomposition
    (16, 32, (3, 3), (2, 2), (1, 1), (1, 1), 1, (9, 11)),     # strided: decomposition
    (16, 32, (1, 1), (2, 2), (0, 0), (1, 1), 1, (8, 8)),      # the projection shortcut
    (4, 6, (3, 3), (1, 1), (1, 1), (1, 1), 2, (9, 9)),        # groups: decomposition
]


def _fast(case):
    c, o, k, stride, padding, dilation, groups, _ = case
    reach = all(d * (kk - 1) >= p for d, kk, p in zip(dilation, k, padding))
    return groups == 1 and stride == (1, 1) and c >= o and reach


def _torch_grad(case, x, w, gy):
    _, _, _, stride, padding, dilation, groups, _ = case
    tx = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.conv2d(tx, torch.tensor(w), None, stride, padding, dilation, groups)
    y.backward(torch.tensor(gy))
    return tx.grad.numpy()


def _data(case, dtype, seed=0):
    c, o, k, stride, padding, dilation, groups, size = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, c) + size).astype(dtype)
    w = rng.standard_normal((o, c // groups) + k).astype(dtype)
    out = [(s + 2 * p - d * (kk - 1) - 1) // st + 1 for s, p, d, kk, st in zip(size, padding, dilation, k, stride)]
    gy = rng.standard_normal((3, o, *out)).astype(dtype)
    return x, w, gy


def _tol(dtype, case):
    terms = case[1] // case[6] * case[2][0] * case[2][1]
    return (1e-5, 1e-5 * terms) if dtype == np.float32 else (1e-12, 1e-12 * terms)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_kernel_is_torchs_gradient(case, dtype, one_thread, monkeypatch):
    from plugtorch_backends.numpy_backend.native import conv, gemm
    ran = []
    real = gemm.conv2d
    monkeypatch.setattr(gemm, "conv2d", lambda *a: ran.append(real(*a)) or ran[-1])
    x, w, gy = _data(case, dtype)
    _, _, _, stride, padding, dilation, groups, _ = case
    got = KERNELS["conv2d_input_grad"](gy, w, input_shape=x.shape, stride=stride, padding=padding,
                                       dilation=dilation, groups=groups)
    assert ran == ([True] if _fast(case) else [])  # the flipped convolution ran where it applies, alone
    assert got.shape == x.shape and got.dtype == x.dtype and got.flags.c_contiguous
    rtol, atol = _tol(dtype, case)
    np.testing.assert_allclose(got, _torch_grad(case, x, w, gy), rtol=rtol, atol=atol)
    # the decomposition's products and fold, the fallback, give torch's values as well
    products = conv._input_grad_products(gy, w, x.shape, stride, padding, dilation, groups)
    np.testing.assert_allclose(products, got, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", [CASES[0], CASES[2]], ids=str)
def test_layouts_of_the_gradient_and_weight(case, one_thread):
    # a transposed output gradient (as from a permuted activation) and a strided weight view
    x, w, gy = _data(case, np.float32, seed=1)
    _, _, _, stride, padding, dilation, groups, _ = case
    attrs = dict(input_shape=x.shape, stride=stride, padding=padding, dilation=dilation, groups=groups)
    want = KERNELS["conv2d_input_grad"](gy, w, **attrs)
    gy_t = np.ascontiguousarray(gy.swapaxes(0, 1)).swapaxes(0, 1)
    w_wide = np.pad(w, ((0, 0), (0, 0), (0, 0), (0, 2)))[..., :w.shape[-1]]
    np.testing.assert_array_equal(KERNELS["conv2d_input_grad"](gy_t, w_wide, **attrs), want)


def test_without_the_native_product_the_decomposition_runs(monkeypatch):
    # no AVX-512, or the pool not following OpenBLAS: the GEMM declines and the products and fold serve
    from plugtorch_backends.numpy_backend.native import gemm
    monkeypatch.setattr(gemm, "ON", False)
    case = CASES[0]
    x, w, gy = _data(case, np.float32, seed=2)
    got = KERNELS["conv2d_input_grad"](gy, w, input_shape=x.shape, stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                                       groups=1)
    np.testing.assert_allclose(got, _torch_grad(case, x, w, gy), rtol=1e-5, atol=1e-4)


def test_autograd_runs_the_kernel_and_matches_torch(numpy_kernel_calls, one_thread):
    calls = numpy_kernel_calls("conv2d_input_grad")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    ours = pt.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    (pt.nn.functional.conv2d(ours, pt.tensor(w), padding=1) ** 2).sum().backward()
    (torch.nn.functional.conv2d(theirs, torch.tensor(w), padding=1) ** 2).sum().backward()
    assert calls == ["conv2d_input_grad"]
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("stride, padding", [((1, 1), (1, 1)), ((2, 1), (0, 1))])
def test_gradcheck(stride, padding, one_thread, monkeypatch):
    from plugtorch_backends.numpy_backend.native import gemm
    ran = []
    real = gemm.conv2d
    monkeypatch.setattr(gemm, "conv2d", lambda *a: ran.append(real(*a)) or ran[-1])
    rng = np.random.default_rng(5)
    x = pt.tensor(rng.standard_normal((1, 4, 8, 8)), requires_grad=True)  # 64 columns: the GEMM's rule takes it
    w = pt.tensor(rng.standard_normal((4, 4, 3, 3)), requires_grad=True)
    assert pt.autograd.gradcheck(lambda a, b: pt.nn.functional.conv2d(a, b, stride=stride, padding=padding), (x, w))
    assert (True in ran) == (stride == (1, 1))  # the input gradient's flipped convolution was checked


@pytest.fixture
def products_only(monkeypatch):
    """The weight gradient by products: the direct kernel (test_native_conv_weight_grad.py) declines."""
    from plugtorch_backends.numpy_backend.native import gemm
    monkeypatch.setattr(gemm, "conv2d_weight_grad", lambda *a: None)


def test_gradcheck_of_the_per_image_weight_gradient(one_thread, products_only, monkeypatch):
    from plugtorch_backends.numpy_backend.native import conv
    took = []
    real = conv._batch_in_gemm
    monkeypatch.setattr(conv, "_batch_in_gemm", lambda *a: took.append(real(*a)) or took[-1])
    rng = np.random.default_rng(5)
    x = pt.tensor(rng.standard_normal((2, 4, 16, 16)))  # 256 positions: the per-image products take it
    w = pt.tensor(rng.standard_normal((4, 4, 3, 3)), requires_grad=True)
    weights = pt.tensor(rng.standard_normal((2, 4, 16, 16)))  # a scalar output: one backward, 144 weights nudged
    assert pt.autograd.gradcheck(lambda b: (pt.nn.functional.conv2d(x, b, padding=1) * weights).sum(), (w,))
    assert True in took


# -- the weight gradient's per-image native products --------------------------------------------

WEIGHT_CASES = [  # in, out, kernel, stride, padding, dilation, groups, input size; 256+ output positions
    (16, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, (16, 17)),
    (8, 6, (3, 2), (1, 1), (2, 0), (2, 1), 1, (17, 17)),      # dilated, uneven
    (32, 16, (1, 1), (1, 1), (0, 0), (1, 1), 1, (16, 17)),    # 1x1
    (8, 6, (3, 2), (2, 1), (2, 0), (2, 1), 1, (19, 9)),       # strided: one product over the batch
    (16, 32, (3, 3), (1, 1), (1, 1), (1, 1), 1, (16, 16)),    # fewer input than output channels: one product
    (16, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, (15, 15)),    # 225 positions: one product
    (3, 3, (3, 3), (1, 1), (1, 1), (1, 1), 1, (16, 16)),      # 27 patch rows: BLAS's batch product
]
PER_IMAGE = [True, True, True, None, None, None, False]  # whether the per-image products take each (None: not asked)


def _torch_weight_grad(case, x, w, gy):
    _, _, _, stride, padding, dilation, groups, _ = case
    tw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(torch.tensor(x), tw, None, stride, padding, dilation, groups).backward(torch.tensor(gy))
    return tw.grad.numpy()


@pytest.mark.parametrize("chunk", [1 << 30, 1], ids=["one-chunk", "image-by-image"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case, per_image", zip(WEIGHT_CASES, PER_IMAGE), ids=str)
def test_the_weight_gradient_is_torchs(case, per_image, dtype, chunk, one_thread, products_only, monkeypatch):
    from plugtorch_backends.numpy_backend.native import conv
    monkeypatch.setattr(conv, "_CACHED_PATCHES", chunk)
    ran = []
    real = conv._batch_in_gemm
    monkeypatch.setattr(conv, "_batch_in_gemm", lambda *a: ran.append(real(*a)) or ran[-1])
    x, w, gy = _data(case, dtype, seed=6)
    _, _, _, stride, padding, dilation, groups, _ = case
    got = KERNELS["conv2d_weight_grad"](gy, x, weight_shape=w.shape, stride=stride, padding=padding,
                                        dilation=dilation, groups=groups)
    assert ran == ([] if per_image is None else [per_image])
    assert got.shape == w.shape and got.dtype == w.dtype and got.flags.c_contiguous
    terms = 3 * gy.shape[2] * gy.shape[3]
    tol = (1e-5 if dtype == np.float32 else 1e-12) * terms
    np.testing.assert_allclose(got, _torch_weight_grad(case, x, w, gy), rtol=1e-5, atol=tol)
    # a non-contiguous output gradient and input: the same values
    gy_t = np.ascontiguousarray(gy.swapaxes(0, 1)).swapaxes(0, 1)
    x_t = np.ascontiguousarray(x.swapaxes(0, 1)).swapaxes(0, 1)
    np.testing.assert_array_equal(KERNELS["conv2d_weight_grad"](gy_t, x_t, weight_shape=w.shape, stride=stride,
                                                                padding=padding, dilation=dilation, groups=groups),
                                  got)


@pytest.mark.parametrize("size", [10, 16], ids=["products", "direct-kernel"])  # 16 columns: the direct kernel's rule
def test_the_weight_gradient_through_autograd(size, one_thread):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 8, size, size)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    ours, theirs = pt.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    (pt.nn.functional.conv2d(pt.tensor(x), ours, padding=1) ** 2).sum().backward()
    (torch.nn.functional.conv2d(torch.tensor(x), theirs, padding=1) ** 2).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-2)
