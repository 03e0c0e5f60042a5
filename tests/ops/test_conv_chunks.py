"""conv2d's backward ops split the batch into chunks (ops/conv.py): every split gives torch's values.

The conformance samples are small enough to fit one chunk, so here the chunk size is shrunk
until each image (or a few) is a chunk of its own, including uneven last chunks and groups.
"""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.autograd import gradcheck, gradgradcheck
from plugtorch.core import geometry
from plugtorch.core.ops import conv

CASES = [  # input, weight, conv2d kwargs
    ((5, 4, 7, 6), (6, 2, 3, 3), dict(padding=1, groups=2)),
    ((3, 3, 8, 9), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    ((4, 2, 5, 5), (3, 2, 1, 1), dict()),
]


@pytest.fixture(params=[1, 2, 3], ids=lambda k: f"{k}-image-chunks")
def images_per_chunk(request, monkeypatch):
    """CHUNK_BYTES set so that each chunk holds ``k`` images of the cases' patches."""
    k = request.param
    seen = []
    real = geometry.batch_chunks

    def chunks(n, bytes_per_image):
        monkeypatch.setattr(geometry, "CHUNK_BYTES", k * bytes_per_image)
        out = real(n, bytes_per_image)
        seen.append(out)
        return out
    monkeypatch.setattr(conv, "batch_chunks", chunks)
    from plugtorch_backends.numpy_backend import native
    if native.kernels():  # the NumPy backend's kernels chunk the same way where they take these shapes
        from plugtorch_backends.numpy_backend.native import conv as native_conv
        monkeypatch.setattr(native_conv, "batch_chunks", chunks)
    return k, seen


@pytest.mark.parametrize("xs,ws,kw", CASES)
def test_chunked_backward_matches_torch(xs, ws, kw, images_per_chunk, torch):
    k, seen = images_per_chunk
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    ours = [plugtorch.tensor(a, requires_grad=True) for a in (x, w, b)]
    ref = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = plugtorch.conv2d(*ours, **kw)
    y_ref = torch.nn.functional.conv2d(*ref, **kw)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(plugtorch.tensor(g))
    y_ref.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), y_ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, r in zip(ours, ref):
        np.testing.assert_allclose(a.grad.numpy(), r.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert seen and all(len(c) == -(-xs[0] // k) for c in seen)  # the backward ops did split


def test_chunked_backward_supports_double_backward(images_per_chunk):
    x = plugtorch.randn(3, 2, 4, 4, dtype=plugtorch.float64, requires_grad=True)
    w = plugtorch.randn(2, 1, 3, 2, dtype=plugtorch.float64, requires_grad=True)

    def f(a, b):
        return plugtorch.conv2d(a, b, padding=1, groups=2)
    assert gradcheck(f, (x, w))
    assert gradgradcheck(f, (x, w))


def test_an_empty_batch_is_one_chunk():
    x = plugtorch.zeros(0, 2, 5, 5, requires_grad=True)
    w = plugtorch.randn(3, 2, 3, 3, requires_grad=True)
    plugtorch.conv2d(x, w, padding=1).sum().backward()
    assert x.grad.shape == (0, 2, 5, 5) and w.grad.tolist() == np.zeros((3, 2, 3, 3)).tolist()
