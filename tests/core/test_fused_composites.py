"""A backend's fused kernel for a composite op is preferred, and stays differentiable."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.autograd import gradcheck, gradgradcheck

from .plugin_helpers import numpy_clone_backend, plugin


@pytest.fixture
def fused_conv_backend():
    """A backend whose conv2d kernel is opaque (its own forward, no backward of its own)."""
    calls = []

    def conv2d_kernel(x, w, b=None, *, stride, padding, dilation, groups):
        calls.append(x.shape)
        with plugtorch.no_grad():  # stands in for, say, a cuDNN call: arrays in, array out
            out = plugtorch.conv2d(plugtorch.from_numpy(x), plugtorch.from_numpy(w),
                                   None if b is None else plugtorch.from_numpy(b),
                                   stride, padding, dilation, groups)
        return out.numpy()

    def register(r):
        r.add_backend(numpy_clone_backend("fused_conv"))
        r.add_kernel("conv2d", "fused_conv", conv2d_kernel)

    plugtorch.register_plugin(plugin(register))
    return calls


def test_fused_conv_kernel_is_used_and_its_gradient_comes_from_the_decomposition(fused_conv_backend):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    ours = [plugtorch.tensor(a, dtype=plugtorch.float64, device="fused_conv", requires_grad=True)
            for a in (x, w, b)]
    ref = [plugtorch.tensor(a, dtype=plugtorch.float64, requires_grad=True) for a in (x, w, b)]
    y = plugtorch.conv2d(*ours, stride=2, padding=1)
    y_ref = plugtorch.conv2d(*ref, stride=2, padding=1)
    assert fused_conv_backend == [(2, 3, 6, 5)]
    assert y.grad_fn.op == "conv2d"  # one node for the fused kernel, not the im2col graph
    np.testing.assert_allclose(y.detach().numpy(), y_ref.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal(y.shape)
    y.backward(plugtorch.tensor(g, device="fused_conv"))
    y_ref.backward(plugtorch.tensor(g))
    for a, r in zip(ours, ref):
        np.testing.assert_allclose(a.grad.numpy(), r.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_fused_conv_kernel_supports_gradcheck_and_double_backward(fused_conv_backend):
    x = plugtorch.randn(1, 2, 4, 4, dtype=plugtorch.float64, device="fused_conv", requires_grad=True)
    w = plugtorch.randn(2, 2, 3, 3, dtype=plugtorch.float64, device="fused_conv", requires_grad=True)
    assert gradcheck(lambda a, b: plugtorch.conv2d(a, b, padding=1), (x, w))
    assert gradgradcheck(lambda a, b: plugtorch.conv2d(a, b, padding=1), (x, w))
