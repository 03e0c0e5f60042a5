"""plugtorch.fft against torch.fft: values, dtypes, n/s/dim/norm, gradients and errors."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch as pt
from plugtorch.autograd import gradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((4, 6)), RNG.standard_normal((4, 6))
ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
N_D = ("fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn")
REAL_ONLY = ("rfft", "ihfft", "rfft2", "rfftn")


def _host(t):
    return t.resolve_conj().detach().numpy()


def _kwargs(name):
    if name in ONE_D:
        return [{}, {"norm": "ortho"}, {"norm": "forward"}, {"dim": 0}, {"n": 5}, {"n": 9, "dim": -2}]
    return [{}, {"norm": "ortho"}, {"norm": "forward"}, {"dim": (0,)}, {"s": (3, 7)}, {"s": (5, 4), "dim": (1, 0)},
            {"s": (-1, 4)}]


CASES = [(name, kw, cplx) for name in ONE_D + N_D for kw in _kwargs(name) for cplx in (False, True)
         if not (cplx and name in REAL_ONLY)]


@pytest.mark.parametrize(("name", "kw", "cplx"), CASES)
def test_values_and_gradients_match_torch(name, kw, cplx):
    results = []
    for m in (pt, torch):
        weights = np.random.default_rng(1)
        re, im = m.tensor(X, requires_grad=True), m.tensor(Y, requires_grad=True)
        y = getattr(m.fft, name)(m.complex(re, im) if cplx else re, **kw)
        parts = m.view_as_real(y.resolve_conj()) if y.is_complex() else y ** 2
        (parts * m.tensor(weights.standard_normal(tuple(parts.shape)))).sum().backward()
        results.append((y, re.grad, im.grad))
    (ours, our_re, our_im), (theirs, their_re, their_im) = results
    assert ours.dtype.name == str(theirs.dtype).split(".")[-1] and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(_host(ours), _host(theirs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_host(our_re), _host(their_re), rtol=1e-10, atol=1e-12)
    if cplx:
        np.testing.assert_allclose(_host(our_im), _host(their_im), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "complex64", "complex128"])
@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "ihfft", "hfft", "fftn"])
def test_dtypes(name, dtype):
    if dtype.startswith("complex") and name in REAL_ONLY:
        pytest.skip("the real-input transforms refuse complex input (test_errors)")
    data = (X * 3).astype(np.int64) if dtype == "int64" else X + (1j * Y if dtype.startswith("complex") else 0)
    ours = getattr(pt.fft, name)(pt.tensor(data, dtype=getattr(pt, dtype)))
    theirs = getattr(torch.fft, name)(torch.tensor(data, dtype=getattr(torch, dtype)))
    assert ours.dtype.name == str(theirs.dtype).split(".")[-1]
    tol = 1e-10 if theirs.dtype in (torch.float64, torch.complex128) else 1e-5
    np.testing.assert_allclose(_host(ours), _host(theirs), rtol=tol, atol=tol)


def test_edge_values():
    x = np.array([0.0, np.inf, -1.0, np.nan, 1e300, 2.0])
    for name in ("fft", "rfft"):
        np.testing.assert_array_equal(np.isnan(_host(getattr(pt.fft, name)(pt.tensor(x)))),
                                      np.isnan(_host(getattr(torch.fft, name)(torch.tensor(x)))))
    one = np.array([3.5])
    np.testing.assert_allclose(_host(pt.fft.fft(pt.tensor(one))), _host(torch.fft.fft(torch.tensor(one))))
    np.testing.assert_allclose(_host(pt.fft.irfft(pt.tensor([1.0 + 0j]), n=1)),
                               _host(torch.fft.irfft(torch.tensor([1.0 + 0j]), n=1)))


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "rfft2", "irfftn"])
def test_gradcheck_float64(name):
    x = pt.tensor(RNG.standard_normal((3, 5)), requires_grad=True)

    def f(x):
        y = getattr(pt.fft, name)(x, norm="ortho")
        return pt.view_as_real(y) if y.is_complex() else y
    assert gradcheck(f, (x,))


@pytest.mark.parametrize("n", [0, 1, 4, 5])
@pytest.mark.parametrize("d", [1.0, 0.3])
def test_frequencies(n, d):
    for name in ("fftfreq", "rfftfreq"):
        np.testing.assert_array_equal(getattr(pt.fft, name)(n, d).numpy(), getattr(torch.fft, name)(n, d).numpy())
    assert pt.fft.fftfreq(4, dtype=pt.float64).dtype is pt.float64
    assert pt.fft.fftfreq(3, requires_grad=True).requires_grad


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), (-1,)])
def test_shifts(dim):
    x = np.arange(35.0).reshape(5, 7)
    for name in ("fftshift", "ifftshift"):
        np.testing.assert_array_equal(getattr(pt.fft, name)(pt.tensor(x), dim).numpy(),
                                      getattr(torch.fft, name)(torch.tensor(x), dim).numpy())
    np.testing.assert_array_equal(pt.fft.ifftshift(pt.fft.fftshift(pt.tensor(x))).numpy(), x)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda m: m.fft.rfft(m.tensor([1j, 2])), RuntimeError, "real input"),
    (lambda m: m.fft.fft(m.ones(4), n=0), RuntimeError, "Invalid number of data points"),
    (lambda m: m.fft.fft(m.ones(4), norm="bad"), ValueError, "Invalid normalization mode"),
    (lambda m: m.fft.fftn(m.ones(4, 4), s=(2, 2), dim=(0,)), RuntimeError, "same length"),
    (lambda m: m.fft.fftn(m.ones(4, 4), dim=(0, -2)), RuntimeError, "unique"),
    (lambda m: m.fft.fft(m.ones(4), dim=2), IndexError, "range"),
    (lambda m: m.fft.irfft(m.ones(1, dtype=m.complex64)), RuntimeError, "Invalid number of data points"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(pt)
    with pytest.raises(Exception):  # noqa: B017  (torch refuses too; its message may differ)
        call(torch)
