"""gelu and gelu_backward on the NumPy backend: one C pass each (native/), or NumPy passes
(fused.py) where the C is not built, against the ops' decompositions in every layout and float
dtype and both forms; gelu's backward runs the gelu_backward op. (Against torch's gelu, its
gradient and second gradient: the conformance kit runs the ops' samples.)"""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import fused, native

import plugtorch as pt

DECOMPOSITIONS = {name: pt.get_registry().ops[name].decompose for name in ("gelu", "gelu_backward")}
NATIVE = native.kernels()
KERNELS = [pytest.param(getattr(fused, name), name, id=f"numpy-{name}") for name in DECOMPOSITIONS] + [
    pytest.param(NATIVE.get(name), name, id=f"native-{name}",
                 marks=pytest.mark.skipif(not NATIVE, reason=native.status())) for name in DECOMPOSITIONS]


def _layouts(rng, dtype):
    base = (rng.standard_normal((4, 3, 5, 6)) * 3).astype(dtype)
    yield "contiguous", base
    yield "channel-major", np.ascontiguousarray(base.swapaxes(0, 1)).swapaxes(0, 1)
    yield "strided", base[:, :, ::2]
    yield "0-d", base[0, 0, 0, 0].reshape(())
    yield "empty", base[:0]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,name", KERNELS)
def test_the_kernel_is_the_decomposition(kernel, name, dtype, approximate):
    rng = np.random.default_rng(0)
    # one pass in the input's dtype against a dozen rounded ones: a few ulp apart (where the tanh
    # form's derivative is near 0, 1 + tanh cancels: absolutely close there)
    rtol, atol = (2e-6, 5e-6) if dtype == np.float32 else (1e-13, 1e-14)
    for layout, x in _layouts(rng, dtype):
        if name == "gelu":
            got = kernel(x, approximate=approximate)
            want = DECOMPOSITIONS[name](pt.tensor(x), approximate=approximate).numpy()
        else:
            g = np.empty_like(x)
            g[...] = rng.standard_normal(x.shape)
            got = kernel(g, x, approximate=approximate)
            want = DECOMPOSITIONS[name](pt.tensor(g), pt.tensor(x), approximate=approximate).numpy()
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape, layout
        if layout != "0-d":
            assert got.strides == np.empty_like(x).strides, f"{layout}: the result is laid out as the input"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=layout)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_runs_the_kernel_and_matches_torch(numpy_kernel_calls, approximate):
    torch = pytest.importorskip("torch", reason="torch is the reference for gelu's gradients")
    calls = numpy_kernel_calls("gelu", "gelu_backward")
    values = np.linspace(-4, 4, 33, dtype=np.float32).reshape(3, 11)
    x = pt.tensor(values, requires_grad=True)
    pt.nn.functional.gelu(x, approximate=approximate).sum().backward()
    assert calls == ["gelu", "gelu_backward"]
    t = torch.tensor(values, requires_grad=True)
    torch.nn.functional.gelu(t, approximate=approximate).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_second_derivative_matches_torch(approximate):
    torch = pytest.importorskip("torch", reason="torch is the reference for gelu's gradients")
    values = np.linspace(-4, 4, 17)
    x = pt.tensor(values, requires_grad=True)
    (g,) = pt.autograd.grad(pt.nn.functional.gelu(x, approximate=approximate).sum(), x, create_graph=True)
    (gg,) = pt.autograd.grad(g.sum(), x)
    t = torch.tensor(values, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.nn.functional.gelu(t, approximate=approximate).sum(), t, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), t)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-10, atol=1e-12)
