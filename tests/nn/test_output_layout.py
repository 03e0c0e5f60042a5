"""What the ops return is laid out as torch's: a CNN's activations are contiguous NCHW,
so ``x.view(x.size(0), -1)`` after a conv block works, and the gradients are contiguous; and
pooling with ceil_mode drops a last window that would start in the right padding, as torch does.
(The conformance kit's ``test_strides`` compares every op's strides with torch's.)"""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch as pt
import plugtorch.nn as nn
import plugtorch.nn.functional as F
from plugtorch.testing import bare_backend, remove_backend
from plugtorch.testing.backends import SUFFIX, conformance_backends

torch = pytest.importorskip("torch", reason="the layouts and values are compared with PyTorch's")


@pytest.fixture(params=conformance_backends())
def layout_backend(request):
    """Every available backend, and each one's twin without fused kernels (the decompositions)."""
    name = request.param
    created = name.endswith(SUFFIX) and name not in pt.get_registry().backends
    if created:
        bare_backend(name[:-len(SUFFIX)])
    yield name
    if created:
        remove_backend(name)


@pytest.mark.parametrize("padding", [0, 1])
def test_view_after_conv_relu_maxpool_and_contiguous_gradients(layout_backend, padding):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 12, 12)).astype(np.float32)
    w = (rng.standard_normal((6, 3, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    conv = nn.Conv2d(3, 6, 3, padding=padding).to(layout_backend)
    with pt.no_grad():
        conv.weight.copy_(pt.tensor(w, device=layout_backend))
        conv.bias.copy_(pt.tensor(b, device=layout_backend))
    xp = pt.tensor(x, device=layout_backend, requires_grad=True)
    y = conv(xp)
    assert y.is_contiguous(), y.stride()
    h = nn.MaxPool2d(2)(nn.ReLU()(y))
    assert h.is_contiguous(), h.stride()
    flat = h.view(h.size(0), -1)  # torch's most common line after a conv block
    (flat * pt.arange(flat.shape[1], device=layout_backend).to(flat.dtype)).sum().backward()

    xt = torch.tensor(x, requires_grad=True)
    wt, bt = torch.tensor(w, requires_grad=True), torch.tensor(b)
    ht = torch.nn.functional.max_pool2d(torch.relu(torch.nn.functional.conv2d(xt, wt, bt, padding=padding)), 2)
    ft = ht.view(ht.size(0), -1)
    (ft * torch.arange(ft.shape[1]).to(ft.dtype)).sum().backward()
    np.testing.assert_allclose(flat.detach().numpy(), ft.detach().numpy(), rtol=1e-5, atol=1e-5)
    for got, want in ((xp.grad, xt.grad), (conv.weight.grad, wt.grad)):
        assert got.is_contiguous() and got.stride() == want.stride()
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("groups,stride,dilation", [(1, 1, 1), (3, 2, 1), (1, 1, 2)])
def test_conv_gradients_have_torchs_strides(layout_backend, groups, stride, dilation):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 6, 9, 8))
    w = rng.standard_normal((6, 6 // groups, 3, 2))
    xp, wp = (pt.tensor(a, device=layout_backend, requires_grad=True) for a in (x, w))
    xt, wt = (torch.tensor(a, requires_grad=True) for a in (x, w))
    yp = F.conv2d(xp, wp, None, stride, 1, dilation, groups)
    yt = torch.nn.functional.conv2d(xt, wt, None, stride, 1, dilation, groups)
    assert yp.stride() == yt.stride()
    g = rng.standard_normal(tuple(yt.shape))
    yp.backward(pt.tensor(g, device=layout_backend))
    yt.backward(torch.tensor(g))
    for got, want in ((xp.grad, xt.grad), (wp.grad, wt.grad)):
        assert got.stride() == want.stride()
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


# (size, kernel, stride, padding): the ceil-mode count puts a last window at or past
# size + padding (in the right padding), which torch drops; and cases where it keeps it
CEIL = [(5, 2, 2, 1), (6, 2, 4, 1), (9, 4, 4, 2), (6, 3, 2, 1)]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("pool", ["avg_include_pad", "avg_exclude_pad", "max"])
@pytest.mark.parametrize("size,kernel,stride,padding", CEIL)
def test_ceil_mode_drops_a_window_that_starts_in_the_padding(layout_backend, nd, pool, size, kernel, stride, padding):
    kind = "max" if pool == "max" else "avg"
    extra = {} if pool == "max" else {"count_include_pad": pool == "avg_include_pad"}
    x = np.random.default_rng(size * 31 + kernel).standard_normal((2, 3) + (size,) * nd)
    fn = f"{kind}_pool{nd}d"
    xp, xt = pt.tensor(x, device=layout_backend, requires_grad=True), torch.tensor(x, requires_grad=True)
    got = getattr(F, fn)(xp, kernel, stride, padding, ceil_mode=True, **extra)
    want = getattr(torch.nn.functional, fn)(xt, kernel, stride, padding, ceil_mode=True, **extra)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(7).standard_normal(tuple(want.shape))
    got.backward(pt.tensor(g, device=layout_backend))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_the_dropped_window_is_torchs_rule():
    # avg_pool1d over 5 with kernel 2, stride 2, padding 1: ceil counts 4 windows, but the 4th
    # would start at 6 = size + padding, inside the right padding only: torch gives 3
    x = pt.arange(5.0).reshape(1, 1, 5)
    assert F.avg_pool1d(x, 2, 2, 1, ceil_mode=True).shape == (1, 1, 3)
    assert F.max_pool1d(x, 2, 2, 1, ceil_mode=True).shape == (1, 1, 3)
