"""The CuPy backend's conv2d and max_pool2d kernels (``conv_kernels.py``, ``kernels/im2col.cu``,
``kernels/maxpool.cu``) run on the CPU, against the ops' decompositions on the NumPy backend.

Each kernel must return what its op's decomposition returns: the same shape and dtype, the
values to float rounding (exactly where no arithmetic is involved: integer convolutions,
max pooling, and which element each window's gradient goes to).
"""
from __future__ import annotations

import numpy
import pytest
from plugtorch_backends.cupy_backend import conv_kernels
from plugtorch_backends.cupy_backend.probe import installed as cupy_installed

import plugtorch as pt
from plugtorch.core.ops import conv as conv_ops
from plugtorch.core.ops import pooling

F = pt.nn.functional
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-12, atol=1e-12),
       "float16": dict(rtol=1e-2, atol=1e-2)}


def _namespace():
    """NumPy checked against CuPy's API where CuPy is installed (as the emulated backend runs)."""
    if not cupy_installed():
        return numpy
    import cupy
    from plugtorch_backends.cupy_backend.api_check import CheckedNamespace
    return CheckedNamespace(numpy, cupy)


@pytest.fixture(scope="module")
def kernels(cpu_load):
    return conv_kernels.make_kernels(_namespace(), cpu_load)


@pytest.fixture(scope="module")
def chunked(cpu_load):
    """The same kernels building the patches one image at a time."""
    return conv_kernels.make_kernels(_namespace(), cpu_load, col_bytes=1)


def T(a):
    return pt.from_numpy(numpy.ascontiguousarray(a))


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def data(rng, shape, dtype):
    dtype = numpy.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-11 if dtype.kind == "i" else 0, 12, shape).astype(dtype)  # int8 sums overflow


def check(got, want, dtype=None):
    """Same shape and dtype; values within the dtype's tolerance (exact for integers and bool)."""
    want = want.numpy() if isinstance(want, pt.Tensor) else want
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    name = numpy.dtype(dtype or want.dtype).name
    if name in TOL:
        numpy.testing.assert_allclose(got, want, **TOL[name])
    else:
        numpy.testing.assert_array_equal(got, want)


# -- conv2d and its two gradient ops ----------------------------------------------------------

# (input shape, weight shape, stride, padding, dilation, groups)
CONV_CASES = {
    "3x3": ((1, 1, 5, 5), (1, 1, 3, 3), 1, 0, 1, 1),
    "odd-stride2-pad1-batch3": ((3, 2, 7, 9), (4, 2, 3, 2), 2, 1, 1, 1),
    "groups2-uneven-pad": ((2, 4, 6, 5), (6, 2, 3, 3), 1, (1, 2), 1, 2),
    "dilation2": ((1, 3, 9, 8), (2, 3, 3, 3), 1, 2, 2, 1),
    "1x1": ((3, 4, 5, 7), (5, 4, 1, 1), 1, 0, 1, 1),
    "mixed-groups3": ((2, 6, 11, 13), (6, 2, 2, 3), (2, 3), (1, 0), (2, 1), 3),
    "several-blocks": ((2, 3, 17, 19), (4, 3, 3, 3), 1, 1, 1, 1),
    "kernel-past-input": ((1, 2, 4, 4), (2, 1, 5, 5), 1, 2, 1, 2),
    "uncovered-edge": ((1, 1, 6, 6), (1, 1, 2, 2), 2, 0, 2, 1),
    # weights larger than the patches: the GEMMs broadcast them rather than repeat them per image
    "wide-weights-one-position": ((3, 8, 3, 3), (16, 8, 3, 3), 1, 0, 1, 1),
}


def conv_attrs(stride, padding, dilation, groups):
    return {"stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation), "groups": groups}


def conv_case(name, dtype, seed=0):
    x_shape, w_shape, *geometry = CONV_CASES[name]
    rng = numpy.random.default_rng(seed)
    x, w, b = data(rng, x_shape, dtype), data(rng, w_shape, dtype), data(rng, (w_shape[0],), dtype)
    attrs = conv_attrs(*geometry)
    y = F.conv2d(T(x), T(w), T(b), **attrs).numpy()
    g = data(rng, y.shape, dtype)
    return x, w, b, g, y, attrs


def ref_input_grad(g, w, x_shape, attrs):
    return conv_ops.conv2d_input_grad(T(g), T(w), tuple(x_shape), **attrs).numpy()


def ref_weight_grad(g, x, w_shape, attrs):
    return conv_ops.conv2d_weight_grad(T(g), T(x), tuple(w_shape), **attrs).numpy()


def run_conv_ops(k, x, w, b, g, attrs):
    return (k["conv2d"](x, w, b, **attrs), k["conv2d"](x, w, None, **attrs),
            k["conv2d_input_grad"](g, w, input_shape=x.shape, **attrs),
            k["conv2d_weight_grad"](g, x, weight_shape=w.shape, **attrs))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_ops_match_the_decompositions(kernels, case, dtype):
    x, w, b, g, y, attrs = conv_case(case, dtype)
    with_bias, without, dx, dw = run_conv_ops(kernels, x, w, b, g, attrs)
    check(with_bias, y)
    check(without, F.conv2d(T(x), T(w), None, **attrs))
    check(dx, ref_input_grad(g, w, x.shape, attrs))
    check(dw, ref_weight_grad(g, x, w.shape, attrs))


@pytest.mark.parametrize("case", ["odd-stride2-pad1-batch3", "groups2-uneven-pad", "mixed-groups3"])
def test_conv_ops_one_image_per_chunk_agree(kernels, chunked, case):
    x, w, b, g, _, attrs = conv_case(case, "float64", seed=1)
    for whole, parts in zip(run_conv_ops(kernels, x, w, b, g, attrs), run_conv_ops(chunked, x, w, b, g, attrs)):
        numpy.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "int8", "int16", "int32", "int64", "uint8", "bool"])
def test_conv_ops_take_every_dtype_the_ops_do(kernels, dtype):
    # int8/uint8 sums overflow here: the kernels' int64 arithmetic wraps back to the same values
    x, w, b, g, y, attrs = conv_case("groups2-uneven-pad", dtype, seed=2)
    with_bias, _, dx, dw = run_conv_ops(kernels, x, w, b, g, attrs)
    check(with_bias, y)
    check(dx, ref_input_grad(g, w, x.shape, attrs))
    check(dw, ref_weight_grad(g, x, w.shape, attrs))


def test_conv2d_bias_of_another_dtype_promotes_as_the_op_does(kernels):
    x, w, b, _, _, attrs = conv_case("3x3", "float32")
    b64 = b.astype(numpy.float64)
    check(kernels["conv2d"](x, w, b64, **attrs), F.conv2d(T(x), T(w), T(b64), **attrs))


def test_conv_ops_read_non_contiguous_operands(kernels):
    x, w, b, g, y, attrs = conv_case("odd-stride2-pad1-batch3", "float64")
    x_cn = numpy.ascontiguousarray(x.swapaxes(0, 1)).swapaxes(0, 1)  # (C, N, H, W) memory seen as NCHW
    g_cn = numpy.ascontiguousarray(g.swapaxes(0, 1)).swapaxes(0, 1)
    check(kernels["conv2d"](x_cn, w, b, **attrs), y)
    check(kernels["conv2d_input_grad"](g_cn, w, input_shape=x.shape, **attrs), ref_input_grad(g, w, x.shape, attrs))
    check(kernels["conv2d_weight_grad"](g_cn, x_cn, weight_shape=w.shape, **attrs),
          ref_weight_grad(g, x, w.shape, attrs))


def test_conv_grads_with_fewer_windows_than_fit(kernels):
    # conv_transpose2d with output_padding: the input is taller than the output's windows reach
    rng = numpy.random.default_rng(3)
    g, w, x = data(rng, (2, 2, 2, 3), "float64"), data(rng, (2, 1, 2, 2), "float64"), data(rng, (2, 2, 7, 8), "float64")
    attrs = conv_attrs(2, (0, 1), (2, 1), 2)
    check(kernels["conv2d_input_grad"](g, w, input_shape=x.shape, **attrs), ref_input_grad(g, w, x.shape, attrs))
    check(kernels["conv2d_weight_grad"](g, x, weight_shape=w.shape, **attrs), ref_weight_grad(g, x, w.shape, attrs))


@pytest.mark.parametrize("x_shape,w_shape,groups", [((0, 2, 5, 5), (3, 2, 3, 3), 1),
                                                    ((2, 0, 5, 5), (4, 0, 3, 3), 2),
                                                    ((2, 2, 5, 5), (0, 1, 3, 3), 2)],
                         ids=["no-images", "no-channels", "no-filters"])
def test_conv_ops_on_empty_tensors(kernels, x_shape, w_shape, groups):
    rng = numpy.random.default_rng(4)
    x, w, b = data(rng, x_shape, "float32"), data(rng, w_shape, "float32"), data(rng, (w_shape[0],), "float32")
    attrs = conv_attrs(1, 1, 1, groups)
    y = F.conv2d(T(x), T(w), T(b), **attrs).numpy()
    g = data(rng, y.shape, "float32")
    with_bias, _, dx, dw = run_conv_ops(kernels, x, w, b, g, attrs)
    check(with_bias, y)
    check(dx, ref_input_grad(g, w, x.shape, attrs))
    check(dw, ref_weight_grad(g, x, w.shape, attrs))


def test_conv_ops_match_torch(kernels):
    torch = pytest.importorskip("torch")
    for case in ("odd-stride2-pad1-batch3", "mixed-groups3"):
        x, w, b, g, _, attrs = conv_case(case, "float64", seed=5)
        tx, tw, tb, tg = (torch.from_numpy(a) for a in (x, w, b, g))
        check(kernels["conv2d"](x, w, b, **attrs), torch.nn.functional.conv2d(tx, tw, tb, **attrs).numpy())
        check(kernels["conv2d_input_grad"](g, w, input_shape=x.shape, **attrs),
              torch.nn.grad.conv2d_input(x.shape, tw, tg, **attrs).numpy())
        check(kernels["conv2d_weight_grad"](g, x, weight_shape=w.shape, **attrs),
              torch.nn.grad.conv2d_weight(tx, w.shape, tg, **attrs).numpy())


# -- max_pool2d and its backward --------------------------------------------------------------

# (input shape, kernel_size, stride, padding, dilation, ceil_mode)
POOL_CASES = {
    "2x2": ((1, 2, 4, 4), 2, 2, 0, 1, False),
    "3x3-stride2-pad1": ((2, 1, 5, 5), 3, 2, 1, 1, False),
    "ceil-overhang-odd": ((3, 2, 5, 7), 2, 2, 0, 1, True),
    "dilation2": ((1, 1, 6, 6), 2, 1, 0, 2, False),
    "mixed-ceil": ((2, 3, 7, 6), (3, 2), (2, 1), (1, 1), (1, 2), True),
    "overlapping": ((1, 2, 9, 11), 3, 1, 1, 1, False),
    "several-blocks": ((2, 3, 17, 19), 3, 2, 1, 1, True),
    "1x1": ((2, 2, 3, 5), 1, 1, 0, 1, False),
    "all-padding-window": ((1, 2, 1, 1), 2, 2, 1, 2, False),
}


def pool_geometry(kernel_size, stride, padding, dilation, ceil_mode):
    return {"kernel_size": pair(kernel_size), "stride": pair(stride), "padding": pair(padding),
            "dilation": pair(dilation), "ceil_mode": ceil_mode}


def tied(rng, shape, dtype):
    """Values from a handful, so windows hold ties."""
    return rng.integers(-3, 4, shape).astype(dtype)


def ref_pool_backward(g, x, out, geometry):
    """The decomposition itself (the NumPy backend runs its own fused kernel for the op)."""
    return pt.get_registry().ops["max_pool2d_backward"].decompose(T(g), T(x), T(out), **geometry).numpy()


def run_pool(k, x, g, geometry):
    out = k["max_pool2d"](x, **geometry)
    return out, k["max_pool2d_backward"](g, x, out, **geometry)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_matches_the_decomposition(kernels, case, dtype):
    shape, *geometry = POOL_CASES[case]
    geometry = pool_geometry(*geometry)
    rng = numpy.random.default_rng(6)
    x = tied(rng, shape, dtype)
    want = F.max_pool2d(T(x), **geometry).numpy()
    g = data(rng, want.shape, dtype)
    out, dx = run_pool(kernels, x, g, geometry)
    numpy.testing.assert_array_equal(out, want)
    assert out.dtype == want.dtype
    check(dx, ref_pool_backward(g, x, out, geometry))
    check(dx, pooling.max_pool2d_backward(T(g), T(x), T(out), **geometry))  # the NumPy backend's own kernel


def test_max_pool_gradient_goes_to_each_windows_first_maximum(kernels):
    x = numpy.ones((1, 1, 3, 4))
    geometry = pool_geometry(2, 1, 0, 1, False)
    g = numpy.arange(1.0, 7.0).reshape(1, 1, 2, 3)
    out, dx = run_pool(kernels, x, g, geometry)
    numpy.testing.assert_array_equal(out, numpy.ones((1, 1, 2, 3)))
    numpy.testing.assert_array_equal(dx[0, 0], [[1, 2, 3, 0], [4, 5, 6, 0], [0, 0, 0, 0]])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the reference's inf * 0
def test_max_pool_with_nan_and_inf_as_the_decomposition(kernels):
    # a NaN wins its windows and their gradient goes to its last NaN (torch's); an all -inf
    # window's gradient goes to its first tap, padding included; an inf gradient turns each
    # element its window covers into NaN (grad * 0), as the decomposition's multiply does
    x = numpy.array([[[[1.0, numpy.nan, 2.0, 0.5, 3.0],
                       [-numpy.inf, -numpy.inf, numpy.nan, 4.0, 1.0],
                       [-numpy.inf, -numpy.inf, 0.0, numpy.nan, -1.0],
                       [2.0, 2.0, 1.0, -numpy.inf, 7.0]]]])
    for geometry in (pool_geometry(2, 1, 1, 1, False), pool_geometry(3, 2, 1, 1, True),
                     pool_geometry(2, 2, 0, 1, True)):
        want = F.max_pool2d(T(x), **geometry).numpy()
        g = numpy.random.default_rng(7).standard_normal(want.shape)
        g.flat[1] = numpy.inf
        out, dx = run_pool(kernels, x, g, geometry)
        numpy.testing.assert_array_equal(out, want)
        numpy.testing.assert_allclose(dx, ref_pool_backward(g, x, out, geometry), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "int8", "int16", "int32", "int64", "uint8", "bool"])
def test_max_pool_takes_every_dtype_the_op_does(kernels, dtype):
    # integers pad with the dtype's minimum: the all-padding window shows it
    for case in ("mixed-ceil", "all-padding-window", "overlapping"):
        shape, *geometry = POOL_CASES[case]
        geometry = pool_geometry(*geometry)
        rng = numpy.random.default_rng(8)
        x = data(rng, shape, dtype)
        decompose = pt.get_registry().ops["max_pool2d"].decompose  # bool: only a direct call reaches it
        want = decompose(T(x), **geometry).numpy()
        grad_dtype = "float16" if dtype == "float16" else "float32"
        g = data(rng, want.shape, grad_dtype)
        out, dx = run_pool(kernels, x, g, geometry)
        numpy.testing.assert_array_equal(out, want)
        assert out.dtype == want.dtype
        check(dx, ref_pool_backward(g, x, out, geometry))


def test_max_pool_backward_with_an_integer_gradient(kernels):
    shape, *geometry = POOL_CASES["overlapping"]
    geometry = pool_geometry(*geometry)
    rng = numpy.random.default_rng(9)
    x = tied(rng, shape, "float32")
    out = kernels["max_pool2d"](x, **geometry)
    g = data(rng, out.shape, "int64")
    check(kernels["max_pool2d_backward"](g, x, out, **geometry), ref_pool_backward(g, x, out, geometry))


@pytest.mark.parametrize("shape", [(0, 2, 5, 5), (2, 0, 5, 5)], ids=["no-images", "no-channels"])
def test_max_pool_on_empty_tensors(kernels, shape):
    geometry = pool_geometry(3, 2, 1, 1, True)
    x = numpy.zeros(shape, numpy.float32)
    want = F.max_pool2d(T(x), **geometry).numpy()
    out, dx = run_pool(kernels, x, numpy.zeros(want.shape, numpy.float32), geometry)
    check(out, want)
    check(dx, numpy.zeros(shape, numpy.float32))


def test_max_pool_matches_torch(kernels):
    torch = pytest.importorskip("torch")
    rng = numpy.random.default_rng(10)
    for case in ("3x3-stride2-pad1", "mixed-ceil", "overlapping"):
        shape, *geometry = POOL_CASES[case]
        geometry = pool_geometry(*geometry)
        x = rng.permutation(numpy.prod(shape)).reshape(shape).astype(numpy.float64)  # no ties: torch's order
        tx = torch.from_numpy(x).requires_grad_(True)
        ty = torch.nn.functional.max_pool2d(tx, **geometry)
        g = rng.standard_normal(tuple(ty.shape))
        ty.backward(torch.from_numpy(g))
        out, dx = run_pool(kernels, x, g, geometry)
        check(out, ty.detach().numpy())
        check(dx, tx.grad.numpy())


# -- launches ---------------------------------------------------------------------------------

def test_one_small_block_covers_everything(cpu_load, monkeypatch):
    # every kernel loops grid-stride: one block of 32 threads computes what a full grid does
    full = conv_kernels.make_kernels(_namespace(), cpu_load)
    monkeypatch.setattr(conv_kernels, "THREADS", 32)
    monkeypatch.setattr(conv_kernels, "blocks", lambda n, threads=256, cap=65535: 1)
    small = conv_kernels.make_kernels(_namespace(), cpu_load)
    x, w, b, g, _, attrs = conv_case("several-blocks", "float64")
    for a, c in zip(run_conv_ops(full, x, w, b, g, attrs), run_conv_ops(small, x, w, b, g, attrs)):
        numpy.testing.assert_array_equal(c, a)
    shape, *geometry = POOL_CASES["several-blocks"]
    geometry = pool_geometry(*geometry)
    x = tied(numpy.random.default_rng(11), shape, "float32")
    g = numpy.ones(full["max_pool2d"](x, **geometry).shape, numpy.float32)
    for a, c in zip(run_pool(full, x, g, geometry), run_pool(small, x, g, geometry)):
        numpy.testing.assert_array_equal(c, a)

