"""layer_norm and batch_norm, their input gradients and their weight gradients on the NumPy backend: one C pass over
the rows each (native/norm.py), or NumPy passes (fused.py) where the C is not built, against the
ops' decompositions in several shapes, layouts and float dtypes, with and without the affine
params; a layer_norm backward runs them, and matches torch's."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import fused, native

import plugtorch as pt

NAMES = ("layer_norm", "layer_norm_backward", "layer_norm_weight_grad", "layer_norm_gradients")
DECOMPOSITIONS = {name: pt.get_registry().ops[name].decompose for name in NAMES}
NATIVE = native.kernels()
KERNELS = [pytest.param(getattr(fused, name), name, id=f"numpy-{name}") for name in NAMES] + [
    pytest.param(NATIVE.get(name), name, id=f"native-{name}",
                 marks=pytest.mark.skipif(not NATIVE, reason=native.status())) for name in NAMES]


def _cases(rng, dtype):
    """(label, input, normalized_shape): rows of one and of many dims, a transposed input, empty."""
    big = (rng.standard_normal((6, 5, 24)) * 3 + 1).astype(dtype)
    yield "rows of 24", big, (24,)
    yield "rows of 5 x 24", big, (5, 24)
    yield "transposed", big.transpose(1, 0, 2), (24,)
    yield "one row", big[0, 0], (24,)
    yield "odd width", big[..., :7], (7,)
    yield "empty", big[:0], (24,)


def _tensor(a):
    return None if a is None else pt.tensor(a)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,name", KERNELS)
def test_the_kernel_is_the_decomposition(kernel, name, dtype, affine):
    rng = np.random.default_rng(0)
    rtol, atol = (1e-5, 2e-6) if dtype == np.float32 else (1e-12, 1e-13)
    for label, x, shape in _cases(rng, dtype):
        w = rng.standard_normal(shape).astype(dtype) if affine else None
        b = rng.standard_normal(shape).astype(dtype) if affine else None
        g = rng.standard_normal(x.shape).astype(dtype)
        attrs = {"normalized_shape": shape, "eps": 1e-5}
        if name == "layer_norm_gradients":
            if not affine:
                continue  # the op is the backward of a layer with a weight
            got = kernel(g, x, w, **attrs)
            want = DECOMPOSITIONS[name](pt.tensor(g), pt.tensor(x), _tensor(w), **attrs).numpy()
        elif name == "layer_norm":
            got = kernel(x, w, b, **attrs)
            want = DECOMPOSITIONS[name](pt.tensor(x), _tensor(w), _tensor(b), **attrs).numpy()
        elif name == "layer_norm_backward":
            got = kernel(g, x, w, **attrs)
            want = DECOMPOSITIONS[name](pt.tensor(g), pt.tensor(x), _tensor(w), **attrs).numpy()
        else:
            got = kernel(g, x, **attrs)
            want = DECOMPOSITIONS[name](pt.tensor(g), pt.tensor(x), **attrs).numpy()
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape, label
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=label)


def test_a_layer_norm_backward_runs_the_kernels_and_matches_torch(numpy_kernel_calls):
    torch = pytest.importorskip("torch", reason="torch is the reference for layer_norm's gradients")
    calls = numpy_kernel_calls(*NAMES)
    rng = np.random.default_rng(1)
    x, w, b, g = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6, 32), (32,), (32,), (4, 6, 32)))
    ours = [pt.tensor(a, requires_grad=True) for a in (x, w, b)]
    pt.nn.functional.layer_norm(ours[0], (32,), ours[1], ours[2]).backward(pt.tensor(g))
    assert sorted(calls) == ["layer_norm", "layer_norm_gradients"]  # the backward: one op for all three
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    torch.nn.functional.layer_norm(theirs[0], (32,), theirs[1], theirs[2]).backward(torch.tensor(g))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_gradients_are_the_separate_kernels_in_one_pass(dtype, two_threads):
    # the input's gradient is layer_norm_backward's kernel's, bit for bit; the weight's is
    # layer_norm_weight_grad's, bit for bit within one chunk of rows (summed in the same order),
    # to rounding over several; any number of threads gives the same bits
    from threadpoolctl import threadpool_limits
    if not NATIVE:
        pytest.skip(native.status())
    rng = np.random.default_rng(7)
    attrs = {"normalized_shape": (96,), "eps": 1e-5}
    for rows in (100, 1000):  # one chunk of 128 rows, several
        x = (rng.standard_normal((rows, 96)) * 2 + 0.5).astype(dtype)
        g, w = rng.standard_normal((rows, 96)).astype(dtype), rng.standard_normal(96).astype(dtype)
        with threadpool_limits(limits=1, user_api="blas"):
            one = NATIVE["layer_norm_gradients"](g, x, w, **attrs)
        with two_threads():
            two = NATIVE["layer_norm_gradients"](g, x, w, **attrs)
        np.testing.assert_array_equal(one, two)
        gx, gw, gb = one[:x.size].reshape(x.shape), one[x.size:x.size + 96], one[x.size + 96:]
        np.testing.assert_array_equal(gx, NATIVE["layer_norm_backward"](g, x, w, **attrs))
        want_w = NATIVE["layer_norm_weight_grad"](g, x, **attrs)
        if rows <= 128:
            np.testing.assert_array_equal(gw, want_w)
        np.testing.assert_allclose(gw, want_w, rtol=1e-5 if dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(gb, g.astype(np.float64).sum(0), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_layer_norm_gradients_refuse_a_missing_weight_with_the_ops_name():
    with pytest.raises(RuntimeError, match="layer_norm_gradients"):
        from plugtorch.core.ops import normalization
        normalization.layer_norm_gradients(pt.ones(2, 3), pt.ones(2, 3), None, (3,), 1e-5)


BN_NAMES = ("batch_norm", "batch_norm_backward", "batch_norm_weight_grad")
BN_DECOMPOSITIONS = {name: pt.get_registry().ops[name].decompose for name in BN_NAMES}
BN_KERNELS = [pytest.param(getattr(fused, name), name, id=f"numpy-{name}") for name in BN_NAMES] + [
    pytest.param(NATIVE.get(name), name, id=f"native-{name}",
                 marks=pytest.mark.skipif(not NATIVE, reason=native.status())) for name in BN_NAMES]


def _bn_cases(rng, dtype):
    big = (rng.standard_normal((4, 3, 5, 6)) * 2 + 1).astype(dtype)
    yield "(N, C, H, W)", big
    yield "(N, C, L)", big[:, :, 0]
    yield "(N, C)", big[:, :, 0, 0]
    yield "channels last in memory", np.ascontiguousarray(big.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,name", BN_KERNELS)
def test_the_batch_norm_kernel_is_the_decomposition(kernel, name, dtype, affine, training):
    rng = np.random.default_rng(0)
    rtol, atol = (1e-5, 2e-6) if dtype == np.float32 else (1e-12, 1e-13)
    for label, x in _bn_cases(rng, dtype):
        c = x.shape[1]
        w = rng.standard_normal(c).astype(dtype) if affine else None
        b = rng.standard_normal(c).astype(dtype) if affine else None
        rm, rv = rng.standard_normal(c).astype(dtype), rng.uniform(0.5, 2, c).astype(dtype)
        g = rng.standard_normal(x.shape).astype(dtype)
        if name == "batch_norm":
            ours = (rm.copy(), rv.copy())
            got = kernel(x, *ours, w, b, training=training, momentum=0.1, eps=1e-5)
            theirs = (pt.tensor(rm.copy()), pt.tensor(rv.copy()))
            want = BN_DECOMPOSITIONS[name](pt.tensor(x), *theirs, _tensor(w), _tensor(b), training=training,
                                          momentum=0.1, eps=1e-5).numpy()
            for o, t in zip(ours, theirs):  # the running statistics moved alike (or not at all)
                np.testing.assert_allclose(o, t.numpy(), rtol=rtol, atol=atol, err_msg=label)
        elif name == "batch_norm_backward":
            got = kernel(g, x, w, rm, rv, training=training, eps=1e-5)
            want = BN_DECOMPOSITIONS[name](pt.tensor(g), pt.tensor(x), _tensor(w), pt.tensor(rm), pt.tensor(rv),
                                          training=training, eps=1e-5).numpy()
        else:
            got = kernel(g, x, rm, rv, training=training, eps=1e-5)
            want = BN_DECOMPOSITIONS[name](pt.tensor(g), pt.tensor(x), pt.tensor(rm), pt.tensor(rv),
                                          training=training, eps=1e-5).numpy()
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape, label
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=label)


def test_layer_norm_weight_gradient_survives_a_large_mean():
    # rows at 10^4 with standard deviation 10^-2: the C's row statistics (one shifted pass in
    # double for float32) must keep float64's weight gradient; an unshifted sum of squares
    # loses 1e-3 of it
    if not NATIVE:
        pytest.skip(native.status())
    rng = np.random.default_rng(5)
    x = (1e4 + 1e-2 * rng.standard_normal((64, 130))).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    attrs = {"normalized_shape": (130,), "eps": 1e-12}
    got = NATIVE["layer_norm_weight_grad"](g, x, **attrs)
    want = DECOMPOSITIONS["layer_norm_weight_grad"](pt.tensor(g.astype(np.float64)), pt.tensor(x.astype(np.float64)),
                                                    **attrs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _offset_channels(rng):
    """(label, x): float32 channels whose statistics lose everything to a careless sum: a mean
    10^4 standard deviations from 0, a first image far from the rest, a constant channel."""
    x = rng.standard_normal((16, 3, 9, 9))
    x[:, 0] = 1e4 + x[:, 0] * 1e-2
    x[0, 1] = 1e4  # every other image of channel 1 near 0
    x[:, 2] = 7.25
    return x.astype(np.float32)


def test_batch_norm_statistics_survive_a_large_mean_and_an_outlying_image():
    # the running statistics after one step of momentum 1 are the batch's own: the C's must be
    # float64's, rounded once to float32 (it sums in double, in one shifted pass). (The NumPy
    # passes, as the decomposition and torch's kernel, compute in float32: torch's variance of
    # channel 0 is 1.02004e-4 against float64's 1.01993e-4.)
    if not NATIVE:
        pytest.skip(native.status())
    x = _offset_channels(np.random.default_rng(3))
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    NATIVE["batch_norm"](x, rm, rv, None, None, training=True, momentum=1.0, eps=1e-5)
    wide = x.astype(np.float64)
    want_mean, want_var = wide.mean((0, 2, 3)), wide.var((0, 2, 3), ddof=1)
    np.testing.assert_allclose(rm, want_mean, rtol=2e-7)
    np.testing.assert_allclose(rv, want_var, rtol=4e-7)
    assert rv[2] == 0  # a constant channel's variance is 0 exactly, not a rounding residue


@pytest.mark.parametrize("name", ["batch_norm_backward", "batch_norm_weight_grad"])
def test_batch_norm_gradients_survive_a_large_mean(name):
    if not NATIVE:
        pytest.skip(native.status())
    rng = np.random.default_rng(4)
    x = (100 + rng.standard_normal((16, 3, 9, 9))).astype(np.float32)  # mean^2 / var = 10^4
    x[0, 1] += 50  # and an outlying first image
    g = rng.standard_normal(x.shape).astype(np.float32)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    args = (g, x, w, rm, rv) if name == "batch_norm_backward" else (g, x, rm, rv)
    got = NATIVE[name](*args, training=True, eps=1e-5)
    wide = [None if a is None else pt.tensor(a.astype(np.float64)) for a in args]
    want = BN_DECOMPOSITIONS[name](*wide, training=True, eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def test_a_batch_norm_layer_runs_the_kernels_and_matches_torch(numpy_kernel_calls):
    torch = pytest.importorskip("torch", reason="torch is the reference for batch_norm")
    calls = numpy_kernel_calls(*BN_NAMES)
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((8, 4, 6, 6)).astype(np.float32), rng.standard_normal((8, 4, 6, 6)).astype(np.float32)
    ours, theirs = pt.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)
    xs = pt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours(xs[0]).backward(pt.tensor(g))
    theirs(xs[1]).backward(torch.tensor(g))
    assert sorted(calls) == sorted(BN_NAMES)
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5, atol=1e-6)
