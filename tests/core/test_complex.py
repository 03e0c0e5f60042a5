"""Complex tensors against torch: dtypes and promotion, printing, parts and views, gradients."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch as pt

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A, B = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))


def _same(ours, theirs, **tol):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **tol)


@pytest.mark.parametrize(("a", "b"), [("float32", "complex64"), ("float64", "complex64"), ("float16", "complex64"),
                                      ("int64", "complex128"), ("complex64", "complex128"), ("bool", "complex64")])
def test_promote_types(a, b):
    assert pt.promote_types(getattr(pt, a), getattr(pt, b)).name == str(
        torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[-1] or a == "float16"


@pytest.mark.parametrize("make", [
    lambda m: m.ones(2) + m.tensor(1j, dtype=m.complex128),
    lambda m: m.ones(2, dtype=m.float64) + 1j,
    lambda m: m.ones(2, dtype=m.int64) * 1j,
    lambda m: m.tensor(1.0, dtype=m.float64) + m.ones(2, dtype=m.complex64),
    lambda m: m.tensor([1 + 2j, 3.5]),
    lambda m: m.tensor([1, 2], dtype=m.cdouble),
    lambda m: m.ones(2, dtype=m.float64).to(m.cfloat),
])
def test_result_dtypes_and_values(make):
    _same(make(pt), make(torch))


@pytest.mark.parametrize("data", [[[1.5 + 2j, -3e-5j], [1, 2]], [1 + 2j], [0j, -1 - 1j, float("nan") + 1j, 1e10j],
                                  [[1 + 1j] * 3] * 3, 2.5 - 1j])
def test_printing(data):
    assert str(pt.tensor(data)).replace("plugtorch", "torch") == str(torch.tensor(data))
    assert (str(pt.tensor(data, dtype=pt.complex128)).replace("plugtorch", "torch")
            == str(torch.tensor(data, dtype=torch.complex128)))


def test_parts_and_builders_match_torch():
    for m_fn in (lambda m, z: m.view_as_real(z), lambda m, z: m.real(z), lambda m, z: m.imag(z),
                 lambda m, z: m.conj(z).resolve_conj(), lambda m, z: m.angle(z), lambda m, z: z.abs(),
                 lambda m, z: m.polar(z.abs(), m.angle(z))):
        _same(m_fn(pt, pt.complex(pt.tensor(A), pt.tensor(B))), m_fn(torch, torch.complex(torch.tensor(A),
                                                                                           torch.tensor(B))))
    x = np.array([-2.0, 0.0, 3.0, np.nan, -np.inf])
    _same(pt.angle(pt.tensor(x)), torch.angle(torch.tensor(x)))
    _same(pt.angle(pt.tensor([-1, 2])), torch.angle(torch.tensor([-1, 2])))
    pairs = np.stack([A, B], -1)
    _same(pt.view_as_complex(pt.tensor(pairs)), torch.view_as_complex(torch.tensor(pairs)))
    assert pt.tensor([1j]).is_complex() and not pt.is_complex(pt.ones(1))


def test_views_write_through():
    z = pt.tensor([[1 + 2j, 3 - 1j], [0j, -2 + 0.5j]])
    z.real = pt.tensor([9.0, 8.0])
    z.imag[0, 0] = 7
    pt.view_as_real(z)[1, 1, 1] = 100
    np.testing.assert_array_equal(z.numpy(), [[9 + 7j, 8 - 1j], [9, 8 + 100j]])
    w = pt.zeros(3, 2)
    pt.view_as_complex(w).imag.fill_(5)
    np.testing.assert_array_equal(w.numpy()[:, 1], 5)
    t = pt.tensor([[1 + 1j, 2 + 2j], [3 + 3j, 4 + 4j]]).T  # a strided input still gives its parts
    np.testing.assert_array_equal(pt.view_as_real(t).numpy()[..., 0], [[1, 3], [2, 4]])


LOSSES = {
    "abs": lambda m, z: (z.abs() ** 2 * m.tensor(A)).sum(),
    "angle": lambda m, z: (m.angle(z) * m.tensor(B)).sum(),
    "real*imag": lambda m, z: (z.real * z.imag).sum(),
    "view_as_real": lambda m, z: (m.view_as_real(z) ** 3).sum(),
    "conj": lambda m, z: (m.view_as_real(m.conj(z).resolve_conj()) * m.tensor(np.stack([A, B], -1))).sum(),
    "polar": lambda m, z: m.view_as_real(m.polar(z.abs(), m.angle(z))).sum(),
    "cast": lambda m, z: m.view_as_real(z.real.to(m.complex128) * 2).sum(),
    "mul": lambda m, z: m.view_as_real(z * z * m.complex(m.tensor(B), m.tensor(A))).sum(),
    "scalar": lambda m, z: m.view_as_real(1j - z * (2 + 1j) / (1 + 2j)).sum(),
    "real*complex": lambda m, z: m.view_as_real(z.real * z).sum(),
    "div": lambda m, z: m.view_as_real(z / (z + 3)).sum(),
    "exp,log": lambda m, z: m.view_as_real(m.exp(z) + m.log(z)).sum(),
    "sum,mean": lambda m, z: z.sum().abs() + (z * z).mean(0).abs().sum(),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_of_real_losses_match_torch(name):
    def run(m):
        re, im = m.tensor(A, requires_grad=True), m.tensor(B, requires_grad=True)
        LOSSES[name](m, m.complex(re, im)).backward()
        return re.grad, im.grad
    for ours, theirs in zip(run(pt), run(torch)):
        _same(ours, theirs, rtol=1e-10, atol=1e-12)


def test_complex_leaf_gradient_is_conjugate_wirtinger():
    def run(m):
        z = m.tensor([1 + 1j, 2 - 1j, -0.5j], requires_grad=True)
        (z * z).abs().sum().backward()
        return z.grad
    _same(run(pt), run(torch))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: pt.view_as_real(pt.ones(2)), "only supported for complex"),
    (lambda: pt.view_as_complex(pt.ones(3)), "last dimension of size 2"),
    (lambda: pt.view_as_complex(pt.ones(2, 2, dtype=pt.int64)), "float and double"),
    (lambda: pt.view_as_complex(pt.ones(2, 2).T), "stride 1"),
    (lambda: pt.complex(pt.ones(2), pt.ones(2, dtype=pt.float64)), "Float or Double"),
    (lambda: pt.imag(pt.ones(2)), "non-complex"),
])
def test_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 2, 3)], ids=str)
@pytest.mark.parametrize("attr", ["H", "mH", "mT", "T", "adjoint"])
def test_conjugate_transposes_as_torch(torch, shape, attr):
    """``H`` (matrices), ``mH``/``mT``/``adjoint()`` (batches of matrices) and ``T``: torch's values,
    and torch's message where the rank does not fit."""
    values = (np.arange(int(np.prod(shape)), dtype=np.float32) - 2).reshape(shape) * (1 - 2j) + 0.5j

    def take(lib):
        t = lib.tensor(values.astype(np.complex64))
        try:
            out = t.adjoint() if attr == "adjoint" else getattr(t, attr)
        except RuntimeError as e:
            return str(e)
        return out.resolve_conj().numpy().tolist() if lib is torch else out.numpy().tolist()
    assert take(pt) == take(torch)


def test_mh_of_a_real_matrix_is_its_transpose_with_gradient():
    x = pt.randn(2, 3, requires_grad=True)
    assert x.mH.tolist() == x.mT.tolist() == pt.adjoint(x).tolist()
    (x.mH * pt.arange(6.0).reshape(3, 2)).sum().backward()
    assert x.grad.tolist() == pt.arange(6.0).reshape(3, 2).t().tolist()


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_rand_and_randn_draw_complex_as_torch(torch, dtype):
    """torch's complex draws: parts independent, uniform in [0, 1) for rand, normal with variance
    1/2 each for randn (E|z|^2 = 1); reproducible from the seed; the _like forms keep the dtype."""
    pt.manual_seed(3)
    z = pt.randn(100_000, dtype=getattr(pt, dtype))
    u = pt.rand(100_000, dtype=getattr(pt, dtype))
    theirs = torch.randn(100_000, dtype=getattr(torch, dtype))
    assert str(z.dtype) == str(u.dtype) == "plugtorch." + dtype
    for part in (z.real, z.imag):
        assert abs(part.mean().item()) < 0.01 and abs(part.var().item() - 0.5) < 0.01
    assert abs(theirs.real.var().item() - 0.5) < 0.01 and abs((z.abs() ** 2).mean().item() - 1) < 0.02
    for part in (u.real, u.imag):
        assert part.min().item() >= 0 and part.max().item() < 1 and abs(part.mean().item() - 0.5) < 0.01
    assert abs(np.corrcoef(z.real.numpy(), z.imag.numpy())[0, 1]) < 0.02
    pt.manual_seed(3)
    assert pt.randn(100_000, dtype=getattr(pt, dtype)).tolist()[:5] == z.tolist()[:5]
    assert pt.randn_like(z).dtype is z.dtype and pt.rand_like(u).dtype is u.dtype
