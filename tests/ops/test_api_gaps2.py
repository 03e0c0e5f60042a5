"""torch functions real scripts call, each differential against torch: the products and
distances, the random draws, the predicates and dtype limits, the numeric helpers and the
in-place methods."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _to(lib, v, grad):
    """A float64 NumPy array as ``lib``'s tensor (requiring grad where asked); anything else as is."""
    if isinstance(v, np.ndarray):
        t = lib.tensor(v)
        if grad and v.dtype == np.float64:
            t.requires_grad_(True)
        return t
    if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
        return [_to(lib, a, grad) for a in v]
    return v


def _same(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
        return
    if not hasattr(theirs, "dtype"):
        assert ours == theirs
        return
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert list(ours.shape) == list(theirs.shape)
    np.testing.assert_allclose(_np(ours).astype(float), theirs.detach().double().numpy(), rtol=1e-7, atol=1e-9)


def _compare(torch, call, *inputs, grad=True):
    """``call(lib, *tensors)`` on plugtorch and on torch: same values, dtypes, shapes, and (with
    ``grad``) the same gradients of the outputs' sum with respect to every float64 input."""
    ours_in = [_to(plugtorch, v, grad) for v in inputs]
    theirs_in = [_to(torch, v, grad) for v in inputs]
    ours, theirs = call(plugtorch, *ours_in), call(torch, *theirs_in)
    _same(ours, theirs)
    if not grad:
        return
    leaves_o = [t for t in ours_in if isinstance(t, plugtorch.Tensor) and t.requires_grad]
    leaves_t = [t for t in theirs_in if isinstance(t, torch.Tensor) and t.requires_grad]
    outs_o = ours if isinstance(ours, (tuple, list)) else [ours]
    outs_t = theirs if isinstance(theirs, (tuple, list)) else [theirs]
    sum(o.sum() for o in outs_o).backward()
    sum(o.sum() for o in outs_t).backward()
    for a, b in zip(leaves_o, leaves_t):
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=1e-7, atol=1e-9)


def _same_error(torch, call, *inputs):
    """Both raise the same exception type, plugtorch's message torch's (plugtorch may add the shapes)."""
    with pytest.raises(Exception) as t_err:
        call(torch, *[_to(torch, v, False) for v in inputs])
    with pytest.raises(type(t_err.value)) as p_err:
        call(plugtorch, *[_to(plugtorch, v, False) for v in inputs])
    assert str(p_err.value).startswith(str(t_err.value))


R = np.random.default_rng(0)


def r(*shape):
    return R.standard_normal(shape)


def i(*shape):
    return R.integers(-3, 4, shape)


# -- products and distances --------------------------------------------------------------------

PRODUCTS = {
    "tensordot": [(lambda m, a, b: m.tensordot(a, b), r(2, 3, 4), r(3, 4, 2)),
                  (lambda m, a, b: m.tensordot(a, b, dims=([0, 2], [2, 0])), r(2, 3, 4), r(4, 3, 2)),
                  (lambda m, a, b: m.tensordot(a, b, dims=0), r(2), r()),
                  (lambda m, a, b: m.tensordot(a, b, dims=1), r(0, 3), r(3, 2))],
    "kron": [(lambda m, a, b: m.kron(a, b), r(2, 3), r(3)), (lambda m, a, b: m.kron(a, b), r(), r(2, 2)),
             (lambda m, a, b: a.kron(b), i(2, 2), i(2, 1))],
    "inner": [(lambda m, a, b: m.inner(a, b), r(2, 3), r(4, 3)), (lambda m, a, b: m.inner(a, b), r(), r(2)),
              (lambda m, a, b: a.inner(b), r(0, 3), r(3))],
    "mv": [(lambda m, a, b: m.mv(a, b), r(2, 3), r(3)), (lambda m, a, b: a.mv(b), r(0, 3), r(3))],
    "vdot": [(lambda m, a, b: m.vdot(a, b), r(3), r(3)), (lambda m, a, b: a.vdot(b), i(3), i(3))],
    "baddbmm": [(lambda m, c, a, b: m.baddbmm(c, a, b), r(2, 2, 4), r(2, 2, 3), r(2, 3, 4)),
                (lambda m, c, a, b: m.baddbmm(c, a, b, beta=0.5, alpha=-2), r(4), r(2, 2, 3), r(2, 3, 4)),
                (lambda m, c, a, b: c.baddbmm(a, b, beta=0), np.full((2, 2, 4), np.nan), r(2, 2, 3), r(2, 3, 4)),
                (lambda m, c, a, b: c.clone().baddbmm_(a, b, alpha=3), r(2, 2, 4), r(2, 2, 3), r(2, 3, 4))],
    "addbmm": [(lambda m, c, a, b: m.addbmm(c, a, b, beta=2), r(2, 4), r(3, 2, 3), r(3, 3, 4)),
               (lambda m, c, a, b: m.addbmm(c, a, b), r(), r(0, 2, 3), r(0, 3, 4))],
    "addmv": [(lambda m, c, a, b: m.addmv(c, a, b, alpha=0.5), r(2), r(2, 3), r(3)),
              (lambda m, c, a, b: c.addmv(a, b), r(1), r(2, 3), r(3))],
    "addr": [(lambda m, c, a, b: m.addr(c, a, b), r(2, 3), r(2), r(3)),
             (lambda m, c, a, b: c.clone().addr_(a, b, beta=2), r(2, 3), r(2), r(3)),
             (lambda m, c, a, b: m.addr(c, a, b), i(2, 3), i(2), i(3))],
    "matrix_power": [(lambda m, a: m.matrix_power(a, 3), r(3, 3)), (lambda m, a: a.matrix_power(0), r(2, 2, 2)),
                     (lambda m, a: m.matrix_power(a, 2), r(0, 2, 2))],
    "chain_matmul": [(lambda m, a, b, c: m.chain_matmul(a, b, c), r(2, 3), r(3, 4), r(4, 1))],
    "block_diag": [(lambda m, a, b, c: m.block_diag(a, b, c), r(2, 3), r(2), r()),
                   (lambda m, a, b: m.block_diag(a, b), i(2, 2), r(0, 2))],
    "cdist": [(lambda m, a, b: m.cdist(a, b), r(3, 2), r(4, 2)),
              (lambda m, a, b: m.cdist(a, b, p=1), r(2, 3, 2), r(4, 2)),
              (lambda m, a, b: m.cdist(a, b, p=3.0), r(3, 2), r(0, 2)),
              (lambda m, a: m.cdist(a, a), r(3, 2))],  # coincident rows: torch's gradient 0 there
    "pdist": [(lambda m, a: m.pdist(a), r(4, 3)), (lambda m, a: m.pdist(a, 1), r(3, 2)),
              (lambda m, a: m.nn.functional.pdist(a), r(1, 2))],
    "dist": [(lambda m, a, b: m.dist(a, b), r(3, 2), r(2)), (lambda m, a, b: a.dist(b, 3), r(3), r(3)),
             (lambda m, a, b: m.dist(a, b), np.zeros(2), np.zeros(2))],
}

PRODUCT_ERRORS = {
    "tensordot": [(lambda m, a, b: m.tensordot(a, b, dims=1), r(2, 3), r(2, 3)),
                  (lambda m, a, b: m.tensordot(a, b, dims=-1), r(2, 3), r(3, 2)),
                  (lambda m, a, b: m.tensordot(a, b, dims=([1], [0, 1])), r(2, 3), r(3, 2))],
    "mv": [(lambda m, a, b: m.mv(a, b), r(2, 3), r(2)), (lambda m, a, b: m.mv(a, b), r(2, 3), r(2, 3))],
    "baddbmm": [(lambda m, c, a, b: m.baddbmm(c, a, b), r(2, 2, 2), r(2, 2, 3), r(2, 2, 2)),
                (lambda m, c, a, b: m.baddbmm(c, a, b), r(2, 2, 2), r(2, 2), r(2, 2, 2))],
    "addmv": [(lambda m, c, a, b: m.addmv(c, a, b), r(3), r(2, 3), r(2))],
    "addr": [(lambda m, c, a, b: m.addr(c, a, b), r(2, 3), r(2, 3), r(3))],
    "inner": [(lambda m, a, b: m.inner(a, b), r(2), r(3))],
    "matrix_power": [(lambda m, a: m.matrix_power(a, 2), r(2, 3)), (lambda m, a: m.matrix_power(a, 2), r(2))],
    "block_diag": [(lambda m, a: m.block_diag(a), r(2, 2, 2))],
    "cdist": [(lambda m, a, b: m.cdist(a, b), r(3), r(3)), (lambda m, a, b: m.cdist(a, b), r(2, 3), r(2, 4)),
              (lambda m, a, b: m.cdist(a, b), i(2, 3), i(2, 3)),
              (lambda m, a, b: m.cdist(a, b, p=-1), r(2, 3), r(2, 3))],
    "pdist": [(lambda m, a: m.pdist(a), r(3)), (lambda m, a: m.pdist(a, -1), r(3, 2))],
    "dist": [(lambda m, a, b: m.dist(a, b), i(3), i(3))],
}


@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_and_distances(torch, name):
    for call, *inputs in PRODUCTS[name]:
        grad = all(not isinstance(v, np.ndarray) or v.dtype == np.float64 for v in inputs)
        _compare(torch, call, *inputs, grad=grad)
    for call, *inputs in PRODUCT_ERRORS.get(name, []):
        _same_error(torch, call, *inputs)


def test_matrix_power_negative_is_the_inverse_power(torch):
    a = np.random.default_rng(3).standard_normal((2, 3, 3)) + 3 * np.eye(3)
    _compare(torch, lambda m, x: m.matrix_power(x, -3), a, grad=True)


def test_chain_matmul_warns_as_torch(torch):
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        plugtorch.chain_matmul(plugtorch.ones(2, 2))


# -- random draws: torch's shapes, dtypes, errors and distributions (the values differ) ---------

def _seeded(lib, seed=0):
    return lib.Generator().manual_seed(seed)


DRAWS = {  # call(lib, g) -> a draw of many samples; stat(values) -> what the distribution fixes
    "normal": [(lambda m, g: m.normal(2.0, 3.0, (20000,), generator=g), lambda v: (v.mean(), v.std()), (2, 3)),
               (lambda m, g: m.normal(m.full((20000,), -1.0), 0.5, generator=g), lambda v: (v.mean(), v.std()),
                (-1, 0.5)),
               (lambda m, g: m.normal(1.0, m.full((20000,), 2.0, dtype=m.float64), generator=g),
                lambda v: (v.mean(), v.std()), (1, 2))],
    "bernoulli": [(lambda m, g: m.bernoulli(m.full((20000,), 0.3), generator=g), lambda v: (v.mean(),), (0.3,)),
                  (lambda m, g: m.full((20000,), 0.3).bernoulli(0.8, generator=g), lambda v: (v.mean(),), (0.8,)),
                  (lambda m, g: m.zeros(20000, dtype=m.int64).bernoulli_(0.25, generator=g), lambda v: (v.mean(),),
                   (0.25,))],
    "multinomial": [(lambda m, g: m.multinomial(m.tensor([1.0, 2.0, 7.0]), 20000, True, generator=g),
                     lambda v: tuple(np.bincount(v, minlength=3) / v.size), (0.1, 0.2, 0.7)),
                    # without replacement, the first draw of each row follows p
                    (lambda m, g: m.multinomial(m.tensor([[1.0, 0.0, 3.0]]).expand(20000, 3), 2, generator=g)[:, 0],
                     lambda v: tuple(np.bincount(v, minlength=3) / v.size), (0.25, 0.0, 0.75))],
    "exponential_": [(lambda m, g: m.empty(20000).exponential_(2.0, generator=g), lambda v: (v.mean(),), (0.5,))],
    "geometric_": [(lambda m, g: m.empty(20000).geometric_(0.25, generator=g), lambda v: (v.mean(), v.min()),
                    (4, 1))],
    "cauchy_": [(lambda m, g: m.empty(20000, dtype=m.float64).cauchy_(1.0, 2.0, generator=g),
                 lambda v: (np.median(v), np.mean(np.abs(v - 1) < 2)), (1, 0.5))],
    "log_normal_": [(lambda m, g: m.empty(20000).log_normal_(0.5, 0.25, generator=g),
                     lambda v: (np.log(v).mean(), np.log(v).std()), (0.5, 0.25))],
    "random_": [(lambda m, g: m.empty(20000, dtype=m.int64).random_(3, 7, generator=g),
                 lambda v: (v.min(), v.max(), v.mean()), (3, 6, 4.5)),
                (lambda m, g: m.empty(20000, dtype=m.uint8).random_(generator=g), lambda v: (v.min(), v.max()),
                 (0, 255)),
                (lambda m, g: m.empty(20000, dtype=m.bool).random_(generator=g), lambda v: (v.mean(),), (0.5,)),
                (lambda m, g: m.empty(20000).random_(5, generator=g), lambda v: (v.min(), v.max(), v.mean()),
                 (0, 4, 2.0))],
}

DRAW_ERRORS = {
    "normal": [lambda m: m.normal(m.zeros(2), -1.0), lambda m: m.normal(m.zeros(2), m.ones(3)),
               lambda m: m.normal(0.0, -1.0, (2,)), lambda m: m.normal(m.zeros(2), -m.ones(2)),
               lambda m: m.normal(m.zeros(2, dtype=m.int64), 1.0)],
    "bernoulli": [lambda m: m.bernoulli(m.full((3,), 1.5)), lambda m: m.bernoulli(m.ones(3, dtype=m.int64))],
    "multinomial": [lambda m: m.multinomial(m.ones(3), 4), lambda m: m.multinomial(m.ones(3), 0),
                    lambda m: m.multinomial(-m.ones(3), 1), lambda m: m.multinomial(m.zeros(3), 1),
                    lambda m: m.multinomial(m.ones(2, 2, 3), 1), lambda m: m.multinomial(m.ones(3, dtype=m.int64), 1),
                    lambda m: m.multinomial(m.tensor([1.0, float("nan")]), 1)],
    "exponential_": [lambda m: m.ones(3).exponential_(0), lambda m: m.ones(3, dtype=m.int64).exponential_()],
    "geometric_": [lambda m: m.ones(3).geometric_(0), lambda m: m.ones(3).geometric_(1.5)],
    "cauchy_": [lambda m: m.ones(3, dtype=m.int64).cauchy_()],
    "log_normal_": [lambda m: m.ones(3).log_normal_(1, 0)],
    "random_": [lambda m: m.ones(3, dtype=m.int64).random_(5, 2)],
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_random_draws(torch, name):
    for call, stat, expected in DRAWS[name]:
        ours, theirs = call(plugtorch, _seeded(plugtorch)), call(torch, _seeded(torch))
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        assert list(ours.shape) == list(theirs.shape)
        np.testing.assert_allclose(stat(_np(ours)), expected, atol=0.05 * max(1, *map(abs, expected)))
        np.testing.assert_allclose(stat(theirs.numpy()), expected, atol=0.05 * max(1, *map(abs, expected)))
        again = call(plugtorch, _seeded(plugtorch))  # a generator seeded alike draws alike
        np.testing.assert_array_equal(_np(again), _np(ours))
    for call in DRAW_ERRORS.get(name, []):
        _same_error(torch, call)


def test_draws_with_parameters_that_require_grad_give_them_a_zero_gradient(torch):
    for lib in (plugtorch, torch):
        mean = lib.zeros(3, requires_grad=True)
        std = lib.ones(3, requires_grad=True)
        p = lib.full((3,), 0.5, requires_grad=True)
        out = lib.normal(mean, std).sum() + lib.bernoulli(p).sum()
        assert out.requires_grad
        out.backward()
        for t in (mean, std, p):
            assert t.grad.tolist() == [0.0, 0.0, 0.0]


def test_multinomial_without_replacement_draws_distinct_categories():
    draws = plugtorch.multinomial(plugtorch.ones(50, 6), 6, generator=_seeded(plugtorch))
    assert all(sorted(row) == list(range(6)) for row in draws.tolist())
    assert plugtorch.multinomial(plugtorch.tensor([0.0, 1.0, 0.0]), 1).tolist() == [1]


# -- predicates, dtype limits and switches ------------------------------------------------------

def _t(lib, values, dtype="float32"):
    return lib.tensor(values, dtype=getattr(lib, dtype))


PREDICATES = {
    "equal": [lambda m: m.equal(_t(m, [1, 2]), _t(m, [1, 2], "int64")), lambda m: m.equal(_t(m, [1]), _t(m, [1, 1])),
              lambda m: m.equal(_t(m, [float("nan")]), _t(m, [float("nan")])),
              lambda m: _t(m, [[1, 2]]).equal(_t(m, [[1, 3]])), lambda m: m.equal(_t(m, []), _t(m, []))],
    "is_tensor": [lambda m: m.is_tensor(_t(m, [1])), lambda m: m.is_tensor([1.0])],
    "is_floating_point": [lambda m: m.is_floating_point(_t(m, [1])), lambda m: m.is_floating_point(_t(m, 1, "int64"))],
    "is_nonzero": [lambda m: m.is_nonzero(_t(m, [0.0])), lambda m: _t(m, 3, "int64").is_nonzero()],
    "numel": [lambda m: m.numel(m.ones(2, 3)), lambda m: m.numel(m.ones(0, 3))],
    "can_cast": [lambda m, a=a, b=b: m.can_cast(getattr(m, a), getattr(m, b))
                 for a, b in [("float32", "int32"), ("int32", "bool"), ("bool", "uint8"), ("float64", "float16"),
                              ("int64", "float16"), ("bool", "bool"), ("uint8", "int8")]],
    "finfo": [lambda m, d=d: tuple(getattr(m.finfo(getattr(m, d)), k) for k in
                                   ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"))
              for d in ("float16", "float32", "float64")] + [lambda m: str(m.finfo()), lambda m: m.finfo().eps],
    "iinfo": [lambda m, d=d: (m.iinfo(getattr(m, d)).bits, m.iinfo(getattr(m, d)).min, m.iinfo(getattr(m, d)).max)
              for d in ("uint8", "int8", "int16", "int32", "int64")] + [lambda m: str(m.iinfo(m.int32))],
    "tensor_properties": [lambda m: m.ones(2, 3).nbytes, lambda m: m.ones(2, dtype=m.float64).itemsize,
                          lambda m: m.ones(2, 3, 1).ndimension(), lambda m: m.ones(1, dtype=m.uint8).is_signed(),
                          lambda m: m.ones(1, dtype=m.int8).is_signed(), lambda m: m.ones(1).is_signed(),
                          lambda m: m.ones(2, 3).is_same_size(m.zeros(2, 3)),
                          lambda m: m.ones(2, 3).is_same_size(m.zeros(3, 2)), lambda m: m.ones(2).is_inference()],
}

PREDICATE_ERRORS = {
    "is_nonzero": [lambda m: m.is_nonzero(m.ones(2)), lambda m: m.is_nonzero(m.ones(0))],
    "finfo": [lambda m: m.finfo(m.int32)],
    "iinfo": [lambda m: m.iinfo(m.float32), lambda m: m.iinfo(m.bool)],
}


@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_predicates_and_dtype_limits(torch, name):
    for call in PREDICATES[name]:
        assert call(plugtorch) == call(torch)
    for call in PREDICATE_ERRORS.get(name, []):
        _same_error(torch, call)


def test_default_device_and_deterministic_switch(torch):
    assert plugtorch.get_default_device() == plugtorch.zeros(1).device
    plugtorch.set_default_device("cpu")
    try:
        assert plugtorch.zeros(1).device == "cpu"
    finally:
        plugtorch.set_default_device(None)
    assert plugtorch.are_deterministic_algorithms_enabled() is torch.are_deterministic_algorithms_enabled() is False
    try:
        for lib in (plugtorch, torch):
            lib.use_deterministic_algorithms(True, warn_only=True)
        assert plugtorch.are_deterministic_algorithms_enabled() is torch.are_deterministic_algorithms_enabled()
        assert (plugtorch.is_deterministic_algorithms_warn_only_enabled()
                is torch.is_deterministic_algorithms_warn_only_enabled() is True)
    finally:
        for lib in (plugtorch, torch):
            lib.use_deterministic_algorithms(False)


# -- numeric helpers and in-place comparisons ----------------------------------------------------

SPECIAL = np.array([1.0, np.nan, np.inf, -np.inf, -0.0, 0.0, -2.5])
OTHER = np.array([2.0, 1.0, np.nan, np.nan, 0.0, -0.0, -2.5])

NUMERIC = {
    "nan_to_num": [(lambda m, x: m.nan_to_num(x), SPECIAL), (lambda m, x: x.nan_to_num(1.0, 5.0, -5.0), SPECIAL),
                   (lambda m, x: m.nan_to_num(x), i(3)), (lambda m, x: x.clone().nan_to_num_(neginf=0.0), SPECIAL)],
    "fmax": [(lambda m, a, b: m.fmax(a, b), SPECIAL, OTHER), (lambda m, a, b: a.fmax(b), r(2, 3), r(3)),
             (lambda m, a, b: m.fmax(a, b), i(4), i(4))],
    "fmin": [(lambda m, a, b: m.fmin(a, b), SPECIAL, OTHER), (lambda m, a, b: a.fmin(b), r(2, 3), r(3)),
             (lambda m, a, b: m.fmin(a, b), i(4), r(4))],
    "float_power": [(lambda m, a, b: m.float_power(a, b), np.abs(r(3)), r(3)), (lambda m, a: a.float_power(2), i(3)),
                    (lambda m, a: m.float_power(2, a), r(3)), (lambda m, a: a.clone().float_power_(0.5), np.abs(r(3)))],
    "ldexp": [(lambda m, a, b: m.ldexp(a, b), r(3), i(3)), (lambda m, a, b: a.ldexp(b), i(3), i(3))],
    "rad2deg": [(lambda m, a: m.rad2deg(a), r(3)), (lambda m, a: a.rad2deg(), i(3)), (lambda m, a: a.deg2rad(), r(2))],
    "deg2rad": [(lambda m, a: m.deg2rad(a), r(3)), (lambda m, a: a.clone().deg2rad_(), r(3))],
    "heaviside": [(lambda m, a, b: m.heaviside(a, b), np.array([-1.0, 0.0, 2.0]), np.array([5.0, 0.5, 5.0])),
                  (lambda m, a, b: a.heaviside(b), i(5), i(5))],
    "signbit": [(lambda m, a: m.signbit(a), SPECIAL), (lambda m, a: a.signbit(), i(4))],
    "sgn": [(lambda m, a: m.sgn(a), SPECIAL), (lambda m, a: a.sgn(), i(4))],
    "positive": [(lambda m, a: m.positive(a), r(3)), (lambda m, a: a.positive(), i(2))],
    "isposinf": [(lambda m, a: m.isposinf(a), SPECIAL), (lambda m, a: a.isposinf(), i(2))],
    "isneginf": [(lambda m, a: m.isneginf(a), SPECIAL), (lambda m, a: a.isneginf(), i(2))],
    "isreal": [(lambda m, a: m.isreal(a), SPECIAL), (lambda m, a: a.isreal(), i(2))],
}

NUMERIC_ERRORS = {
    "heaviside": [(lambda m, a, b: m.heaviside(a, b), r(2), i(2))],
    "positive": [(lambda m: m.positive(m.ones(2, dtype=m.bool)),)],
    "float_power": [(lambda m, a: a.float_power_(2), np.ones(2, dtype=np.float32))],
}


@pytest.mark.parametrize("name", sorted(NUMERIC))
def test_numeric_helpers(torch, name):
    for call, *inputs in NUMERIC[name]:
        # gradients where torch has them and the values are finite
        grad = name not in ("heaviside", "signbit", "isposinf", "isneginf", "isreal") and all(
            not isinstance(v, np.ndarray) or (v.dtype == np.float64 and np.isfinite(v).all()) for v in inputs)
        _compare(torch, call, *inputs, grad=grad)
    for call, *inputs in NUMERIC_ERRORS.get(name, []):
        _same_error(torch, call, *inputs)


@pytest.mark.parametrize("name", ["fmax", "fmin", "nan_to_num"])
def test_nan_aware_gradients(torch, name):
    """Ties and NaNs route the gradient as torch does (fmax/fmin: ties to input; nan_to_num: 0
    at the replaced values)."""
    a = np.array([1.0, 2.0, np.nan, 3.0, np.inf])
    b = np.array([1.0, np.nan, 4.0, 0.5, 1.0])
    ours = [plugtorch.tensor(a, requires_grad=True), plugtorch.tensor(b, requires_grad=True)]
    theirs = [torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)]
    for lib, (x, y) in ((plugtorch, ours), (torch, theirs)):
        out = lib.nan_to_num(x) * y if name == "nan_to_num" else getattr(lib, name)(x, y)
        lib.nan_to_num(out, 0.0, 0.0, 0.0).sum().backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(_np(o.grad), t.grad.numpy())


INPLACE_COMPARISONS = ["eq_", "ne_", "lt_", "le_", "gt_", "ge_", "logical_and_", "logical_or_", "logical_xor_",
                       "greater_", "less_equal_", "not_equal_"]


@pytest.mark.parametrize("name", INPLACE_COMPARISONS + ["logical_not_"])
def test_inplace_comparisons(torch, name):
    a, b = np.array([[1.0, 0.0, 3.0], [-1.0, 2.0, 0.0]]), np.array([1.0, 2.0, 0.0])
    cases = [(a, b), (a.astype(np.int64), b.astype(np.int64))]
    if not name.startswith("logical"):  # torch's logical ops take no number
        cases.append((a, 2.0))
    for x, y in cases:
        args = () if name == "logical_not_" else (y,)
        ours, theirs = _to(plugtorch, x, False), _to(torch, x, False)
        got = getattr(ours, name)(*[_to(plugtorch, v, False) for v in args])
        want = getattr(theirs, name)(*[_to(torch, v, False) for v in args])
        assert got is ours
        _same(ours, want)
    if name != "logical_not_":
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            getattr(plugtorch.ones(3), name)(plugtorch.ones(2, 3))


# -- searchsorted, bucketize ---------------------------------------------------------------------

SEQ = np.array([1.0, 3.0, 3.0, 5.0, 7.0])
VALS = np.array([[3.0, 6.0, 9.0], [0.0, 1.0, np.nan]])

SEARCHES = {
    "searchsorted": [(lambda m, s, v: m.searchsorted(s, v), SEQ, VALS),
                     (lambda m, s, v: m.searchsorted(s, v, right=True), SEQ, VALS),
                     (lambda m, s, v: m.searchsorted(s, v, side="right", out_int32=True), SEQ, VALS),
                     (lambda m, s: m.searchsorted(s, 3), SEQ),
                     (lambda m, s, v: m.searchsorted(s, v), np.array([[1.0, 2.0], [3.0, 4.0]]), r(2, 3)),
                     (lambda m, s, v, k: m.searchsorted(s, v, sorter=k), np.array([3.0, 1.0, 2.0]), np.array([2.0]),
                      np.array([1, 2, 0])),
                     (lambda m, s, v: m.searchsorted(s, v), np.sort(i(4)), r(3)),
                     (lambda m, s, v: m.searchsorted(s, v), r(0), r(2))],
    "bucketize": [(lambda m, v, b: m.bucketize(v, b), VALS, SEQ),
                  (lambda m, v, b: m.bucketize(v, b, right=True), VALS, SEQ),
                  (lambda m, b: m.bucketize(3, b, out_int32=True), SEQ)],
}

SEARCH_ERRORS = {
    "searchsorted": [(lambda m, s, v: m.searchsorted(s, v, side="middle"), SEQ, VALS),
                     (lambda m, s, v: m.searchsorted(s, v), np.ones((2, 3)), np.ones((3, 3))),
                     (lambda m, s, v: m.searchsorted(s, v, side="left", right=True), SEQ, VALS)],
    "bucketize": [(lambda m, v, b: m.bucketize(v, b), VALS, np.ones((2, 2)))],
}


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_searching(torch, name):
    for call, *inputs in SEARCHES[name]:
        _compare(torch, call, *inputs, grad=False)
    for call, *inputs in SEARCH_ERRORS[name]:
        _same_error(torch, call, *inputs)


# -- shape helpers -------------------------------------------------------------------------------

SHAPES = {
    "broadcast_tensors": [(lambda m, a, b: m.broadcast_tensors(a, b), r(2, 1), r(3)),
                          (lambda m, a: m.broadcast_tensors(a), r(2))],
    "hsplit": [(lambda m, a: m.hsplit(a, 2), r(2, 4)), (lambda m, a: a.hsplit([1, 3]), r(2, 4)),
               (lambda m, a: m.hsplit(a, 2), r(4))],
    "vsplit": [(lambda m, a: m.vsplit(a, 2), r(4, 2)), (lambda m, a: a.vsplit([1]), r(3, 2))],
    "dsplit": [(lambda m, a: m.dsplit(a, 2), r(1, 2, 4)), (lambda m, a: a.dsplit([3]), r(1, 2, 4))],
    "split_with_sizes": [(lambda m, a: a.split_with_sizes([1, 2], 1), r(2, 3)),
                         (lambda m, a: a.split_with_sizes([2, 0]), r(2, 3))],
    "sum_to_size": [(lambda m, a: a.sum_to_size(1, 3), r(2, 3)), (lambda m, a: a.sum_to_size((2, 1)), r(2, 3)),
                    (lambda m, a: a.sum_to_size(3), r(2, 3))],
    "tril_indices": [(lambda m: m.tril_indices(3, 4, 1),), (lambda m: m.tril_indices(4, 3, -1, dtype=m.int32),),
                     (lambda m: m.tril_indices(0, 4),)],
    "triu_indices": [(lambda m: m.triu_indices(3, 4, -1),), (lambda m: m.triu_indices(3, 3),)],
    "diag_embed": [(lambda m, a: m.diag_embed(a), r(2, 3)), (lambda m, a: a.diag_embed(1, 0, 2), r(2, 3)),
                   (lambda m, a: m.diag_embed(a, -2, 2, 0), r(2, 3))],
    "take": [(lambda m, a, i_: m.take(a, i_), r(3, 4), np.array([[0, 5], [11, -1]])),
             (lambda m, a, i_: a.take(i_), r(3), np.array([1, 1]))],
    "cartesian_prod": [(lambda m, a, b: m.cartesian_prod(a, b), r(2), r(3)),
                       (lambda m, a, b, c: m.cartesian_prod(a, b, c), i(2), i(2), i(1)),
                       (lambda m, a: m.cartesian_prod(a), r(3))],
    "combinations": [(lambda m, a: m.combinations(a), r(4)), (lambda m, a: m.combinations(a, 3, True), r(3)),
                     (lambda m, a: m.combinations(a, 5), r(4)), (lambda m, a: m.combinations(a, 0), i(3))],
    "msort": [(lambda m, a: m.msort(a), r(4, 3)), (lambda m, a: a.msort(), i(5))],
    "logspace": [(lambda m: m.logspace(0, 2, 3),), (lambda m: m.logspace(-1, 2, 5, base=2.0, dtype=m.float64),),
                 (lambda m: m.logspace(0, 2, 5, base=3, dtype=m.int64),), (lambda m: m.logspace(1, 1, 0),)],
    "inplace_views": [(lambda m, a: (a * 1).t_(), r(2, 3)), (lambda m, a: (a * 1).transpose_(0, 2), r(2, 3, 1)),
                      (lambda m, a: (a * 1).swapaxes_(0, 1), r(2, 3)), (lambda m, a: (a * 1).squeeze_(), r(1, 3, 1)),
                      (lambda m, a: (a * 1).squeeze_(0), r(1, 3)), (lambda m, a: (a * 1).unsqueeze_(-1), r(3))],
}

SHAPE_ERRORS = {
    "hsplit": [(lambda m, a: m.hsplit(a, 3), r(2, 4))],
    "vsplit": [(lambda m, a: m.vsplit(a, 2), r(4))],
    "dsplit": [(lambda m, a: m.dsplit(a, 2), r(2, 2))],
    "split_with_sizes": [(lambda m, a: a.split_with_sizes([1, 1], 1), r(2, 3))],
    "broadcast_tensors": [(lambda m, a, b: m.broadcast_tensors(a, b), r(2), r(3))],
    "diag_embed": [(lambda m, a: m.diag_embed(a, 0, 0, 0), r(3))],
    "take": [(lambda m, a, i_: m.take(a, i_), r(2, 2), np.array([4])),
             (lambda m, a, i_: m.take(a, i_), r(2, 2), np.array([1.0]))],
    "cartesian_prod": [(lambda m, a: m.cartesian_prod(a), r(2, 2))],
    "combinations": [(lambda m, a: m.combinations(a), r(2, 2))],
    "inplace_views": [(lambda m, a: a.t_(), r(2, 3))],  # a leaf that requires grad
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_helpers(torch, name):
    for call, *inputs in SHAPES[name]:
        grad = all(not isinstance(v, np.ndarray) or v.dtype != np.int64 for v in inputs) and bool(inputs)
        _compare(torch, call, *inputs, grad=grad)
    for call, *inputs in SHAPE_ERRORS.get(name, []):
        ours_in = [_to(plugtorch, v, True) for v in inputs]
        theirs_in = [_to(torch, v, True) for v in inputs]
        with pytest.raises(Exception) as t_err:
            call(torch, *theirs_in)
        with pytest.raises(type(t_err.value)) as p_err:
            call(plugtorch, *ours_in)
        # plugtorch may name the op or the shapes after torch's words
        assert str(p_err.value).startswith(str(t_err.value).rstrip("."))


# -- activations, dropout forms, cumsum_, fill_diagonal_ -----------------------------------------

ACTIVATIONS = {
    "hardshrink": [(lambda m, x: m.hardshrink(x), np.array([-1.0, -0.3, 0.2, 0.7])),
                   (lambda m, x: x.hardshrink(0.1), r(2, 3)), (lambda m, x: m.nn.functional.hardshrink(x, 2.0), r(3))],
    "softshrink": [(lambda m, x: m.nn.functional.softshrink(x), np.array([-1.0, -0.3, 0.2, 0.7])),
                   (lambda m, x: m.nn.functional.softshrink(x, 0.1), r(2, 3))],
    "prelu": [(lambda m, x, w: m.prelu(x, w), r(2, 3, 2), np.abs(r(3))),
              (lambda m, x, w: x.prelu(w), r(4), np.abs(r(1))),
              (lambda m, x, w: m.nn.functional.prelu(x, w), r(), np.abs(r(1)))],
    "cumsum_": [(lambda m, x: (x * 1).cumsum_(1), r(2, 3)), (lambda m, x: x.clone().cumsum_(0), i(4))],
    "fill_diagonal_": [(lambda m, x: (x * 1).fill_diagonal_(2.0), r(3, 3)),
                       (lambda m, x: (x * 1).fill_diagonal_(0.0, wrap=True), r(7, 2)),
                       (lambda m, x: (x * 1).fill_diagonal_(0.0), r(7, 2)),
                       (lambda m, x: x.clone().fill_diagonal_(5), i(2, 2, 2))],
}

ACTIVATION_ERRORS = {
    "prelu": [(lambda m, x, w: m.prelu(x, w), r(2, 4), r(3)), (lambda m, x, w: m.prelu(x, w), r(), r(2))],
    "softshrink": [(lambda m, x: m.nn.functional.softshrink(x, -1.0), r(2))],
    "fill_diagonal_": [(lambda m, x: x.fill_diagonal_(1), r(3)), (lambda m, x: x.fill_diagonal_(1), r(2, 3, 2))],
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_and_inplace_fills(torch, name):
    for call, *inputs in ACTIVATIONS[name]:
        grad = all(v.dtype == np.float64 for v in inputs)
        _compare(torch, call, *inputs, grad=grad)
    for call, *inputs in ACTIVATION_ERRORS.get(name, []):
        _same_error(torch, call, *inputs)


@pytest.mark.parametrize("name, feature, alpha", [("dropout", False, False), ("feature_dropout", True, False),
                                                  ("alpha_dropout", False, True),
                                                  ("feature_alpha_dropout", True, True)])
def test_top_level_dropout_forms(torch, name, feature, alpha):
    x = np.random.default_rng(1).standard_normal((4000, 4, 3))
    for lib in (plugtorch, torch):
        fn = getattr(lib, name)
        t = lib.tensor(x)
        assert fn(t, 0.3, False) is t  # identity outside training
        out = fn(t, 0.3, True)
        assert list(out.shape) == list(t.shape) and out.dtype == t.dtype
        v = out.numpy()
        if alpha:  # SELU's mean and variance kept
            assert abs(v.mean() - x.mean()) < 0.05 and abs(v.std() - x.std()) < 0.05
        else:
            dropped = v == 0
            assert abs(dropped.mean() - 0.3) < 0.02
            np.testing.assert_allclose(v[~dropped], x[~dropped] / 0.7)
        if feature:  # whole channels share one draw
            assert (np.ptp(v - x * (v[..., :1] / x[..., :1]), axis=-1) < 1e-9).all() or alpha
        with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1, but got 1.5"):
            fn(t, 1.5, True)
    if alpha:
        g = getattr(plugtorch.nn.functional, name)
        assert g(plugtorch.ones(3)).tolist() == [1.0, 1.0, 1.0]  # training=False by default, as torch's
        with pytest.raises(ValueError, match="between 0 and 1"):
            g(plugtorch.ones(3), 2.0)


# -- nan reductions, quantiles, covariance -------------------------------------------------------

WITH_NAN = r(3, 5)
WITH_NAN[1, 2] = np.nan
ALL_NAN_ROW = np.vstack([WITH_NAN, np.full((1, 5), np.nan)])  # values only: torch's gradient there is NaN
FINITE = r(3, 6)
Q = np.array([0.0, 0.25, 0.5, 1.0])

MOMENTS = {
    "nansum": [(lambda m, x: m.nansum(x), WITH_NAN), (lambda m, x: x.nansum(1, True), WITH_NAN),
               (lambda m, x: m.nansum(x, (0, 1)), r(2, 3)), (lambda m, x: m.nansum(x), i(3)),
               (lambda m, x: m.nansum(x, 0), r(0, 2))],
    "nanmean": [(lambda m, x: m.nanmean(x), WITH_NAN), (lambda m, x: x.nanmean(0), WITH_NAN),
                (lambda m, x: m.nanmean(x, 1, keepdim=True), WITH_NAN), (lambda m, x: m.nanmean(x), r()),
                (lambda m, x: m.nanmean(x.detach(), 1), ALL_NAN_ROW)],
    "quantile": [(lambda m, x: m.quantile(x, 0.3), FINITE), (lambda m, x: x.quantile(0.3, 1), FINITE),
                 (lambda m, x: m.quantile(x, m.tensor(Q), 0, True), FINITE),
                 (lambda m, x: m.quantile(x, 0.5, 1), WITH_NAN), (lambda m, x: m.quantile(x, 0.7), r()),
                 (lambda m, x: m.quantile(x, 0.5, 0), r(1, 3))]
    + [(lambda m, x, it=it: m.quantile(x, m.tensor(Q), 1, interpolation=it), FINITE)
       for it in ("lower", "higher", "midpoint", "nearest")],
    "nanquantile": [(lambda m, x: m.nanquantile(x, 0.3, 1), WITH_NAN),
                    (lambda m, x: m.nanquantile(x.detach(), 0.3, 1), ALL_NAN_ROW),
                    (lambda m, x: x.nanquantile(m.tensor(Q)), WITH_NAN),
                    (lambda m, x: m.nanquantile(x, 0.5, keepdim=True), WITH_NAN),
                    (lambda m, x: m.nanquantile(x, m.tensor(Q), 1, interpolation="nearest"), WITH_NAN)],
    "cov": [(lambda m, x: m.cov(x), FINITE), (lambda m, x: x.cov(correction=0), FINITE),
            (lambda m, x: m.cov(x), r(6)), (lambda m, x: m.cov(x), i(2, 4)),
            (lambda m, x, f, a: m.cov(x, fweights=f, aweights=a), FINITE, np.array([1, 2, 1, 3, 1, 1]),
             np.abs(r(6))),
            (lambda m, x, a: m.cov(x, correction=2, aweights=a), FINITE, np.abs(r(6)))],
    "corrcoef": [(lambda m, x: m.corrcoef(x), FINITE), (lambda m, x: x.corrcoef(), r(2, 8)),
                 (lambda m, x: m.corrcoef(x), r(5))],
}

MOMENT_ERRORS = {
    "nanmean": [(lambda m, x: m.nanmean(x), i(3))],
    "quantile": [(lambda m, x: m.quantile(x, 1.5), r(3)), (lambda m, x: m.quantile(x, 0.5), i(3)),
                 (lambda m, x: m.quantile(x, 0.5), r(0)),
                 (lambda m, x: m.quantile(x, 0.5, interpolation="cubic"), r(3))],
    "cov": [(lambda m, x: m.cov(x), r(2, 2, 2)), (lambda m, x, f: m.cov(x, fweights=f), r(2, 3), r(3)),
            (lambda m, x, f: m.cov(x, fweights=f), r(2, 3), np.array([1, 2]))],
}


@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_nan_reductions_quantiles_covariance(torch, name):
    for call, *inputs in MOMENTS[name]:
        # quantile's q and cov's weights are not differentiated
        grad = inputs[0].dtype == np.float64 and name not in ("cov", "corrcoef") or len(inputs) == 1
        _compare(torch, call, *inputs, grad=grad and inputs[0].dtype == np.float64 and inputs[0] is not ALL_NAN_ROW)
    for call, *inputs in MOMENT_ERRORS.get(name, []):
        _same_error(torch, call, *inputs)


# -- select and the scatter-into forms -----------------------------------------------------------

EMBEDS = {
    "select": [(lambda m, x: x.select(1, -1), r(3, 4)), (lambda m, x: m.select(x, 0, 2), r(3, 4))],
    "select_scatter": [(lambda m, x, s: m.select_scatter(x, s, 0, 1), r(3, 4), r(4)),
                       (lambda m, x, s: x.select_scatter(s, -1, -1), r(2, 3, 4), r(2, 3))],
    "slice_scatter": [(lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 2), r(3, 4), r(3, 2)),
                      (lambda m, x, s: x.slice_scatter(s), r(3, 4), r(3, 4)),
                      (lambda m, x, s: m.slice_scatter(x, s, 0, 1), r(3, 2), r(2, 2))],
    "diagonal_scatter": [(lambda m, x, s: m.diagonal_scatter(x, s, 1), r(3, 4), r(3)),
                         (lambda m, x, s: x.diagonal_scatter(s, -1), r(3, 4), r(2)),
                         (lambda m, x, s: m.diagonal_scatter(x, s, 0, 0, 2), r(2, 3, 2), r(3, 2))],
    "index_copy": [(lambda m, x, s, i_: m.index_copy(x, 1, i_, s), r(3, 4), r(3, 2), np.array([0, 2])),
                   (lambda m, x, s, i_: (x * 1).index_copy_(0, i_, s), r(3, 4), r(1, 4), np.array([2]))],
    "index_fill": [(lambda m, x, i_: x.index_fill(1, i_, 5.0), r(3, 4), np.array([0, 2])),
                   (lambda m, x, i_: m.index_fill(x, 0, i_, m.tensor(-1.0)), r(3, 4), np.array([1])),
                   (lambda m, x, i_: (x * 1).index_fill_(-1, i_, 0), r(2, 3), np.array([1, 1]))],
    "masked_scatter": [(lambda m, x, s: x.masked_scatter(m.tensor([True, False, True, False]), s), r(3, 4), r(3, 4)),
                       (lambda m, x, s: (x * 1).masked_scatter_(x.detach() > 0, s), r(3, 4), r(12))],
    "put": [(lambda m, x, s, i_: x.put(i_, s), r(3, 4), r(2), np.array([0, -1])),
            (lambda m, x, s, i_: x.put(i_, s, accumulate=True), r(3, 4), r(3), np.array([0, 0, 5])),
            (lambda m, x, s, i_: (x * 1).put_(i_, s), r(3, 4), r(1), np.array([7]))],
}

EMBED_ERRORS = {
    "select": [(lambda m, x: x.select(0, 3), r(3, 4))],
    "select_scatter": [(lambda m, x, s: m.select_scatter(x, s, 0, 1), r(3, 4), r(3))],
    "slice_scatter": [(lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 2), r(3, 4), r(3, 3))],
    "diagonal_scatter": [(lambda m, x, s: m.diagonal_scatter(x, s, 1), r(3, 4), r(2))],
    "index_copy": [(lambda m, x, s, i_: m.index_copy(x, 1, i_, s), r(3, 4), r(3, 3), np.array([0, 2]))],
    "masked_scatter": [(lambda m, x, s: x.masked_scatter(m.ones(3, 4, dtype=m.bool), s), r(3, 4), r(3))],
    "put": [(lambda m, x, s, i_: x.put(i_, s), r(3, 4), r(1), np.array([12]))],
}


@pytest.mark.parametrize("name", sorted(EMBEDS))
def test_select_and_scatter_into(torch, name):
    for call, *inputs in EMBEDS[name]:
        _compare(torch, call, *inputs)
    for call, *inputs in EMBED_ERRORS.get(name, []):
        _same_error(torch, call, *inputs)


# -- trapezoid, cumulative_trapezoid, vander -----------------------------------------------------

INTEGRALS = {
    "trapezoid": [(lambda m, y: m.trapezoid(y), r(5)), (lambda m, y: m.trapezoid(y, dx=0.5, dim=0), r(4, 3)),
                  (lambda m, y, x: m.trapezoid(y, x), r(2, 4), np.sort(r(4))),
                  (lambda m, y, x: m.trapezoid(y, x, dim=0), r(3, 2), r(3, 2)), (lambda m, y: m.trapezoid(y), i(4)),
                  (lambda m, y: m.trapezoid(y), r(0)), (lambda m, y, x: m.trapz(y, x), r(3), r(3))],
    "cumulative_trapezoid": [(lambda m, y: m.cumulative_trapezoid(y), r(5)),
                             (lambda m, y, x: m.cumulative_trapezoid(y, x, dim=0), r(3, 2), r(3)),
                             (lambda m, y: m.cumulative_trapezoid(y, dx=2.0), i(2, 4))],
    "vander": [(lambda m, x: m.vander(x), np.array([1.0, 0.0, -2.0])), (lambda m, x: m.vander(x, 4, True), r(3)),
               (lambda m, x: m.vander(x), i(4)), (lambda m, x: m.vander(x, 0), r(2))],
}

INTEGRAL_ERRORS = {
    "trapezoid": [(lambda m, y, x: m.trapezoid(y, x), r(3), r(2))],
    "vander": [(lambda m, x: m.vander(x), r(2, 2)), (lambda m, x: m.vander(x, -1), r(2))],
}


@pytest.mark.parametrize("name", sorted(INTEGRALS))
def test_integrals_and_vander(torch, name):
    for call, *inputs in INTEGRALS[name]:
        # torch's vander cannot be differentiated (its cumprod writes in place): gradcheck below
        grad = all(v.dtype == np.float64 for v in inputs) and name != "vander" and inputs[0].size > 0
        _compare(torch, call, *inputs, grad=grad)
    for call, *inputs in INTEGRAL_ERRORS.get(name, []):
        _same_error(torch, call, *inputs)


def test_trapezoid_of_nothing_is_a_constant(torch):
    for lib in (plugtorch, torch):
        assert not lib.trapezoid(lib.zeros(0, requires_grad=True)).requires_grad


def test_vander_gradient_by_finite_differences():
    x = plugtorch.tensor([1.5, 0.0, -2.0], dtype=plugtorch.float64, requires_grad=True)
    assert plugtorch.autograd.gradcheck(lambda t: plugtorch.vander(t, 4), (x,))


# -- asarray, frombuffer, narrow_copy ------------------------------------------------------------

CREATIONS = {
    "asarray": [lambda m: m.asarray([1, 2]), lambda m: m.asarray(np.array([1.0, 2.0])), lambda m: m.asarray([1.5]),
                lambda m: m.asarray(m.ones(2), dtype=m.float64), lambda m: m.asarray(3, dtype=m.float64),
                lambda m: m.asarray([[1, 2]], dtype=m.float32, requires_grad=True)],
    "frombuffer": [lambda m: m.frombuffer(bytearray(b"\x01\x00\x00\x00\x02\x00\x00\x00"), dtype=m.int32),
                   lambda m: m.frombuffer(bytearray(16), dtype=m.float32, count=2, offset=4),
                   lambda m: m.frombuffer(bytearray(b"\x01\x02"), dtype=m.uint8)],
    "narrow_copy": [lambda m: m.narrow_copy(m.arange(6).reshape(2, 3), 1, 1, 2),
                    lambda m: m.arange(6.0).reshape(3, 2).narrow_copy(0, 1, 2)],
}

CREATION_ERRORS = {
    "asarray": [lambda m: m.asarray(m.ones(2), dtype=m.float64, copy=False)],
    "frombuffer": [lambda m: m.frombuffer(bytearray(0), dtype=m.int32), lambda m: m.frombuffer(bytearray(7),
                                                                                                   dtype=m.int32),
                   lambda m: m.frombuffer(bytearray(8), dtype=m.int32, count=3)],
}


@pytest.mark.parametrize("name", sorted(CREATIONS))
def test_creation_from_objects(torch, name):
    for call in CREATIONS[name]:
        ours, theirs = call(plugtorch), call(torch)
        _same(ours, theirs)
        assert ours.requires_grad == theirs.requires_grad
    for call in CREATION_ERRORS.get(name, []):
        _same_error(torch, call)


def test_asarray_aliases_and_frombuffer_shares_memory():
    t = plugtorch.ones(2)
    assert plugtorch.asarray(t) is t and plugtorch.asarray(t, copy=True) is not t
    buf = bytearray(8)
    view = plugtorch.frombuffer(buf, dtype=plugtorch.int32)
    buf[4] = 7
    assert view.tolist() == [0, 7]
