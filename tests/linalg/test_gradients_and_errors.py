"""plugtorch.linalg's derivatives (torch's gradients, gradcheck in float64 and complex128, batched
inputs) and its refusals (torch's messages, LinAlgError, the ``_ex`` variants' info, a backend
without a primitive)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch as pt
from plugtorch import func
from plugtorch.autograd import gradcheck

torch = pytest.importorskip("torch", reason="PyTorch (the reference oracle) is not installed; "
                                             "`pip install torch==2.13.0` to run this comparison")

RNG = np.random.default_rng(11)
A = RNG.standard_normal((2, 3, 3)) + 2 * np.eye(3)
B = RNG.standard_normal((2, 3, 2))
W = RNG.standard_normal((2, 4, 3))
CA = A + 1j * RNG.standard_normal((2, 3, 3))
CB = B + 1j * RNG.standard_normal((2, 3, 2))
CW = W + 1j * RNG.standard_normal((2, 4, 3))


def _weights(m, x):
    """A loss that depends on every entry (and on phases, for complex x)."""
    y = x * m.arange(1, x.numel() + 1, dtype=m.float64).reshape(x.shape).sin()
    return y.real.sum() + 0.5 * y.imag.sum() if y.is_complex() else y.sum()


def _spd(m, x):
    return x @ x.mT.conj() + 3 * m.eye(x.shape[-1], dtype=x.dtype)


def _sym(m, x):
    return x + x.mT.conj()


# name -> (loss(lib, *tensors), real inputs, complex inputs or None)
LOSSES = {
    "cholesky": (lambda m, x: _weights(m, m.linalg.cholesky(_spd(m, x))), (A,), (CA,)),
    "cholesky_upper": (lambda m, x: _weights(m, m.linalg.cholesky(_spd(m, x), upper=True)), (A,), None),
    "solve": (lambda m, x, y: _weights(m, m.linalg.solve(x, y)), (A, B), (CA, CB)),
    "solve_right_broadcast": (lambda m, x, y: _weights(m, m.linalg.solve(x[0], y.mT, left=False)), (A, B), None),
    "inv": (lambda m, x: _weights(m, m.linalg.inv(x)), (A,), (CA,)),
    "det": (lambda m, x: _weights(m, m.linalg.det(x)), (A,), (CA,)),
    "logabsdet": (lambda m, x: _weights(m, m.linalg.slogdet(x).logabsdet), (A,), (CA,)),
    "solve_triangular": (lambda m, x, y: _weights(m, m.linalg.solve_triangular(x, y, upper=True)), (A, B), (CA, CB)),
    "solve_triangular_right_unit": (lambda m, x, y: _weights(m, m.linalg.solve_triangular(
        x[:1], y.mT, upper=False, left=False, unitriangular=True)), (A, B), None),
    "qr_tall": (lambda m, x: _weights(m, m.linalg.qr(x).Q) + _weights(m, m.linalg.qr(x).R), (W,), (CW,)),
    "qr_wide": (lambda m, x: _weights(m, m.linalg.qr(x.mT).Q) + _weights(m, m.linalg.qr(x.mT).R), (W,), None),
    "svd": (lambda m, x: (lambda u, s, vh: _weights(m, u @ vh) + _weights(m, s))(*m.linalg.svd(x, False)),
            (W,), (CW,)),
    "svd_wide": (lambda m, x: (lambda u, s, vh: _weights(m, u @ vh) + _weights(m, s))(*m.linalg.svd(x.mT, False)),
                 (W,), None),
    "svdvals": (lambda m, x: _weights(m, m.linalg.svdvals(x)), (W,), (CW,)),
    "eigh": (lambda m, x: (lambda w, v: _weights(m, v.abs()) + _weights(m, w))(*m.linalg.eigh(_sym(m, x))),
             (A,), (CA,)),
    "eigvalsh": (lambda m, x: _weights(m, m.linalg.eigvalsh(_sym(m, x))), (A,), (CA,)),
    "eig": (lambda m, x: (lambda w, v: _weights(m, v.abs()) + _weights(m, w))(*m.linalg.eig(x)), (A,), (CA,)),
    "lu_factor": (lambda m, x: _weights(m, m.linalg.lu_factor(x).LU), (A,), (CA,)),
    "lu": (lambda m, x: (lambda p, lo, up: _weights(m, lo) + _weights(m, up))(*m.linalg.lu(x)), (A,), None),
    "lstsq": (lambda m, x, y: _weights(m, m.linalg.lstsq(x, y[:, :1].expand(2, 4, 2)).solution), (W, B), None),
    "pinv": (lambda m, x: _weights(m, m.linalg.pinv(x)), (W,), None),
    "matrix_exp": (lambda m, x: _weights(m, m.linalg.matrix_exp(x)), (A,), None),
    "cholesky_solve": (lambda m, x, y: _weights(m, m.cholesky_solve(y, m.linalg.cholesky(_spd(m, x)))), (A, B), None),
    "householder_product": (lambda m, x, t: _weights(m, m.linalg.householder_product(x, t)), (W, B[:, 0]), None),
    "cond": (lambda m, x: _weights(m, m.linalg.cond(x)), (A,), None),
}


def _grads(lib, loss, arrays):
    xs = [lib.tensor(a, requires_grad=True) for a in arrays]
    return xs, lib.autograd.grad(loss(lib, *xs), xs)


CASES = [(name, False) for name in sorted(LOSSES)] + [(name, True) for name in sorted(LOSSES) if LOSSES[name][2]]


@pytest.mark.parametrize(("name", "complex_"), CASES, ids=[f"{n}-{'complex128' if c else 'float64'}" for n, c in CASES])
def test_gradients_equal_torch_s_and_pass_gradcheck(name, complex_):
    loss, real, cplx = LOSSES[name]
    arrays = cplx if complex_ else real
    xs, ours = _grads(pt, loss, arrays)
    _, theirs = _grads(torch, loss, arrays)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.detach().numpy(), t.resolve_conj().numpy(), atol=1e-8, rtol=1e-6)
    if not complex_:  # (gradcheck in the kit's sense is for real inputs; complex ones are checked against torch)
        assert gradcheck(lambda *x: loss(pt, *x), tuple(xs))


def test_repeated_singular_values_give_torch_s_non_finite_vector_gradients():
    # the singular vectors of a matrix with a repeated singular value are not unique: torch's
    # gradient through them is not finite, and neither is plugtorch's; the values' gradient is
    a = np.diag([2.0, 2.0, 1.0])
    for lib in (pt, torch):
        x = lib.tensor(a, requires_grad=True)
        u, s, vh = lib.linalg.svd(x)
        (g,) = lib.autograd.grad(_weights(lib, u), [x])
        assert not np.isfinite(g.detach().numpy()).all()
        x2 = lib.tensor(a, requires_grad=True)
        (g2,) = lib.autograd.grad(lib.linalg.svdvals(x2).sum(), [x2])
        np.testing.assert_allclose(g2.detach().numpy(), np.eye(3), atol=1e-12)


def test_second_derivatives_of_eigvalsh_and_svdvals():
    x = pt.tensor(A, requires_grad=True)
    assert pt.autograd.gradgradcheck(lambda t: pt.linalg.eigvalsh(t + t.mT), (x,))
    assert pt.autograd.gradgradcheck(lambda t: pt.linalg.svdvals(t), (x,))


# -- errors --------------------------------------------------------------------------------

def _error(lib, call):
    try:
        call(lib)
    except Exception as e:  # the two libraries' errors are compared
        return e
    return None


ERRORS = {
    "cholesky not positive-definite": lambda m: m.linalg.cholesky(m.tensor([[1.0, 2.0], [2.0, 1.0]])),
    "cholesky batched": lambda m: m.linalg.cholesky(m.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]])),
    "cholesky not square": lambda m: m.linalg.cholesky(m.ones(2, 3)),
    "cholesky 1-D": lambda m: m.linalg.cholesky(m.ones(3)),
    "cholesky integer": lambda m: m.linalg.cholesky(m.ones(2, 2, dtype=m.int64)),
    "inv singular": lambda m: m.linalg.inv(m.zeros(2, 2)),
    "inv singular batched": lambda m: m.linalg.inv(m.stack([m.eye(2), m.zeros(2, 2)])),
    "inv not square": lambda m: m.linalg.inv(m.ones(2, 2, 3)),
    "solve singular": lambda m: m.linalg.solve(m.zeros(2, 2), m.ones(2)),
    "solve singular batched": lambda m: m.linalg.solve(m.stack([m.eye(2), m.zeros(2, 2)]), m.ones(2, 2, 1)),
    "solve shapes": lambda m: m.linalg.solve(m.eye(2), m.ones(3)),
    "solve shapes right": lambda m: m.linalg.solve(m.eye(2), m.ones(3), left=False),
    "solve_triangular shapes": lambda m: m.linalg.solve_triangular(m.eye(2), m.ones(1, 3), upper=True, left=False),
    "solve_triangular 1-D": lambda m: m.linalg.solve_triangular(m.eye(2), m.ones(2), upper=True),
    "lu_factor singular": lambda m: m.linalg.lu_factor(m.zeros(2, 2)),
    "lu_factor singular batched": lambda m: m.linalg.lu_factor(m.stack([m.eye(2), m.zeros(2, 2)])),
    "lu_factor no pivoting": lambda m: m.linalg.lu_factor(m.eye(2), pivot=False),
    "det not square": lambda m: m.linalg.det(m.ones(2, 3)),
    "det integer": lambda m: m.linalg.det(m.ones(2, 2, dtype=m.int64)),
    "eigh not square": lambda m: m.linalg.eigh(m.ones(2, 3)),
    "eigh UPLO": lambda m: m.linalg.eigh(m.eye(2), UPLO="X"),
    "eig not square": lambda m: m.linalg.eig(m.ones(2, 3)),
    "svd 1-D": lambda m: m.linalg.svd(m.ones(3)),
    "svd integer": lambda m: m.linalg.svd(m.ones(2, 2, dtype=m.int64)),
    "qr mode": lambda m: m.linalg.qr(m.ones(3, 2), mode="x"),
    "qr 1-D": lambda m: m.linalg.qr(m.ones(3)),
    "lstsq shapes": lambda m: m.linalg.lstsq(m.eye(2), m.ones(3)),
    "multi_dot one": lambda m: m.linalg.multi_dot([m.ones(2, 2)]),
    "cholesky_solve shapes": lambda m: m.cholesky_solve(m.ones(2, 2), m.ones(3, 3)),
    "matrix_exp not square": lambda m: m.linalg.matrix_exp(m.ones(2, 3)),
    "MultivariateNormal not positive-definite": lambda m: m.distributions.MultivariateNormal(
        m.zeros(2), m.tensor([[1.0, 2.0], [2.0, 1.0]]), validate_args=False),
    "qr complete not differentiable": lambda m: (lambda x: m.autograd.grad(
        m.linalg.qr(x + m.eye(3, 2), mode="complete").Q.sum(), [x]))(m.ones(3, 2, requires_grad=True)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_are_torch_s(name):
    ours, theirs = _error(pt, ERRORS[name]), _error(torch, ERRORS[name])
    assert theirs is not None and ours is not None, (ours, theirs)
    assert isinstance(ours, RuntimeError) == isinstance(theirs, RuntimeError)
    if isinstance(theirs, torch.linalg.LinAlgError):
        assert isinstance(ours, pt.linalg.LinAlgError)
    assert str(ours) == str(theirs)


def test_ex_variants_report_info_as_torch():
    bad = [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]]
    for call in (lambda m, x: m.linalg.cholesky_ex(x).info, lambda m, x: m.linalg.inv_ex(x).info,
                 lambda m, x: m.linalg.lu_factor_ex(x).info, lambda m, x: m.linalg.solve_ex(x, x).info):
        ours, theirs = call(pt, pt.tensor(bad)), call(torch, torch.tensor(bad))
        assert ours.dtype == pt.int32 and ours.tolist() == theirs.tolist()
    with pytest.raises(pt.linalg.LinAlgError, match="leading minor of order 2"):
        pt.linalg.cholesky_ex(pt.tensor(bad), check_errors=True)


def test_linalg_error_is_a_runtime_error_and_no_stray_names():
    assert issubclass(pt.linalg.LinAlgError, RuntimeError)
    assert not hasattr(pt.linalg, "annotations")
    missing = [n for n in dir(torch.linalg) if not n.startswith("_") and not hasattr(pt.linalg, n)]
    assert sorted(missing) == ["common_notes", "ldl_factor", "ldl_factor_ex", "ldl_solve"]


def test_a_backend_without_a_primitive_names_it(monkeypatch):
    backend = pt.ones(1)._backend
    monkeypatch.delitem(backend.primitives, "eig")
    with pytest.raises(NotImplementedError, match="op 'eig_factors' needs the primitive 'eig', which backend 'numpy'"):
        pt.linalg.eig(pt.eye(2))


def test_vmap_runs_the_factorisations_on_the_whole_batch():
    # each op batches over its leading dims, so vmap folds its batch in (no per-example loop)
    a, b = pt.tensor(A), pt.tensor(B)
    s = a @ a.mT + pt.eye(3, dtype=a.dtype)
    calls = [(func.vmap(pt.linalg.det), (a,), pt.linalg.det(a)),
             (func.vmap(pt.linalg.cholesky), (s,), pt.linalg.cholesky(s)),
             (func.vmap(lambda x: pt.linalg.qr(x).R), (a,), pt.linalg.qr(a).R),
             (func.vmap(pt.linalg.solve, in_dims=(None, 0)), (a[0], b), pt.linalg.solve(a[0], b)),
             (func.vmap(lambda x, y: pt.linalg.solve_triangular(x, y, upper=True)), (a, b),
              pt.linalg.solve_triangular(a, b, upper=True)),
             (func.vmap(pt.linalg.eigvalsh), (s,), pt.linalg.eigvalsh(s)),
             (func.vmap(func.grad(lambda x: pt.linalg.slogdet(x).logabsdet)), (a,), pt.linalg.inv(a).mT)]
    for fn, args, expected in calls:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*batching rule")
            np.testing.assert_allclose(fn(*args).numpy(), expected.numpy(), atol=1e-10)
