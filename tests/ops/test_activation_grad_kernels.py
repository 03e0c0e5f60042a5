"""The activations' gradient ops, threshold_backward (relu's), tanh_backward and sigmoid_backward:
the NumPy backend's kernels (NumPy passes in fused.py, one C pass in native/) equal the ops'
decompositions bit for bit in every layout and float dtype (threshold_backward's give torch's
+0, not -0 or nan, at or below the threshold, whatever the gradient there), and relu's,
tanh's, sigmoid's and an LSTM cell's backward run them. (Against torch's aten ops, gradients and
second gradients included: the conformance kit runs the ops' samples.)"""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import fused, native

import plugtorch as pt
from plugtorch.core.ops import activation

OPS = ("tanh_backward", "sigmoid_backward")
# each op's decomposition: what a backend without a kernel for it runs
DECOMPOSITIONS = {name: pt.get_registry().ops[name].decompose
                  for name in ("tanh_backward", "sigmoid_backward", "threshold_backward", "relu")}
_threshold_backward = DECOMPOSITIONS["threshold_backward"]
NATIVE = native.kernels()
KERNELS = [pytest.param(getattr(fused, name), name, id=f"numpy-{name}") for name in OPS] + [
    pytest.param(NATIVE.get(name), name, id=f"native-{name}",
                 marks=pytest.mark.skipif(not NATIVE, reason=native.status())) for name in OPS]


def _layouts(rng, dtype):
    base = rng.uniform(-1, 1, (4, 3, 5, 6)).astype(dtype)
    yield "contiguous", base
    yield "channel-major", np.ascontiguousarray(base.swapaxes(0, 1)).swapaxes(0, 1)
    yield "strided", base[:, :, ::2]
    yield "0-d", base[0, 0, 0, 0].reshape(())
    yield "empty", base[:0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,name", KERNELS)
def test_the_kernel_is_the_decomposition(kernel, name, dtype):
    rng = np.random.default_rng(0)
    for layout, y in _layouts(rng, dtype):
        g = np.empty_like(y)
        g[...] = rng.standard_normal(y.shape)
        got = kernel(g, y)
        want = DECOMPOSITIONS[name](pt.tensor(g), pt.tensor(y)).numpy()
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape, layout
        np.testing.assert_array_equal(got, want, err_msg=layout)
        # a Fortran-ordered gradient with a C-ordered output: the NumPy passes, same values
        np.testing.assert_array_equal(kernel(g.copy(order="F"), y), want, err_msg=layout + ", mixed")


@pytest.mark.parametrize("op,name", [(pt.tanh, "tanh_backward"), (pt.sigmoid, "sigmoid_backward")])
def test_the_activation_backward_runs_the_kernel(numpy_kernel_calls, op, name):
    calls = numpy_kernel_calls(name)
    x = pt.tensor([[-1.5, 0.25], [2.0, -0.5]], requires_grad=True)
    op(x).sum().backward()
    assert calls == [name]
    y = op(x.detach()).numpy()
    want = 1 - y * y if name == "tanh_backward" else y * (1 - y)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)


def test_an_lstm_cell_backward_goes_through_both(numpy_kernel_calls):
    calls = numpy_kernel_calls(*OPS)
    cell = pt.nn.LSTMCell(3, 4)
    h, c = cell(pt.randn(2, 3))
    (h.sum() + c.sum()).backward()
    assert {"tanh_backward", "sigmoid_backward"} <= set(calls)


@pytest.mark.parametrize("name", OPS)
def test_operands_of_two_float_dtypes_promote(name):
    g = pt.tensor([1.0, -2.0], dtype=pt.float64)
    y = pt.tensor([0.5, 0.25], dtype=pt.float32)
    out = getattr(activation, name)(g, y)
    assert out.dtype is pt.float64
    np.testing.assert_array_equal(out.numpy(), DECOMPOSITIONS[name](g, y.double()).numpy())


@pytest.mark.parametrize("name", OPS)
def test_bad_operands_name_the_op(name):
    fn = getattr(activation, name)
    with pytest.raises(RuntimeError, match=rf"{name}: grad_output \[3\] and output \[2\]"):
        fn(pt.ones(3), pt.ones(2))
    with pytest.raises(RuntimeError, match=rf"{name}\(\): expected floating point operands, got int64"):
        fn(pt.ones(2, dtype=pt.int64), pt.ones(2, dtype=pt.int64))
    with pytest.raises(TypeError, match=rf"{name}\(\): grad_output and output must be Tensors"):
        fn(pt.ones(2), [0.5, 0.5])


@pytest.mark.skipif(not NATIVE, reason=native.status())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threshold", [0, 0.25])
def test_threshold_kernel_is_the_decomposition(dtype, threshold):
    rng = np.random.default_rng(0)
    for name, x in _layouts(rng, dtype):
        g = np.empty_like(x)
        g[...] = rng.standard_normal(x.shape)
        got = NATIVE["threshold_backward"](g, x, threshold=threshold)
        want = _threshold_backward(pt.tensor(g), pt.tensor(x), threshold=threshold).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
        if name in ("contiguous", "channel-major"):  # handed back in the input's layout
            assert got.strides == x.strides, name


@pytest.mark.skipif(not NATIVE, reason=native.status())
def test_threshold_mixed_layouts_and_dtypes_take_the_numpy_kernel():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    for g in (np.asfortranarray(rng.standard_normal((5, 4)).astype(np.float32)),
              rng.standard_normal((5, 4))):
        got = NATIVE["threshold_backward"](g, x, threshold=0)
        assert got.dtype == g.dtype
        np.testing.assert_array_equal(_bits(got), _bits(np.where(x > 0, g, g.dtype.type(0))))
    x[1, 2] = np.nan  # the formula's rule is the kernel's: a NaN input passes the gradient on
    g = np.asfortranarray(rng.standard_normal((5, 4)).astype(np.float32))
    assert NATIVE["threshold_backward"](g, x, threshold=0)[1, 2] == g[1, 2]


@pytest.mark.skipif(not NATIVE, reason=native.status())
def test_no_nan_below_the_threshold():
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    g = np.array([np.inf, np.nan, np.inf], np.float32)
    np.testing.assert_array_equal(NATIVE["threshold_backward"](g, x, threshold=0), [0, 0, np.inf])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_nan_input_passes_the_gradient_on(dtype):
    # torch's threshold_backward is 0 where input <= threshold, else grad: NaN is not <= 0
    x = np.array([np.nan, -1.0, 0.0, 2.0, np.nan], dtype)
    g = np.array([5.0, 6.0, 7.0, 8.0, -9.0], dtype)
    want = [5, 0, 0, 8, -9]
    decomposed = _threshold_backward(pt.tensor(g), pt.tensor(x), threshold=0).numpy()
    np.testing.assert_array_equal(decomposed, want)
    if NATIVE:
        np.testing.assert_array_equal(NATIVE["threshold_backward"](g, x, threshold=0), want)
    xt = pt.tensor(x, requires_grad=True)  # relu's gradient, through whatever kernel runs
    pt.relu(xt).backward(pt.tensor(g))
    np.testing.assert_array_equal(xt.grad.numpy(), want)


@pytest.mark.skipif(not NATIVE, reason=native.status() + " (the NumPy passes have no threshold_backward)")
def test_relu_backward_runs_the_kernel(numpy_kernel_calls):
    calls = numpy_kernel_calls("threshold_backward")
    x = pt.tensor([[-1.0, 2.0], [3.0, -4.0]], requires_grad=True)
    pt.relu(x).sum().backward()
    assert calls == ["threshold_backward"]
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1], [1, 0]])


@pytest.mark.skipif(not NATIVE, reason=native.status())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_relu_is_the_numpy_kernels(dtype):
    # the backend's NumPy kernel, torch's x < 0 ? 0 : x: -0 for -0, nan for nan, in x's layout
    rng = np.random.default_rng(2)
    specials = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -1e-45, 1e-45], dtype)
    for name, x in _layouts(rng, dtype):
        x = x.copy() if name == "strided" else x
        flat = x.reshape(-1) if x.flags.c_contiguous else None
        if flat is not None and flat.size >= specials.size:
            flat[:specials.size] = specials
        got, want = NATIVE["relu"](x), fused.relu(x)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert (np.signbit(got) == np.signbit(want)).all(), name
        if name in ("contiguous", "channel-major"):
            assert got.strides == x.strides, name
    # large enough to be split over the pool's jobs where it has threads
    big = rng.standard_normal((64, 16, 28, 28)).astype(dtype).swapaxes(0, 1)
    np.testing.assert_array_equal(NATIVE["relu"](big), np.maximum(big, 0))


@pytest.mark.skipif(not NATIVE, reason=native.status())
def test_native_relu_leaves_other_dtypes_and_layouts_to_numpy():
    x = np.arange(-3, 3).reshape(2, 3)
    for a in (x, x.astype(np.float16), np.asfortranarray(x, dtype=np.float32)[:, ::2]):
        got = NATIVE["relu"](a)
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, np.maximum(a, 0))


def test_relu_runs_the_backends_kernel(numpy_kernel_calls):
    calls = numpy_kernel_calls("relu")
    x = pt.tensor([[-1.0, 2.0], [float("nan"), -0.0]])
    y = pt.relu(x)
    assert calls == ["relu"]
    np.testing.assert_array_equal(y.numpy(), [[0.0, 2.0], [np.nan, 0.0]])


def test_relus_decomposition_keeps_nan():
    # the decomposition (what a backend without a relu kernel runs) gives torch's x < 0 ? 0 : x:
    # nan stays nan rather than becoming 0, and -0.0 stays -0.0
    x = np.array([np.nan, -0.0, 0.0, -2.0, 3.0, -np.inf, np.inf], np.float32)
    got = DECOMPOSITIONS["relu"](pt.tensor(x)).numpy()
    np.testing.assert_array_equal(got, np.maximum(x, 0))
    np.testing.assert_array_equal(np.signbit(got), [False, True, False, False, False, False, False])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_numpy_relu_keeps_negative_zero_on_strided_input(dtype):
    # the NumPy kernel serves what the C one declines (strided views, float16): torch's values too
    x = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -1e-45, 1e-45, -2.0, 3.0, -0.0] * 3, dtype)
    for view in (x, x[::2], x[::-3]):
        got = fused.relu(view)
        want = np.where(view < 0, dtype(0), view)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def _bits(a):
    """An array's bit patterns, so that -0 differs from +0 and one nan from another."""
    a = np.asarray(a)
    return a.view({2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize])


THRESHOLD_KERNELS = [pytest.param(_threshold_backward, id="decomposition"),
                     pytest.param(fused.threshold_backward, id="numpy"),
                     pytest.param(NATIVE.get("threshold_backward"), id="native",
                                  marks=pytest.mark.skipif(not NATIVE, reason=native.status()))]


@pytest.mark.parametrize("kernel", THRESHOLD_KERNELS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("threshold", [0, 0.5])
def test_threshold_backward_is_torchs_bit_for_bit(torch, kernel, dtype, threshold):
    # +0 at or below the threshold, for a negative, infinite or nan gradient too (a multiply by
    # the mask gives -0 and nan there), and the gradient's own bits above it (-0 and nan kept)
    special = [-0.0, 0.0, -1.0, np.inf, -np.inf, np.nan, -2.5, 0.5]
    rng = np.random.default_rng(3)
    g = np.concatenate([special * 3, rng.standard_normal(40)]).astype(np.float32)
    x = np.concatenate([[-1.0] * 8 + [threshold] * 8 + [1.0] * 8, rng.standard_normal(40)]).astype(np.float32)
    x[[5, 13]] = np.nan  # a nan input passes the gradient on
    tg, tx = (torch.tensor(a).to(getattr(torch, dtype)) for a in (g, x))
    want = torch.ops.aten.threshold_backward(tg, tx, threshold)
    ours = [pt.tensor(a).to(getattr(pt, dtype)) for a in (g, x)]
    if kernel is _threshold_backward:
        got = kernel(*ours, threshold=threshold)
        assert got.dtype is getattr(pt, dtype)
        got_nan, got_bits = got.isnan().numpy(), _int_bits(got)
    else:  # the backend's arrays (bfloat16: ml_dtypes')
        got = kernel(*(o._data for o in ours), threshold=threshold)
        assert got.dtype == ours[0]._data.dtype
        got_nan, got_bits = np.isnan(got.astype(np.float32)), _bits(got)
    # nan's payload is the conversions' (torch rounds float32 nan to bfloat16 0xffff, NumPy's
    # ml_dtypes to 0x7fc0): nan where torch has nan, and the same bits everywhere else
    nan = want.isnan().numpy()
    np.testing.assert_array_equal(got_nan, nan)
    np.testing.assert_array_equal(got_bits[~nan], _int_bits(want)[~nan])


def _int_bits(t):
    """A plugtorch or torch floating tensor's bit patterns as a NumPy integer array."""
    width = {2: "int16", 4: "int32", 8: "int64"}[t.element_size()]
    if isinstance(t, pt.Tensor):
        return t.view(getattr(pt, width)).numpy()
    import torch
    return t.view(getattr(torch, width)).numpy()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_relus_gradient_is_torchs_bit_for_bit(torch, dtype):
    # through whichever kernel the backend registered (the C one, or the NumPy one where it is off)
    rng = np.random.default_rng(6)
    x, g = (rng.standard_normal((4, 33)).astype(np.float32) for _ in range(2))
    grads = []
    for m in (pt, torch):
        v = m.tensor(x).to(getattr(m, dtype)).requires_grad_()
        m.relu(v).backward(m.tensor(g).to(getattr(m, dtype)))
        grads.append(_int_bits(v.grad))
    np.testing.assert_array_equal(*grads)
