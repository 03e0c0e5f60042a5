"""plugtorch.linalg's factorisations and solvers against torch.linalg: values (or, where a factor
is unique only up to signs or phases, what is unique), layouts, dtypes, batches, gradients
(torch's and gradcheck's, float64 and complex128), torch's errors and the ``_ex`` variants' info."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch as pt

torch = pytest.importorskip("torch", reason="PyTorch (the reference oracle) is not installed; "
                                             "`pip install torch==2.13.0` to run this comparison")

RNG = np.random.default_rng(7)


def _c(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


A = RNG.standard_normal((2, 3, 3)) + 2 * np.eye(3)
B = RNG.standard_normal((2, 3, 2))
W = RNG.standard_normal((2, 4, 3))
SPD = A @ A.transpose(0, 2, 1) + np.eye(3)
CA = _c(2, 3, 3) + 2 * np.eye(3)
CB = _c(2, 3, 2)
CW = _c(2, 4, 3)


def _np(x):
    return x.detach().resolve_conj().numpy() if isinstance(x, torch.Tensor) else x.detach().numpy()


def _both(f, *arrays, dtype=None):
    """f(lib, *tensors) for plugtorch and torch."""
    out = []
    for lib in (pt, torch):
        ts = [lib.tensor(a if dtype is None else a.astype(dtype)) for a in arrays]
        out.append(f(lib, *ts))
    return out


def _close(ours, theirs, atol=1e-9):
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _close(a, b, atol)
        return
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(_np(ours), _np(theirs), atol=atol, rtol=1e-6)


# -- values where the factors are unique ----------------------------------------------------

UNIQUE = {
    "cholesky": (lambda m, s: m.linalg.cholesky(s), SPD),
    "cholesky_upper": (lambda m, s: m.linalg.cholesky(s, upper=True), SPD),
    "cholesky_complex": (lambda m, a: m.linalg.cholesky(a @ a.mT.conj() + m.eye(3)), CA),
    "lu_factor": (lambda m, a: tuple(m.linalg.lu_factor(a)), A),
    "lu_tall": (lambda m, w: tuple(m.linalg.lu(w)), W),
    "lu_wide": (lambda m, w: tuple(m.linalg.lu(w.mT)), W),
    "inv": (lambda m, a: m.linalg.inv(a), A),
    "inv_complex": (lambda m, a: m.linalg.inv(a), CA),
    "det": (lambda m, a: m.linalg.det(a), A),
    "det_complex": (lambda m, a: m.linalg.det(a), CA),
    "slogdet": (lambda m, a: tuple(m.linalg.slogdet(a)), A),
    "slogdet_complex": (lambda m, a: tuple(m.linalg.slogdet(a)), CA),
    "logdet": (lambda m, a: m.logdet(a), A),
    "eigvalsh": (lambda m, s: m.linalg.eigvalsh(s), SPD),
    "eigvalsh_upper": (lambda m, a: m.linalg.eigvalsh(a, UPLO="U"), A),
    "svdvals": (lambda m, w: m.linalg.svdvals(w), W),
    "svdvals_complex": (lambda m, w: m.linalg.svdvals(w), CW),
    "matrix_rank": (lambda m, w: m.linalg.matrix_rank(w @ w.mT), W),
    "pinv": (lambda m, w: m.linalg.pinv(w), W),
    "pinv_hermitian": (lambda m, s: m.linalg.pinv(s, hermitian=True), SPD),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), A),
    "matrix_exp_complex": (lambda m, a: m.matrix_exp(a), CA),
    "matrix_power_negative": (lambda m, a: m.linalg.matrix_power(a, -2), A),
    "cond": (lambda m, a: m.linalg.cond(a), A),
    "cond_fro": (lambda m, a: m.linalg.cond(a, "fro"), A),
    "cond_inf": (lambda m, a: m.linalg.cond(a, float("inf")), A),
    "vander": (lambda m, a: m.linalg.vander(a[0, 0], N=4), A),
    "cholesky_inverse": (lambda m, s: m.cholesky_inverse(m.linalg.cholesky(s)), SPD),
    "lu_unpack": (lambda m, a: tuple(m.lu_unpack(*m.linalg.lu_factor(a))), A),
    "pinverse": (lambda m, w: m.pinverse(w), W),
    "inverse_method": (lambda m, a: a.inverse(), A),
    "det_method": (lambda m, a: a.det(), A),
}


@pytest.mark.parametrize("name", sorted(UNIQUE))
def test_unique_results_equal_torch(name):
    f, a = UNIQUE[name]
    ours, theirs = _both(f, a)
    _close(ours, theirs)


SOLVES = {
    "solve": lambda m, a, b: m.linalg.solve(a, b),
    "solve_vector": lambda m, a, b: m.linalg.solve(a, b[..., 0]),
    "solve_right": lambda m, a, b: m.linalg.solve(a, b.mT, left=False),
    "solve_broadcast": lambda m, a, b: m.linalg.solve(a[0], b),
    "solve_triangular_upper": lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
    "solve_triangular_lower_right_unit": lambda m, a, b: m.linalg.solve_triangular(a, b.mT, upper=False, left=False,
                                                                                 unitriangular=True),
    "solve_triangular_broadcast": lambda m, a, b: m.linalg.solve_triangular(a[:1], b, upper=False),
    "lu_solve": lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b),
    "lu_solve_adjoint_right": lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b.mT, left=False,
                                                                adjoint=True),
    "lstsq": lambda m, a, b: m.linalg.lstsq(a, b).solution,
    "cholesky_solve": lambda m, a, b: m.cholesky_solve(b, m.linalg.cholesky(a @ a.mT.conj() + m.eye(3))),
    "cholesky_solve_upper": lambda m, a, b: m.cholesky_solve(b, m.linalg.cholesky(a @ a.mT.conj() + m.eye(3),
                                                                                   upper=True), upper=True),
    "triangular_solve": lambda m, a, b: tuple(m.triangular_solve(b, a, transpose=True)),
    "lu_solve_old": lambda m, a, b: m.lu_solve(b, *m.linalg.lu_factor(a)),
    "tensorsolve": lambda m, a, b: m.linalg.tensorsolve(a[0].reshape(3, 1, 3), b[0, :, 0].reshape(3, 1)),
}


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("name", sorted(SOLVES))
def test_solves_equal_torch(name, complex_):
    a, b = (CA, CB) if complex_ else (A, B)
    ours, theirs = _both(SOLVES[name], a, b)
    _close(ours, theirs)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_single_precision_keeps_its_dtype(dtype):
    a = (CA if dtype is np.complex64 else A).astype(dtype)
    for f in (lambda m, x: m.linalg.inv(x), lambda m, x: m.linalg.det(x), lambda m, x: m.linalg.svdvals(x),
              lambda m, x: m.linalg.eigvals(x), lambda m, x: m.linalg.qr(x).R.abs()):
        ours, theirs = _both(f, a)
        _close(ours, theirs, atol=1e-4)


def test_layouts_are_torch_s():
    # LAPACK's results are stored column by column in torch: x.view(...) and DLPack users see it
    calls = [lambda m: m.linalg.cholesky(m.tensor(SPD)), lambda m: m.linalg.inv(m.tensor(A)),
             lambda m: m.linalg.solve(m.tensor(A), m.tensor(B)), lambda m: m.linalg.qr(m.tensor(W)),
             lambda m: m.linalg.svd(m.tensor(W)), lambda m: m.linalg.eigh(m.tensor(SPD)),
             lambda m: m.linalg.lu_factor(m.tensor(A)), lambda m: m.linalg.lu(m.tensor(A)),
             lambda m: m.linalg.solve_triangular(m.tensor(A), m.tensor(B).mT, upper=True, left=False),
             lambda m: m.linalg.solve(m.tensor(A), m.tensor(B).mT, left=False), lambda m: m.svd(m.tensor(W))]
    for call in calls:
        ours, theirs = call(pt), call(torch)
        pairs = zip(ours, theirs) if isinstance(ours, tuple) else [(ours, theirs)]
        for o, t in pairs:
            assert tuple(o.stride()) == tuple(t.stride())


# -- factors unique up to signs: what is unique ----------------------------------------------

@pytest.mark.parametrize("a", [W, W.transpose(0, 2, 1), CW], ids=["tall", "wide", "complex"])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_reconstructs_with_torch_s_diagonal_magnitudes(a, mode):
    Q, R = pt.linalg.qr(pt.tensor(a), mode=mode)
    tQ, tR = torch.linalg.qr(torch.tensor(a), mode=mode)
    assert tuple(Q.shape) == tuple(tQ.shape) and tuple(R.shape) == tuple(tR.shape)
    np.testing.assert_allclose(np.abs(_np(R)), np.abs(_np(tR)), atol=1e-9)
    if mode != "r":
        np.testing.assert_allclose(_np(Q @ R), a, atol=1e-9)
        k = Q.shape[-1]
        np.testing.assert_allclose(_np(Q.mT.conj() @ Q), np.broadcast_to(np.eye(k), (2, k, k)), atol=1e-9)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("a", [W, W.transpose(0, 2, 1), CW], ids=["tall", "wide", "complex"])
def test_svd_reconstructs_with_torch_s_singular_values(a, full):
    U, S, Vh = pt.linalg.svd(pt.tensor(a), full_matrices=full)
    tU, tS, tVh = torch.linalg.svd(torch.tensor(a), full_matrices=full)
    assert [tuple(x.shape) for x in (U, S, Vh)] == [tuple(x.shape) for x in (tU, tS, tVh)]
    _close(S, tS)
    k = S.shape[-1]
    np.testing.assert_allclose(_np((U[..., :k] * S.to(U.dtype).unsqueeze(-2)) @ Vh[..., :k, :]), a, atol=1e-9)
    old = pt.svd(pt.tensor(a))  # torch.svd: V, not Vh, and the reduced factors (some=True)
    assert tuple(old.V.shape) == tuple(torch.svd(torch.tensor(a)).V.shape)
    np.testing.assert_allclose(_np(old.V), _np(Vh[..., :k, :]).conj().swapaxes(-1, -2), atol=1e-9)


@pytest.mark.parametrize("a", [SPD, CA @ CA.conj().transpose(0, 2, 1)], ids=["real", "complex"])
def test_eigh_matches_torch_up_to_the_eigenvectors_phases(a):
    w, V = pt.linalg.eigh(pt.tensor(a))
    tw, tV = torch.linalg.eigh(torch.tensor(a))
    _close(w, tw)
    np.testing.assert_allclose(np.abs(_np(V)), np.abs(_np(tV)), atol=1e-8)
    np.testing.assert_allclose(_np(V @ w.to(V.dtype).diag_embed() @ V.mT.conj()), a, atol=1e-9)


@pytest.mark.parametrize("a", [A, CA], ids=["real", "complex"])
def test_eig_reconstructs_with_torch_s_eigenvalues(a):
    w, V = pt.linalg.eig(pt.tensor(a))
    tw = torch.linalg.eigvals(torch.tensor(a))
    assert w.dtype == pt.complex128
    np.testing.assert_allclose(np.sort_complex(_np(w)), np.sort_complex(_np(tw)), atol=1e-9)
    np.testing.assert_allclose(_np(pt.tensor(a).to(pt.complex128) @ V), _np(V * w.unsqueeze(-2)), atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(_np(V), axis=-2), 1, atol=1e-12)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_fills_what_torch_s_driver_fills(driver):
    b = RNG.standard_normal((2, 4, 2))
    ours, theirs = _both(lambda m, a, y: m.linalg.lstsq(a, y, driver=driver), W, b)
    _close(ours.solution, theirs.solution)
    for field in ("residuals", "rank", "singular_values"):
        _close(getattr(ours, field), getattr(theirs, field))
    wide = _both(lambda m, a, y: m.linalg.lstsq(a.mT, y[:, :3], driver=driver).solution, W, b)
    _close(*wide)  # the least-norm solution of an underdetermined system


def test_empty_inputs_as_torch():
    for shape in ((0, 3, 3), (2, 0, 0)):
        e = np.zeros(shape)
        for f in (lambda m, x: m.linalg.inv(x), lambda m, x: m.linalg.det(x), lambda m, x: m.linalg.cholesky(x),
                  lambda m, x: m.linalg.eigvalsh(x), lambda m, x: m.linalg.svdvals(x),
                  lambda m, x: m.linalg.qr(x).R, lambda m, x: m.linalg.solve(x, x)):
            _close(*_both(f, e))


def test_multi_dot_householder_tensorinv_as_torch():
    _close(*_both(lambda m, a, b: m.linalg.multi_dot([a[0, 0], a[0], a[1], b[0]]), A, B))
    h, tau = torch.geqrf(torch.tensor(W))
    _close(pt.linalg.householder_product(pt.tensor(h.numpy()), pt.tensor(tau.numpy())),
           torch.linalg.householder_product(h, tau))
    _close(*_both(lambda m, a: m.linalg.tensorinv(a[0].reshape(3, 3, 1), ind=1), A))


@pytest.mark.parametrize("shape", [(2, 40, 40), (40, 25), (25, 40)])
def test_blocked_lu_has_torch_s_pivots_and_factors(shape):
    # past 16 columns the NumPy backend factors recursively (getrf2's blocking): same pivots
    a = RNG.standard_normal(shape)
    ours, theirs = _both(lambda m, x: tuple(m.linalg.lu_factor(x)), a)
    _close(ours, theirs, atol=1e-11)
    _close(*_both(lambda m, x: m.linalg.solve(x[..., :25, :25], x[..., :25, :3]), a), atol=1e-10)


def test_a_zero_on_the_triangle_s_diagonal_gives_torch_s_inf_and_nan():
    u = np.triu(RNG.standard_normal((3, 3)))
    u[1, 1] = 0.0
    ours, theirs = _both(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True), u, np.ones((3, 2)))
    np.testing.assert_array_equal(np.isnan(_np(ours)), np.isnan(_np(theirs)))
    np.testing.assert_array_equal(np.isinf(_np(ours)), np.isinf(_np(theirs)))


@pytest.mark.parametrize("wide", [False, True])
def test_lstsq_gelsy_gives_torch_s_least_norm_solution_of_a_rank_deficient_matrix(wide):
    a = RNG.standard_normal((2, 5, 3))
    a[0, :, 2] = 2 * a[0, :, 0]  # rank 2; the second matrix has full rank
    b = RNG.standard_normal((2, 5, 2))
    if wide:
        a, b = a.transpose(0, 2, 1), b[:, :3]
    ours, theirs = _both(lambda m, x, y: m.linalg.lstsq(x, y), a, b)
    _close(ours.solution, theirs.solution)
    _close(ours.rank, theirs.rank)
