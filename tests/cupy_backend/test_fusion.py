"""The CuPy backend's elementwise fuser: each chain plugtorch.compile hands it becomes one CUDA
kernel. Its generated sources are executed on the CPU (``plugtorch.testing.cuda_cpu``) against
NumPy's ufuncs for every op it fuses, both float dtypes, 0-d operands, NaN and sizes that do
not fill a block; compiled by nvcc and NVRTC (test_kernel_sources.py compiles the same samples
as the hand-written kernels). A compiled training step with fused chains on ``cupy_emulated``
is test_emulated_backend.py's."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.cupy_backend.fusion import ElementwiseFuser, sample_chains, source

from plugtorch.compiler.fusion import Chain
from plugtorch.testing.cuda_cpu import compiler_missing

SAMPLE_CHAINS = sample_chains()

if compiler_missing():
    pytest.skip(f"the generated kernels cannot be executed on the CPU: {compiler_missing()}",
                allow_module_level=True)

UNARY = ["exp", "log", "sqrt", "tanh", "log1p", "expm1", "abs", "sin", "cos", "neg"]
ARITHMETIC = ["add", "sub", "mul", "div", "maximum", "minimum"]
COMPARE = ["gt", "ge", "lt", "le", "eq", "ne"]
NUMPY = {"neg": np.negative, "abs": np.abs, "add": np.add, "sub": np.subtract, "mul": np.multiply,
         "div": np.true_divide, "gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal,
         "eq": np.equal, "ne": np.not_equal, "logical_and": np.logical_and, "logical_or": np.logical_or}


def _fuser():
    from plugtorch.testing.cuda_cpu import CpuModule
    return ElementwiseFuser(np, lambda code: CpuModule(code=code))


def _ufunc(name):
    return NUMPY.get(name) or getattr(np, name)


def _close(got, want, dtype):
    # CUDA's (here glibc's) float math and NumPy's SIMD loops may differ in the last bits;
    # arithmetic, comparisons and casts are exact
    rtol = 4 * np.finfo(dtype).eps if dtype in (np.float32, np.float64) else 0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_links_compute_numpys_values(name, dtype):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 3.0, 1000).astype(dtype)   # 1000: the last block is partly empty
    chain = Chain(x.shape, ((x.dtype.name, False),), ((name, (("in", 0),), x.dtype.name),
                                                         ("mul", (("op", 0), ("const", 2.0)), x.dtype.name)))
    got = _fuser().build(chain)(x)
    _close(got, _ufunc(name)(x) * dtype(2.0), dtype)
    assert got.dtype == dtype and got.shape == x.shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ARITHMETIC + COMPARE)
def test_binary_links_compute_numpys_values(name, dtype):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 37)).astype(dtype), rng.standard_normal((3, 37)).astype(dtype)
    a[0, :5], b[1, :3] = np.nan, np.nan       # NaN propagates through maximum/minimum as in NumPy
    b[2, :4] = a[2, :4]                        # ties for the comparisons
    result = _ufunc(name)(a, b)
    chain = Chain(a.shape, ((a.dtype.name, False), (b.dtype.name, False)),
                  ((name, (("in", 0), ("in", 1)), result.dtype.name),))
    _close(_fuser().build(chain)(a, b), result, dtype)


def test_numbers_and_0d_operands_are_rounded_as_numpy_rounds_weak_scalars():
    x = np.linspace(-2, 2, 301, dtype=np.float32)
    s = np.array(0.1, dtype=np.float32)        # a 0-d tensor operand (an optimizer's lr, say)
    want = np.maximum((x * 0.1 + s) / 3.0, 0.0) > np.float32(0.2)
    chain = Chain(x.shape, (("float32", False), ("float32", True)), (
        ("mul", (("in", 0), ("const", 0.1)), "float32"), ("add", (("op", 0), ("in", 1)), "float32"),
        ("div", (("op", 1), ("const", 3)), "float32"), ("maximum", (("op", 2), ("const", 0.0)), "float32"),
        ("gt", (("op", 3), ("const", 0.2)), "bool")))
    got = _fuser().build(chain)(x, s)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


def test_casts_and_a_relu_backward_chain():
    import plugtorch
    rng = np.random.default_rng(2)
    out, g = rng.standard_normal(513).astype(np.float32), rng.standard_normal(513).astype(np.float32)
    out[:7] = 0.0
    chain = Chain(out.shape, (("float32", False), ("float32", False)), (
        ("gt", (("in", 0), ("const", 0)), "bool"), ("cast", (("op", 0), ("const", plugtorch.float32)), "float32"),
        ("mul", (("in", 1), ("op", 1)), "float32")))
    np.testing.assert_array_equal(_fuser().build(chain)(out, g), g * (out > 0).astype(np.float32))


def test_what_is_not_fused_is_refused_by_name_and_dtype():
    f = _fuser()
    assert f.fusable("exp", ["float32"], "float32") and f.fusable("add", ["float32", ("const", 1)], "float32")
    assert not f.fusable("exp", ["int64"], "float64")          # integer math is left as recorded
    assert not f.fusable("add", ["int64", "int64"], "int64")
    assert not f.fusable("add", ["float32", ("const", float("inf"))], "float32")  # no literal for it
    assert not f.fusable("pow", ["float32", "float32"], "float32")              # not fused (yet)
    assert not f.fusable("gt", ["float16", ("const", 0)], "bool")
    assert not f.fusable("mul", ["float64", "float32"], "float32")  # NumPy would compute it in float64
    assert f.fusable("mul", ["float32", "bool"], "float32")


@pytest.mark.parametrize("k", range(len(SAMPLE_CHAINS)))
def test_the_sample_chains_run(k):
    chain = SAMPLE_CHAINS[k]
    arrays = [np.full(() if scalar else chain.shape, 0.7, dtype=d) for d, scalar in chain.inputs]
    got = _fuser().build(chain)(*arrays)
    assert got.shape == chain.shape and got.dtype.name == chain.ops[-1][2]
    assert source(chain).count("__global__") == 1
