"""plugtorch.special against torch.special: values over wide ranges and edge cases, dtypes,
gradients (gradcheck in float64 and torch's), errors, and no Python call per element."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import plugtorch as pt
import plugtorch.special as ps
from plugtorch.autograd import gradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e-300, 700.0, -700.0]
WIDE = np.concatenate([RNG.uniform(-20, 20, 200), RNG.uniform(-2, 2, 100), np.logspace(-30, 30, 30),
                       -np.logspace(-30, 30, 30), EDGES])
POSITIVE = np.concatenate([RNG.uniform(0, 30, 200), np.logspace(-30, 30, 30), [0.0, np.inf, np.nan, 1e-300]])
UNIT = np.concatenate([RNG.uniform(-1, 1, 200), [0.0, 1.0, -1.0, 1.5, -1.5, np.nan, 1 - 1e-12, -1 + 1e-12, 1e-300]])
PROB = np.concatenate([RNG.uniform(0, 1, 200), [0.0, 1.0, -0.5, 1.5, np.nan, 1e-300, 1e-20, 1 - 1e-12, 0.5]])
# where torch's own value is the less accurate one (it is checked against SciPy in test_accuracy_beyond_torch)
MODERATE = WIDE[(np.abs(WIDE) < 30) | ~np.isfinite(WIDE)]

# name -> (inputs, float64 rtol, atol): torch's float64 results are matched to these
UNARY = {
    "gammaln": (WIDE, 1e-12, 0), "digamma": (WIDE, 1e-12, 0), "psi": (WIDE, 1e-12, 0),
    "erf": (WIDE, 1e-15, 0), "erfc": (WIDE, 1e-13, 0), "erfcx": (WIDE, 1e-13, 0), "erfinv": (UNIT, 1e-13, 0),
    "ndtri": (PROB, 1e-13, 0), "ndtr": (WIDE, 1e-13, 1e-15), "log_ndtr": (WIDE, 1e-12, 0),
    "i0": (MODERATE, 1e-12, 0), "i0e": (WIDE, 1e-13, 0), "i1": (MODERATE, 1e-12, 0), "i1e": (WIDE, 1e-13, 0),
    "bessel_j0": (MODERATE, 0, 1e-6), "bessel_j1": (MODERATE, 0, 1e-6), "entr": (WIDE, 1e-13, 0),
    "sinc": (WIDE, 1e-12, 1e-15), "expit": (MODERATE, 1e-15, 0), "logit": (PROB, 1e-13, 0),
    "expm1": (WIDE, 1e-15, 0), "log1p": (POSITIVE, 1e-15, 0), "exp2": (MODERATE, 1e-14, 0),
}


def _compare(ours, theirs, rtol, atol):
    a, b = ours.detach().numpy(), theirs.detach().numpy()
    assert a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float64_matches_torch(name):
    x, rtol, atol = UNARY[name]
    _compare(getattr(ps, name)(pt.tensor(x)), getattr(torch.special, name)(torch.tensor(x)), rtol, atol)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float32_is_the_float64_value_rounded(name):
    """float32 is computed in double and rounded (torch's float32 kernels are a few ulp off that)."""
    x, _, atol = UNARY[name]
    x32 = x[np.abs(x) < 1e30].astype(np.float32)
    ours = getattr(ps, name)(pt.tensor(x32))
    with np.errstate(over="ignore"):
        ref = getattr(torch.special, name)(torch.tensor(x32.astype(np.float64))).numpy().astype(np.float32)
    assert ours.dtype is pt.float32
    # the decompositions (logit, sinc, entr) compute in float32 itself: a few ulp, absolute near zeros
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-5, atol=max(atol, 1e-7), equal_nan=True)


def test_integer_input_gives_the_default_float():
    for name in ("gammaln", "digamma", "erfinv", "i0", "ndtr"):
        assert getattr(ps, name)(pt.tensor([0, 1, 2])).dtype is pt.float32


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma(n):
    x = np.concatenate([RNG.uniform(-10, 10, 100), RNG.uniform(0.01, 1e3, 100), [0.5, 1.0, np.nan, -2.5]])
    _compare(pt.polygamma(n, pt.tensor(x)), torch.polygamma(n, torch.tensor(x)), 1e-9, 0)
    _compare(pt.tensor(x).polygamma(n), torch.tensor(x).polygamma(n), 1e-9, 0)


def test_two_argument_functions():
    s = np.concatenate([RNG.uniform(1, 20, 100), np.round(RNG.uniform(1, 20, 100)), [1.0, 0.5, np.nan, 2.0]])
    q = np.concatenate([RNG.uniform(0.01, 50, 100), RNG.uniform(-30, 0, 100), [1.0, 1.0, 1.0, -3.0]])
    _compare(ps.zeta(pt.tensor(s), pt.tensor(q)), torch.special.zeta(torch.tensor(s), torch.tensor(q)), 1e-10, 0)
    a = np.concatenate([RNG.uniform(0, 60, 200), [0.0, 0.0, 1.0, np.inf, np.inf, -1.0, np.nan, 2.0]])
    x = np.concatenate([RNG.uniform(0, 100, 200), [0.0, 1.0, 0.0, 1.0, np.inf, 1.0, 1.0, np.inf]])
    for name in ("gammainc", "gammaincc"):  # torch's own values are good to about 1e-9 here
        _compare(getattr(ps, name)(pt.tensor(a), pt.tensor(x)), getattr(torch.special, name)(torch.tensor(a),
                                                                                              torch.tensor(x)),
                 1e-8, 1e-300)
    y = np.array([0.0, 0.0, 2.0, np.nan, -1.0, 0.5])
    xs = np.array([0.0, 1.0, 0.0, 0.0, 2.0, 3.0])
    for name in ("xlogy", "xlog1py"):
        _compare(getattr(ps, name)(pt.tensor(xs), pt.tensor(y)), getattr(torch.special, name)(torch.tensor(xs),
                                                                                               torch.tensor(y)),
                 1e-15, 0)
    _compare(pt.xlogy(pt.tensor(xs), 2.0), torch.xlogy(torch.tensor(xs), 2.0), 1e-15, 0)


def test_accuracy_beyond_torch():
    """Where torch's own values are off (j0 near its zeros, the incomplete gamma functions at
    large a, ndtr in the far tail) plugtorch's are SciPy's, to double precision."""
    sp = pytest.importorskip("scipy.special")
    x = np.linspace(0.5, 40, 500)
    np.testing.assert_allclose(ps.bessel_j0(pt.tensor(x)).numpy(), sp.j0(x), rtol=0, atol=1e-15)
    a, z = RNG.uniform(0, 100, 500), RNG.uniform(0, 150, 500)
    np.testing.assert_allclose(ps.gammainc(pt.tensor(a), pt.tensor(z)).numpy(), sp.gammainc(a, z), rtol=1e-12)
    t = -np.logspace(0, 2.5, 50)
    np.testing.assert_allclose(ps.ndtr(pt.tensor(t)).numpy(), sp.ndtr(t), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(ps.log_ndtr(pt.tensor(t)).numpy(), sp.log_ndtr(t), rtol=1e-13)


def test_composites():
    x = np.array([[2.0, 3.5], [1.2, 7.0]])
    _compare(ps.multigammaln(pt.tensor(x), 3), torch.special.multigammaln(torch.tensor(x), 3), 1e-13, 0)
    _compare(pt.mvlgamma(pt.tensor(x), 2), torch.mvlgamma(torch.tensor(x), 2), 1e-13, 0)
    _compare(ps.logit(pt.tensor(PROB), eps=1e-6), torch.special.logit(torch.tensor(PROB), eps=1e-6), 1e-13, 0)
    _compare(ps.round(pt.tensor([1.2345, -2.5]), decimals=2), torch.special.round(torch.tensor([1.2345, -2.5]),
                                                                                  decimals=2), 1e-15, 0)
    y = RNG.standard_normal((3, 4))
    for name in ("softmax", "log_softmax"):
        _compare(getattr(ps, name)(pt.tensor(y), 1), getattr(torch.special, name)(torch.tensor(y), 1), 1e-14, 0)
    _compare(ps.logsumexp(pt.tensor(y), 1), torch.special.logsumexp(torch.tensor(y), 1), 1e-14, 0)


def _inputs(name):
    if name in ("erfinv",):
        return RNG.uniform(-0.9, 0.9, 6)
    if name in ("ndtri", "logit"):
        return RNG.uniform(0.05, 0.95, 6)
    if name in ("gammaln", "digamma", "entr", "multigammaln"):
        return RNG.uniform(1.5, 5, 6)
    return RNG.uniform(-3, 3, 6)


DIFFERENTIABLE = ["gammaln", "digamma", "erfc", "erfcx", "erfinv", "ndtri", "ndtr", "log_ndtr", "i0", "i0e", "i1",
                  "i1e", "entr", "sinc", "logit"]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients(name):
    x = _inputs(name)
    x[0] = 0.0 if name in ("i1", "i1e", "sinc") else x[0]  # the removable points of the formulas
    assert gradcheck(getattr(ps, name), (pt.tensor(x, requires_grad=True),))
    ours, theirs = pt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    getattr(ps, name)(ours).sum().backward()
    getattr(torch.special, name)(theirs).sum().backward()
    _compare(ours.grad, theirs.grad, 1e-9, 1e-12)  # torch's trigamma (digamma's gradient) is good to 1e-9


def test_gradients_of_the_others():
    x = pt.tensor(RNG.uniform(0.5, 3, 5), requires_grad=True)
    q = pt.tensor(RNG.uniform(0.5, 3, 5), requires_grad=True)
    assert gradcheck(lambda x: pt.polygamma(2, x), (x,))
    assert gradcheck(lambda q: ps.zeta(pt.tensor([2.5, 3.0, 4.0, 2.0, 5.0], dtype=pt.float64), q), (q,))
    assert gradcheck(lambda z: ps.gammainc(pt.tensor([1.5, 2.0, 0.5, 3.0, 4.0], dtype=pt.float64), z), (q,))
    assert gradcheck(lambda z: ps.gammaincc(pt.tensor([1.5, 2.0, 0.5, 3.0, 4.0], dtype=pt.float64), z), (q,))
    assert gradcheck(lambda a, b: ps.xlogy(a, b), (x, q))
    assert gradcheck(lambda a, b: ps.xlog1py(a, b), (x, q))
    assert gradcheck(lambda a: ps.multigammaln(a + 2, 3), (x,))
    zero = pt.tensor([0.0, 1.0], dtype=pt.float64, requires_grad=True)
    ps.xlogy(zero, pt.tensor([0.0, 2.0], dtype=pt.float64)).sum().backward()
    t0 = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    torch.special.xlogy(t0, torch.tensor([0.0, 2.0], dtype=torch.float64)).sum().backward()
    _compare(zero.grad, t0.grad, 1e-15, 0)  # 0 where x is 0, not 0 * -inf


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda m: m.special.zeta(m.tensor([2.0], requires_grad=True), m.tensor([1.0])).sum().backward(),
     NotImplementedError, "not implemented"),
    (lambda m: m.special.gammainc(m.tensor([2.0], requires_grad=True), m.tensor([1.0])).sum().backward(),
     NotImplementedError, "not implemented"),
    (lambda m: m.polygamma(-1, m.tensor([1.0])), RuntimeError, "negative"),
    (lambda m: m.special.digamma(m.tensor([1j])), NotImplementedError, "complex"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(pt)
    with pytest.raises(Exception):  # noqa: B017  (torch refuses too, in its own words)
        call(torch)


def test_the_primitive_makes_no_python_call_per_element():
    x = pt.tensor(np.linspace(0.1, 0.9, 100_000))
    calls = []

    def count(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)
    for name in ("gammaln", "digamma", "erfinv", "ndtri", "i0e", "erfcx"):
        calls.clear()
        sys.setprofile(count)
        try:
            getattr(ps, name)(x)
        finally:
            sys.setprofile(None)
        assert len(calls) < 60, f"{name} made {len(calls)} Python calls on 100,000 elements"
