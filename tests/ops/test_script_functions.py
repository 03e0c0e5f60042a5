"""torch functions real scripts call (gcd, lcm, nextafter, frexp, mode, nanmedian,
unique_consecutive, histogram, histogramdd, gradient, renorm, poisson, as_strided,
empty_strided), each against torch: values, dtypes, shapes, gradients and errors."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.autograd import gradcheck

NAN = float("nan")


def _same(ours, theirs, atol=1e-6):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t, atol)
        return
    assert list(ours.shape) == list(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    a = np.asarray(ours.float().tolist() if ours.dtype.name == "bfloat16" else ours.tolist(), float)
    b = np.asarray(theirs.float().tolist() if str(theirs.dtype) == "torch.bfloat16" else theirs.tolist(), float)
    assert np.allclose(a, b, atol=atol, rtol=0, equal_nan=True), (a, b)


def _pair(torch, values, dtype):
    return (plugtorch.tensor(values, dtype=getattr(plugtorch, dtype)),
            torch.tensor(values, dtype=getattr(torch, dtype)))


def _raises_like(torch, fn_pt, fn_th):
    with pytest.raises(Exception) as theirs:
        fn_th(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn_pt(plugtorch)
    first = str(theirs.value).split(":")[0].strip('"')
    assert first in str(ours.value), (str(ours.value), str(theirs.value))


# -- gcd, lcm -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
def test_gcd_and_lcm_match_torch(torch, dtype):
    rng = np.random.default_rng(0)
    lo = 0 if dtype == "uint8" else -40
    a, b = rng.integers(lo, 40, (3, 5)).tolist(), rng.integers(lo, 40, (5,)).tolist()
    a[0][:3], b[:3] = [0, 0, 7], [0, 5, 0]
    (pa, ta), (pb, tb) = _pair(torch, a, dtype), _pair(torch, b, dtype)
    _same(plugtorch.gcd(pa, pb), torch.gcd(ta, tb))
    _same(pa.lcm(pb), ta.lcm(tb))
    pa.gcd_(pb)
    ta.gcd_(tb)
    _same(pa, ta)


def test_gcd_promotes_integers_and_refuses_floats_bools_and_numbers(torch):
    _same(plugtorch.gcd(plugtorch.tensor([12], dtype=plugtorch.int32), plugtorch.tensor([18])),
          torch.gcd(torch.tensor([12], dtype=torch.int32), torch.tensor([18])))
    for name in ("gcd", "lcm"):
        for a, b in (([1.0], [2.0]), ([True], [True]), ([4], 6)):
            def call(m, name=name, a=a, b=b):
                return getattr(m, name)(m.tensor(a), m.tensor(b) if isinstance(b, list) else b)
            _raises_like(torch, call, call)


def test_lcm_in_place(torch):
    pa, ta = _pair(torch, [4, -6, 0, 9], "int64")
    pb, tb = _pair(torch, [6, 4, 5, 0], "int64")
    pa.lcm_(pb)
    ta.lcm_(tb)
    _same(pa, ta)


# -- nextafter, frexp ---------------------------------------------------------------------------

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 3.5, 1e-30, -2.5e-41, float("inf"), -float("inf"), NAN, 65504.0, 6e-8]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_nextafter_matches_torch_bit_for_bit(torch, dtype):
    x = [v for v in _SPECIAL for _ in _SPECIAL]
    y = [w for _ in _SPECIAL for w in _SPECIAL]
    (px, tx), (py, ty) = _pair(torch, x, dtype), _pair(torch, y, dtype)
    ours, theirs = plugtorch.nextafter(px, py), torch.nextafter(tx, ty)
    assert ours.dtype.name == dtype
    width = {"float64": "int64", "float32": "int32"}.get(dtype, "int16")
    assert ours.view(getattr(plugtorch, width)).tolist() == theirs.view(getattr(torch, width)).tolist()


def test_nextafter_promotes_refuses_integers_and_has_torchs_derivative(torch):
    _same(plugtorch.nextafter(plugtorch.tensor([1.0]), plugtorch.tensor([2.0], dtype=plugtorch.float64)),
          torch.nextafter(torch.tensor([1.0]), torch.tensor([2.0], dtype=torch.float64)), atol=0)
    _raises_like(torch, lambda m: m.nextafter(m.tensor([1]), m.tensor([2])),
                 lambda m: m.nextafter(m.tensor([1]), m.tensor([2])))
    _raises_like(torch, lambda m: m.nextafter(m.tensor([1.0]), 2.0), lambda m: m.nextafter(m.tensor([1.0]), 2.0))
    # input's gradient passes through except where the operands are equal, other's is 0
    grads = []
    for m in (plugtorch, torch):
        x, y = m.tensor([1.0, 2.0, 3.0], requires_grad=True), m.tensor([2.0, 2.0, 0.0], requires_grad=True)
        grads.append([g.tolist() for g in m.autograd.grad(m.nextafter(x, y).sum(), (x, y))])
    assert grads[0] == grads[1] == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    px, tx = _pair(torch, [1.0, 2.0], "float32")
    px.nextafter_(plugtorch.tensor([0.0, 3.0]))
    tx.nextafter_(torch.tensor([0.0, 3.0]))
    _same(px, tx, atol=0)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_frexp_matches_torch(torch, dtype):
    values = _SPECIAL + [5e-324, 1e-310, 2.0 ** -1022, 1e-40, 2.0 ** -126, 6e-5, 0.75, -1e300, 1e38]
    px, tx = _pair(torch, values, dtype)
    ours, theirs = plugtorch.frexp(px), torch.frexp(tx)
    assert type(ours).__name__ == "frexp" and ours._fields == ("mantissa", "exponent")
    _same(ours.mantissa, theirs.mantissa, atol=0)
    _same(ours.exponent, theirs.exponent, atol=0)


def test_frexp_gradient_and_errors(torch):
    x = plugtorch.tensor([0.3, -5.0, 1e-3, 40.0], dtype=plugtorch.float64, requires_grad=True)
    assert gradcheck(lambda t: plugtorch.frexp(t).mantissa, (x,))
    tx = torch.tensor([0.3, -5.0, 1e-3, 40.0], dtype=torch.float64, requires_grad=True)
    plugtorch.frexp(x).mantissa.sum().backward()
    torch.frexp(tx).mantissa.sum().backward()
    _same(x.grad, tx.grad)
    _raises_like(torch, lambda m: m.frexp(m.tensor([1])), lambda m: m.frexp(m.tensor([1])))


# -- mode, nanmedian, unique_consecutive --------------------------------------------------------

@pytest.mark.parametrize("dim,keepdim", [(-1, False), (0, True), (1, False)])
def test_mode_matches_torch_values_and_indices(torch, dim, keepdim):
    values = np.random.default_rng(2).integers(0, 4, (5, 7, 3)).tolist()
    for dtype in ("int64", "float32"):
        px, tx = _pair(torch, values, dtype)
        ours, theirs = plugtorch.mode(px, dim, keepdim), torch.mode(tx, dim, keepdim)
        assert type(ours).__name__ == "mode"
        _same(ours, theirs)


def test_mode_gradient_edges_and_errors(torch):
    x = plugtorch.tensor([[1.0, 2.0, 2.0, 3.0], [3.0, 3.0, 1.0, 1.0]], dtype=plugtorch.float64, requires_grad=True)
    tx = torch.tensor(x.tolist(), dtype=torch.float64, requires_grad=True)
    plugtorch.mode(x).values.sum().backward()
    torch.mode(tx).values.sum().backward()
    _same(x.grad, tx.grad)
    _same(plugtorch.tensor(3.0).mode(), torch.tensor(3.0).mode())
    _same(plugtorch.tensor([1.0, NAN, NAN]).mode(), torch.tensor([1.0, NAN, NAN]).mode())
    _raises_like(torch, lambda m: m.mode(m.zeros(2, 0), 1), lambda m: m.mode(m.zeros(2, 0), 1))


def test_nanmedian_matches_torch(torch):
    rng = np.random.default_rng(3)
    values = rng.standard_normal((4, 6))
    values[rng.random((4, 6)) < 0.3] = np.nan
    px, tx = _pair(torch, values.tolist(), "float64")
    _same(plugtorch.nanmedian(px), torch.nanmedian(tx))
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        ours, theirs = px.nanmedian(dim, keepdim), tx.nanmedian(dim, keepdim)
        assert type(ours).__name__ == "nanmedian"
        _same(ours, theirs)
    pi, ti = _pair(torch, [[3, 1, 2, 5], [4, 4, 0, 1]], "int64")
    _same(plugtorch.nanmedian(pi, 1), torch.nanmedian(ti, 1))
    _same(plugtorch.nanmedian(plugtorch.zeros(0)), torch.nanmedian(torch.zeros(0)))
    _same(plugtorch.nanmedian(plugtorch.tensor([NAN, NAN])), torch.nanmedian(torch.tensor([NAN, NAN])))


def test_nanmedian_gradient_goes_to_the_entry_picked(torch):
    values = [[1.0, NAN, 3.0, 2.0], [4.0, 0.5, NAN, NAN]]
    px = plugtorch.tensor(values, dtype=plugtorch.float64, requires_grad=True)
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    plugtorch.nanmedian(px, 1).values.sum().backward()
    torch.nanmedian(tx, 1).values.sum().backward()
    _same(px.grad, tx.grad)
    x = plugtorch.tensor([[0.3, -1.2, 2.0], [0.7, 0.1, -0.4]], dtype=plugtorch.float64, requires_grad=True)
    assert gradcheck(lambda t: plugtorch.nanmedian(t, 1).values, (x,))
    assert gradcheck(lambda t: plugtorch.nanmedian(t), (x,))


@pytest.mark.parametrize("kwargs", [{}, {"return_inverse": True}, {"return_counts": True},
                                    {"return_inverse": True, "return_counts": True}])
def test_unique_consecutive_matches_torch(torch, kwargs):
    flat = [1, 1, 2, 2, 3, 1, 1, 2, 2, 2]
    px, tx = _pair(torch, flat, "int64")
    _same(plugtorch.unique_consecutive(px, **kwargs), torch.unique_consecutive(tx, **kwargs))
    px, tx = _pair(torch, [[1, 1], [1, 1], [2, 3], [2, 3], [1, 1]], "float32")
    for dim in (0, 1, -1, None):
        _same(px.unique_consecutive(dim=dim, **kwargs), tx.unique_consecutive(dim=dim, **kwargs))
    for values in (5.0, [], [1.0, NAN, NAN]):
        px, tx = _pair(torch, values, "float32")
        _same(plugtorch.unique_consecutive(px, **kwargs), torch.unique_consecutive(tx, **kwargs))


def test_unique_consecutive_is_in_the_graph_but_not_differentiable(torch):
    x = plugtorch.tensor([1.0, 1.0, 2.0], requires_grad=True)
    out = plugtorch.unique_consecutive(x)
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="not implemented"):
        out.sum().backward()
    _raises_like(torch, lambda m: m.unique_consecutive(m.ones(2, 2), dim=2),
                 lambda m: m.unique_consecutive(m.ones(2, 2), dim=2))


# -- renorm, gradient ---------------------------------------------------------------------------

@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 2.5), (3.5, -1, 0.5), (2, 2, 100.0)])
def test_renorm_matches_torch_with_its_gradient(torch, p, dim, maxnorm):
    values = np.random.default_rng(4).standard_normal((3, 4, 2)).tolist()
    px, tx = _pair(torch, values, "float64")
    px.requires_grad_()
    tx.requires_grad_()
    ours, theirs = plugtorch.renorm(px, p, dim, maxnorm), torch.renorm(tx, p, dim, maxnorm)
    _same(ours, theirs)
    w = np.random.default_rng(5).standard_normal((3, 4, 2)).tolist()
    (ours * plugtorch.tensor(w, dtype=plugtorch.float64)).sum().backward()
    (theirs * torch.tensor(w, dtype=torch.float64)).sum().backward()
    _same(px.grad, tx.grad)
    assert gradcheck(lambda t: t.renorm(p, dim, maxnorm), (px.detach().requires_grad_(),))
    px, tx = px.detach().clone(), tx.detach().clone()
    px.renorm_(p, dim, maxnorm)
    tx.renorm_(p, dim, maxnorm)
    _same(px, tx)


@pytest.mark.parametrize("call", [
    lambda m: m.renorm(m.ones(3, 3), -1, 0, 1.0), lambda m: m.renorm(m.ones(3, 3), 2, 0, -1.0),
    lambda m: m.renorm(m.ones(3, 3, dtype=m.long), 2, 0, 1.0), lambda m: m.renorm(m.ones(3), 2, 0, 1.0),
    lambda m: m.renorm(m.ones(3, 3), 2, 2, 1.0)])
def test_renorm_refuses_as_torch(torch, call):
    _raises_like(torch, call, call)


@pytest.mark.parametrize("kwargs", [
    {}, {"spacing": 2.0}, {"dim": 1}, {"dim": (0, 1), "spacing": [0.5, 3.0]}, {"edge_order": 2},
    {"dim": -1, "edge_order": 2, "spacing": 0.25}, {"spacing": "coords"}, {"spacing": "coords", "edge_order": 2}])
def test_gradient_matches_torch_with_its_gradient(torch, kwargs):
    values = np.random.default_rng(6).standard_normal((4, 5)).tolist()
    px, tx = _pair(torch, values, "float64")
    kp, kt = dict(kwargs), dict(kwargs)
    if kwargs.get("spacing") == "coords":
        coords = [[0.0, 0.5, 2.0, 2.25], [-1.0, 0.0, 0.3, 1.3, 4.0]]
        kp["spacing"] = [plugtorch.tensor(c, dtype=plugtorch.float64) for c in coords]
        kt["spacing"] = [torch.tensor(c, dtype=torch.float64) for c in coords]
    ours, theirs = plugtorch.gradient(px, **kp), torch.gradient(tx, **kt)
    assert isinstance(ours, tuple)
    _same(ours, theirs)
    assert gradcheck(lambda t: plugtorch.gradient(t, **kp), (px.requires_grad_(),))


def test_gradient_of_integers_and_its_errors(torch):
    _same(plugtorch.gradient(plugtorch.tensor([1, 2, 4])), torch.gradient(torch.tensor([1, 2, 4])))
    for call in (lambda m: m.gradient(m.tensor([1.0])), lambda m: m.gradient(m.tensor([1.0, 2.0]), edge_order=2),
                 lambda m: m.gradient(m.tensor([1.0, 2.0, 4.0]), edge_order=3),
                 lambda m: m.gradient(m.ones(3, 3), spacing=[1.0, 2.0, 3.0]),
                 lambda m: m.gradient(m.ones(3, 3), spacing=[1.0], dim=(0, 1))):
        _raises_like(torch, call, call)


# -- histogram, histogramdd ---------------------------------------------------------------------

def _points(n, d, seed=7):
    values = np.random.default_rng(seed).standard_normal((n, d))
    values[:4] = [[0.0] * d, [1.0] * d, [-1.0] * d, [0.5] * d]  # on edges of the ranges below
    return values


@pytest.mark.parametrize("kwargs", [{"bins": 4, "range": (-1.0, 1.0)}, {"bins": 7}, {"bins": 5, "density": True},
                                    {"bins": "edges"}, {"bins": "edges", "density": True, "weight": True},
                                    {"bins": 3, "range": (2.0, 2.0), "weight": True}])
def test_histogram_matches_torch(torch, kwargs):
    values = _points(200, 1)[:, 0]
    for dtype in ("float32", "float64"):
        px, tx = _pair(torch, values.tolist(), dtype)
        kp, kt = dict(kwargs), dict(kwargs)
        if kwargs["bins"] == "edges":
            kp["bins"], kt["bins"] = _pair(torch, [-2.0, -1.0, -0.25, 0.0, 0.5, 1.0, 3.0], dtype)
        if kwargs.get("weight"):
            kp["weight"], kt["weight"] = _pair(torch, np.random.default_rng(8).random(200).tolist(), dtype)
        ours, theirs = plugtorch.histogram(px, **kp), torch.histogram(tx, **kt)
        assert type(ours).__name__ == "histogram" and ours._fields == ("hist", "bin_edges")
        _same(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{"bins": 3}, {"bins": [2, 5, 3], "range": [-1.0, 1.0, 0.0, 2.0, -3.0, 3.0]},
                                    {"bins": 4, "density": True, "weight": True}, {"bins": "edges"}])
def test_histogramdd_matches_torch(torch, kwargs):
    values = _points(120, 3).reshape(2, 60, 3)
    px, tx = _pair(torch, values.tolist(), "float64")
    kp, kt = dict(kwargs), dict(kwargs)
    if kwargs["bins"] == "edges":
        edges = [[-3.0, 0.0, 1.0], [-1.0, -0.5, 0.5, 1.0], [-2.0, 2.0]]
        kp["bins"] = [plugtorch.tensor(e, dtype=plugtorch.float64) for e in edges]
        kt["bins"] = [torch.tensor(e, dtype=torch.float64) for e in edges]
    if kwargs.get("weight"):
        kp["weight"], kt["weight"] = _pair(torch, np.random.default_rng(9).random((2, 60)).tolist(), "float64")
    ours, theirs = plugtorch.histogramdd(px, **kp), torch.histogramdd(tx, **kt)
    assert type(ours).__name__ == "histogramdd" and isinstance(ours.bin_edges, tuple)
    _same(ours.hist, theirs.hist)
    _same(ours.bin_edges, theirs.bin_edges)


@pytest.mark.parametrize("call", [
    lambda m: m.histogram(m.tensor([1, 2, 1]), bins=4), lambda m: m.histogram(m.tensor([1.0, 2.0]), bins=0),
    lambda m: m.histogram(m.tensor([1.0, 2.0]), bins=4, range=(3.0, 0.0)),
    lambda m: m.histogram(m.tensor([1.0, NAN]), bins=2),
    lambda m: m.histogram(m.tensor([1.0, 2.0]), bins=2, weight=m.tensor([1.0, 2.0, 3.0])),
    lambda m: m.histogram(m.tensor([1.0, 2.0]), bins=2, weight=m.tensor([1, 2])),
    lambda m: m.histogram(m.tensor([1.0, 2.0]), bins=m.tensor([[0.0, 1.0]])),
    lambda m: m.histogram(m.tensor([1.0, 2.0]), bins=m.tensor([0.0, 1.0], dtype=m.float64)),
    lambda m: m.histogramdd(m.tensor([[1.0, 2.0]]), bins=[3]), lambda m: m.histogramdd(m.tensor([1.0, 2.0]), bins=[3]),
    lambda m: m.histogramdd(m.tensor([[1.0, 2.0]]), bins=2, range=[0.0, 5.0])])
def test_histograms_refuse_as_torch(torch, call):
    _raises_like(torch, call, call)


def test_histogram_edge_cases_and_graph(torch):
    for values in ([], [1.0, 1.0], [2.0]):
        _same(plugtorch.histogram(plugtorch.tensor(values), bins=3), torch.histogram(torch.tensor(values), bins=3))
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    hist = x.histogram(2).hist
    assert hist.requires_grad
    with pytest.raises(RuntimeError, match="not implemented"):
        hist.sum().backward()


# -- poisson ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [0.0, 0.3, 2.0, 9.9, 10.0, 37.0, 1e4])
def test_poisson_mean_and_variance_are_the_rate(rate):
    n = 20000
    plugtorch.manual_seed(11)
    draws = plugtorch.poisson(plugtorch.full((n,), rate, dtype=plugtorch.float64))
    assert draws.dtype is plugtorch.float64
    values = np.asarray(draws.tolist())
    assert (values == np.floor(values)).all() and (values >= 0).all()
    # five standard errors of the sample mean and the sample variance
    assert abs(values.mean() - rate) <= 5 * np.sqrt(rate / n) + 1e-12
    assert abs(values.var(ddof=1) - rate) <= 5 * np.sqrt((rate + 2 * rate ** 2) / n) + 1e-12


@pytest.mark.parametrize("rate", [3.0, 15.0])
def test_poisson_frequencies_follow_the_distribution(rate):
    n = 20000
    draws = np.asarray(plugtorch.poisson(plugtorch.full((n,), rate), plugtorch.Generator().manual_seed(2)).tolist())
    for k in range(int(rate) - 3, int(rate) + 4):
        pmf = np.exp(-rate + k * np.log(rate) - sum(np.log(np.arange(1, k + 1))))
        assert abs((draws == k).mean() - pmf) <= 5 * np.sqrt(pmf * (1 - pmf) / n)


def test_poisson_is_reproducible_and_keeps_dtype_shape_and_graph(torch):
    rates = plugtorch.tensor([[0.5, 4.0, 12.0], [100.0, 0.0, 9.0]])
    plugtorch.manual_seed(5)
    first = plugtorch.poisson(rates)
    plugtorch.manual_seed(5)
    assert plugtorch.poisson(rates).tolist() == first.tolist()
    gen = plugtorch.Generator().manual_seed(9)
    again = plugtorch.Generator().manual_seed(9)
    assert plugtorch.poisson(rates, gen).tolist() == plugtorch.poisson(rates, generator=again).tolist()
    assert first.shape == rates.shape and first.dtype is plugtorch.float32
    for dtype in ("float16", "bfloat16", "float64"):
        px, tx = _pair(torch, [3.0, 20.0], dtype)
        assert str(plugtorch.poisson(px).dtype).split(".")[-1] == str(torch.poisson(tx).dtype).split(".")[-1]
    assert plugtorch.poisson(plugtorch.zeros(0, 3)).shape == (0, 3)
    assert plugtorch.poisson(plugtorch.tensor(4.0)).shape == ()
    x = plugtorch.tensor([2.0, 30.0], requires_grad=True)
    tx = torch.tensor([2.0, 30.0], requires_grad=True)
    y, ty = plugtorch.poisson(x), torch.poisson(tx)
    assert y.requires_grad and ty.requires_grad
    y.sum().backward()
    ty.sum().backward()
    _same(x.grad, tx.grad)


@pytest.mark.parametrize("call", [lambda m: m.poisson(m.tensor([-1.0])), lambda m: m.poisson(m.tensor([NAN])),
                                  lambda m: m.poisson(m.tensor([1]))])
def test_poisson_refuses_as_torch(torch, call):
    _raises_like(torch, call, call)


# -- as_strided, empty_strided ------------------------------------------------------------------

_GEOMETRIES = [((2, 2), (3, 1), 1), ((3, 3), (2, 1), 0), ((4, 2), (1, 1), None), ((2, 3), (0, 2), 2),
               ((3,), (4,), 0), ((), (), 5), ((0, 4), (1, 1), 10), ((2, 1, 2), (4, 7, 1), 3)]


@pytest.mark.parametrize("size,stride,offset", _GEOMETRIES)
def test_as_strided_matches_torch_values_strides_and_gradient(torch, size, stride, offset):
    values = np.random.default_rng(10).standard_normal(9).tolist()
    px, tx = _pair(torch, values, "float64")
    ours, theirs = px.as_strided(size, stride, offset), torch.as_strided(tx, size, stride, offset)
    _same(ours, theirs)
    assert ours.stride() == theirs.stride()
    px.requires_grad_()
    tx.requires_grad_()
    w = np.random.default_rng(11).standard_normal(size)
    (plugtorch.as_strided(px, size, stride, offset) * plugtorch.tensor(w)).sum().backward()
    (torch.as_strided(tx, size, stride, offset) * torch.tensor(w)).sum().backward()
    _same(px.grad, tx.grad)
    assert gradcheck(lambda t: t.as_strided(size, stride, offset), (px.detach().requires_grad_(),))


def test_as_strided_is_a_view_that_writes_through_with_torchs_gradient(torch):
    values = np.random.default_rng(12).standard_normal(9).tolist()
    grads = []
    for m in (plugtorch, torch):
        x = m.tensor(values, dtype=m.float64, requires_grad=True)
        y = x * 1
        view = y.as_strided((2, 2), (3, 1), 1)
        view.mul_(m.tensor([[2.0, 3.0], [4.0, 5.0]], dtype=m.float64))
        (y * m.arange(9, dtype=m.float64)).sum().backward()
        grads.append((y.detach(), x.grad))
    _same(grads[0][0], grads[1][0])
    _same(grads[0][1], grads[1][1])
    px, tx = _pair(torch, list(range(9)), "float32")
    px.as_strided_((2, 2), (3, 1), 1)
    tx.as_strided_((2, 2), (3, 1), 1)
    _same(px, tx)
    assert px.stride() == tx.stride()


def test_as_strided_without_views_gathers_the_same_values(torch, monkeypatch):
    values = np.random.default_rng(13).standard_normal(9).tolist()
    px, tx = _pair(torch, values, "float64")
    monkeypatch.delitem(px._backend.primitives, "as_strided")
    for size, stride, offset in _GEOMETRIES:
        _same(px.as_strided(size, stride, offset), tx.as_strided(size, stride, offset))


@pytest.mark.parametrize("call", [
    lambda m: m.as_strided(m.arange(9.0), (3, 3), (3, 1), 1), lambda m: m.as_strided(m.arange(9.0), (2, 2), (-1, 1)),
    lambda m: m.as_strided(m.arange(9.0), (2, 2, 1), (1, 1)), lambda m: m.as_strided(m.arange(9.0), (2, 2), (1, 1), -1),
    lambda m: m.empty_strided((2, 3), (1,))])
def test_as_strided_refuses_as_torch(torch, call):
    _raises_like(torch, call, call)


def test_as_strided_refuses_a_non_contiguous_input_saying_what_to_do():
    with pytest.raises(RuntimeError, match=r"not contiguous.*\.contiguous\(\)"):
        plugtorch.arange(9.0).reshape(3, 3).t().as_strided((2, 2), (3, 1))


@pytest.mark.parametrize("size,stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((4,), (2,)), ((2, 0), (1, 1)), ((), ())])
def test_empty_strided_has_torchs_shape_strides_and_dtype(torch, size, stride):
    ours = plugtorch.empty_strided(size, stride, dtype=plugtorch.float64, requires_grad=True)
    theirs = torch.empty_strided(size, stride, dtype=torch.float64, requires_grad=True)
    assert list(ours.shape) == list(theirs.shape) and ours.stride() == theirs.stride()
    assert ours.dtype is plugtorch.float64 and ours.requires_grad and ours.is_leaf
    assert ours.is_contiguous() == theirs.is_contiguous()


# -- the CuPy backend's code path ---------------------------------------------------------------

_ON_EMULATED_CUPY = r'''
import numpy as np
import plugtorch as pt

def flat(v):
    return [w for u in v for w in flat(u)] if isinstance(v, tuple) else [v]

def both(fn, *arrays):
    host = flat(fn(*[pt.tensor(a) for a in arrays]))
    device = flat(fn(*[pt.tensor(a, device="cupy_emulated") for a in arrays]))
    for x, y in zip(host, device, strict=True):
        assert y.device.type == "cupy_emulated" and x.dtype == y.dtype and x.shape == y.shape, (fn, x, y)
        assert np.allclose(np.asarray(x.tolist(), float), np.asarray(y.tolist(), float), equal_nan=True), (x, y)
    return device

rng = np.random.default_rng(0)
f = rng.standard_normal((4, 5))
f[0, 0] = np.nan
ints = rng.integers(0, 3, (4, 5))
both(pt.gcd, rng.integers(-30, 30, (4, 5)), rng.integers(-30, 30, 5))
both(pt.lcm, rng.integers(-30, 30, (4, 5)), rng.integers(-30, 30, 5))
both(pt.nextafter, f, np.ones(5))
both(pt.frexp, f)
both(lambda x: pt.mode(x, 1), ints)
both(lambda x: pt.nanmedian(x, 1), f)
both(lambda x: pt.unique_consecutive(x, return_inverse=True, return_counts=True), ints.reshape(-1))
both(lambda x: pt.histogramdd(x, bins=[2, 3]), rng.standard_normal((50, 2)))
both(lambda x: pt.renorm(x, 2, 0, 1.0), rng.standard_normal((3, 4)))
both(lambda x: pt.gradient(x, edge_order=2), rng.standard_normal((3, 4)))
assert both(lambda x: pt.as_strided(x, (3, 3), (2, 1), 1), np.arange(9.0))[0].stride() == (2, 1)
x = pt.arange(9.0, device="cupy_emulated")
x.as_strided((2, 2), (3, 1), 1).mul_(10)
assert x.tolist() == [0.0, 10.0, 20.0, 3.0, 40.0, 50.0, 6.0, 7.0, 8.0]
pt.manual_seed(0)
draws = np.asarray(pt.poisson(pt.full((4000,), 30.0, device="cupy_emulated")).tolist())
assert abs(draws.mean() - 30) < 5 * (30 / 4000) ** 0.5, draws.mean()
print("ok")
'''


def test_the_cupy_backend_code_path_gives_the_numpy_backends_results():
    """The emulated CuPy backend (CuPy's code path checked against CuPy's API, computed by NumPy)
    runs every function here, the gcd and as_strided primitives included."""
    import os
    import subprocess
    import sys

    from plugtorch_backends.cupy_backend.probe import installed as cupy_installed

    from plugtorch.testing.cuda_cpu import compiler_missing
    if not cupy_installed():
        pytest.skip("CuPy is not installed, and the emulated backend checks its calls against CuPy's API "
                    "(pip install 'plugtorch[cupy13]')")
    if compiler_missing():
        pytest.skip(f"the emulated backend's kernels cannot run on the CPU: {compiler_missing()}")
    env = dict(os.environ, PLUGTORCH_PLUGINS="plugtorch_backends.cupy_backend.emulation", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _ON_EMULATED_CUPY], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# -- complex tensors ----------------------------------------------------------------------------

_Z = [[1 + 1j, 2 - 1j, 0.5j], [3, -1j, 2 + 2j]]


@pytest.mark.parametrize("name", ["mode", "unique_consecutive", "histogram", "gcd", "nextafter", "frexp", "poisson"])
def test_complex_tensors_are_refused_where_torch_refuses_them(torch, name):
    def call(m):
        z = m.tensor(_Z)
        return getattr(m, name)(*((z, z) if name in ("gcd", "nextafter") else (z,)))
    _raises_like(torch, call, call)


def test_renorm_and_gradient_take_complex_tensors_as_torch(torch):
    weights = [[1 + 2j, 3, -1j], [2, 1j, 1]]
    grads = []
    for m in (plugtorch, torch):
        x = m.tensor(_Z, dtype=m.complex128, requires_grad=True)
        y = m.renorm(x, 2, 0, 1.0)
        (y * m.tensor(weights, dtype=m.complex128)).abs().sum().backward()
        grads.append((y.detach(), x.grad, m.gradient(x.detach(), dim=1)[0]))
    for ours, theirs in zip(*grads):
        assert np.allclose(np.asarray(ours.tolist()), theirs.numpy(), atol=1e-9)


# -- the array API backend example (no views, no gcd in its standard) ---------------------------

def test_the_array_api_example_builds_gcd_and_as_strided_from_the_standard():
    import sys
    from pathlib import Path

    from plugtorch import library
    pytest.importorskip("array_api_strict", reason="the example backend needs array_api_strict "
                                                   "(pip install array-api-strict)")
    root = Path(__file__).resolve().parents[2] / "examples" / "array_api_backend"
    sys.path.insert(0, str(root))
    try:
        import plugtorch_arrayapi  # noqa: F401  (registers the 'arrayapi' backend)
        rng = np.random.default_rng(14)
        a, b = rng.integers(-40, 40, (3, 5)), rng.integers(-40, 40, 5)
        a[0, :2], b[:1] = 0, 0
        for fn in (plugtorch.gcd, plugtorch.lcm):
            host = fn(plugtorch.tensor(a), plugtorch.tensor(b))
            assert fn(plugtorch.tensor(a, device="arrayapi"), plugtorch.tensor(b, device="arrayapi")).tolist() == \
                host.tolist()
        values = rng.standard_normal(9)
        for size, stride, offset in _GEOMETRIES:
            x, host = (plugtorch.tensor(values, device=d, requires_grad=True) for d in ("arrayapi", "numpy"))
            out, expected = x.as_strided(size, stride, offset), host.as_strided(size, stride, offset)
            assert out.tolist() == expected.tolist()
            out.sum().backward()
            expected.sum().backward()
            assert x.grad.tolist() == host.grad.tolist()
    finally:
        sys.path.remove(str(root))
        if "arrayapi" in plugtorch.get_registry().plugin_names():
            plugtorch.unregister_plugin("arrayapi")
        library._LIBRARIES.pop("arrayapi", None)
        for name in [m for m in sys.modules if m.startswith("plugtorch_arrayapi")]:
            del sys.modules[name]
