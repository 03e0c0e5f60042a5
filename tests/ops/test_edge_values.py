"""Values easy to get silently wrong, compared with torch: NaN, infinities and -0.0 through the
elementwise unary functions; sign and its kin at NaN and -0.0; the add* products' zero gradient
for ``input`` at beta=0; logical ops refusing a Python number as torch does."""
from __future__ import annotations

import math

import numpy as np
import pytest

import plugtorch

EDGES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, -1.0, 1.0, -0.5, 0.5, -3.0, 3.0, -100.0, 1e30, -1e30]

# every public function of one float tensor that torch also has (dropout's kin are random)
UNARY = """abs acos acosh angle arccos arccosh arcsin arcsinh arctan arctanh asin asinh atan atanh ceil celu
conj conj_physical cos cosh deg2rad digamma erf erfc erfinv exp exp2 expm1 fix floor frac hardshrink i0 isfinite
isinf isnan isneginf isposinf isreal lgamma log log10 log1p log2 logical_not logit nan_to_num neg positive
rad2deg real reciprocal relu round rsqrt selu sgn sigmoid sign signbit sin sinc sinh sqrt square tan tanh trunc
""".split()
SPECIAL = """bessel_j0 bessel_j1 digamma entr erf erfc erfcx erfinv exp2 expit expm1 gammaln i0 i0e i1 i1e log1p
log_ndtr logit ndtr ndtri psi round sinc""".split()
FUNCTIONAL = """celu elu gelu hardshrink hardsigmoid hardswish hardtanh leaky_relu logsigmoid mish relu relu6
selu sigmoid silu softplus softshrink softsign tanh tanhshrink""".split()

# where torch's CPU kernels differ from the correctly rounded value, plugtorch keeps the latter:
# (namespace, name, dtype) -> the inputs left out, and why
KNOWN = {
    # a float32 subnormal: torch's vectorised log1p and sigmoid flush it, or the result, to 0
    **{(ns, f, "float32"): {1e-45, -100.0, 100.0} for ns, f in
       [("", "log1p"), ("special", "log1p"), ("", "sigmoid"), ("special", "expit"), ("F", "sigmoid"),
        ("F", "silu"), ("F", "logsigmoid")]},
    # torch's float32 gelu(inf) is nan (float64: inf), and its float32 gelu and ndtr compute
    # 1 + erf(x / sqrt(2)) in float32: 1e-4 relative off at -3
    ("F", "gelu", "float32"): {math.inf, -3.0, -100.0},
    ("special", "ndtr", "float32"): {-3.0, -100.0},
    # the sign of a zero inside the band depends on where torch's element sits: its vectorised
    # loop gives +0.0 (as plugtorch), its scalar tail x * 0 (-0.0 for a negative x)
    **{("F", "softshrink", dt): {-0.0, -0.5} for dt in ("float32", "float64")},
    # far out, both are rounding noise; in float64, SciPy's J0(3) and J1(3) are the correctly
    # rounded ones (torch's differ by 2e-11 relative)
    **{("special", f, dt): {1e30, -1e30, 3.0, -3.0} for f in ("bessel_j0", "bessel_j1")
       for dt in ("float32", "float64")},
}


def _cases():
    for ns, names in (("", UNARY), ("special", SPECIAL), ("F", FUNCTIONAL)):
        for name in names:
            yield pytest.param(ns, name, id=f"{ns}.{name}" if ns else name)


def _namespace(lib, ns):
    return {"": lib, "special": lib.special, "F": lib.nn.functional}[ns]


def _agree(ours, theirs, dtype):
    """Equal values, NaN where torch has NaN and the sign of every zero (and infinity) as torch's."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype
    if theirs.dtype.kind != "f":
        return ours == theirs
    close = np.isclose(ours, theirs, rtol=1e-5 if dtype == "float32" else 1e-13, atol=0, equal_nan=True)
    return close & ((np.signbit(ours) == np.signbit(theirs)) | np.isnan(theirs))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ns,name", _cases())
def test_unary_functions_give_torchs_values_at_nan_inf_and_signed_zero(torch, ns, name, dtype):
    fn, ref = getattr(_namespace(plugtorch, ns), name), getattr(_namespace(torch, ns), name)
    skipped = KNOWN.get((ns, name, dtype), set())
    values = [v for v in EDGES if v not in skipped or (math.isnan(v) and not any(map(math.isnan, skipped)))]
    ours = fn(plugtorch.tensor(values, dtype=getattr(plugtorch, dtype)))
    theirs = ref(torch.tensor(values, dtype=getattr(torch, dtype)))
    same = _agree(ours.numpy(), theirs.numpy(), dtype)
    bad = [values[i] for i in np.flatnonzero(~same)]
    assert not bad, f"{name} differs at {bad}: {ours.numpy()[~same]} against torch's {theirs.numpy()[~same]}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sign_family_at_nan_and_signed_zero(torch, dtype):
    values = [math.nan, -math.nan, -0.0, 0.0, math.inf, -math.inf, -2.0, 2.0]
    x, tx = plugtorch.tensor(values, dtype=getattr(plugtorch, dtype)), torch.tensor(values, dtype=getattr(torch, dtype))
    for name in ("sign", "sgn", "signbit"):
        assert _agree(getattr(x, name)().numpy(), getattr(tx, name)().numpy(), dtype).all(), name
    inplace, tinplace = x.clone(), tx.clone()
    inplace.sign_()  # the NumPy backend's out= variant of the primitive
    tinplace.sign_()
    assert _agree(inplace.numpy(), tinplace.numpy(), dtype).all()
    signs = [math.nan, -math.nan, -0.0, 0.0, -1.0, 1.0, -math.inf, math.nan]
    s, ts = plugtorch.tensor(signs, dtype=x.dtype), torch.tensor(signs, dtype=tx.dtype)
    assert _agree(plugtorch.copysign(x, s).numpy(), torch.copysign(tx, ts).numpy(), dtype).all()
    assert _agree(plugtorch.copysign(x, -0.0).numpy(), torch.copysign(tx, -0.0).numpy(), dtype).all()


def test_sign_of_nan_is_zero_inside_a_compiled_function(torch):
    x = plugtorch.tensor([math.nan, -3.0, 0.0, 2.0])
    compiled = plugtorch.compile(lambda t: (t * 2).sign() + 1)
    want = (torch.tensor(x.tolist()) * 2).sign() + 1
    assert compiled(x).tolist() == want.tolist() == [1.0, 0.0, 1.0, 2.0]


def test_angle_of_float64_is_float64s_pi(torch):
    values = [-1.0, -0.0, 0.0, 2.0, -math.inf, math.nan]
    ours = plugtorch.angle(plugtorch.tensor(values, dtype=plugtorch.float64))
    theirs = torch.angle(torch.tensor(values, dtype=torch.float64))
    assert ours.dtype is plugtorch.float64
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours[0].item() == math.pi


@pytest.mark.parametrize("name", ["hardshrink", "softshrink", "hardswish"])
def test_gradients_at_edge_values_match_torch(torch, name):
    values = [math.nan, -0.0, 0.25, -0.25, 0.5, -0.5, 1.0, -1.0, -3.0, 3.0, -4.0, 4.0]
    lib_fns = [(lib, getattr(lib.nn.functional, name, None) or getattr(lib, name)) for lib in (plugtorch, torch)]
    grads = []
    for lib, fn in lib_fns:
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        fn(x).backward(lib.arange(1.0, len(values) + 1, dtype=lib.float64))
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-14, atol=0)  # nan where torch's is, and 0 where it is


PRODUCTS = {
    "addmm": ((2, 3), (2, 4), (4, 3)),
    "addmv": ((2,), (2, 4), (4,)),
    "addr": ((2, 3), (2,), (3,)),
    "addbmm": ((2, 3), (5, 2, 4), (5, 4, 3)),
    "baddbmm": ((5, 2, 3), (5, 2, 4), (5, 4, 3)),
}


@pytest.mark.parametrize("beta,alpha", [(0, 1), (0.0, 2.0), (0, 0)])
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_add_products_at_beta_zero_give_input_a_zero_gradient_and_ignore_its_nan(torch, name, beta, alpha):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape) for shape in PRODUCTS[name]]
    arrays[0][..., 0] = math.nan  # torch ignores input at beta=0: its nan does not propagate
    results = []
    for lib in (plugtorch, torch):
        operands = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = getattr(lib, name)(*operands, beta=beta, alpha=alpha)
        out.backward(lib.ones_like(out))
        results.append((out.detach().numpy(), [t.grad for t in operands]))
    (ours, our_grads), (theirs, their_grads) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert not np.isnan(ours).any()
    for i, (mine, want) in enumerate(zip(our_grads, their_grads)):
        assert want is not None and mine is not None, (name, i)
        np.testing.assert_allclose(mine.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    assert not our_grads[0].numpy().any()  # zeros, not None


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops_refuse_a_python_number_as_torch(torch, name):
    for other in (1, 0.0, True):
        with pytest.raises(TypeError) as theirs:
            getattr(torch, name)(torch.tensor([0.0, 1.0]), other)
        with pytest.raises(TypeError, match=rf"{name}\(\): argument 'other' \(position 2\) must be Tensor, "
                                             rf"not {type(other).__name__}") as ours:
            getattr(plugtorch, name)(plugtorch.tensor([0.0, 1.0]), other)
        assert str(theirs.value).split(" (")[0] in str(ours.value)
        with pytest.raises(TypeError, match="must be Tensor, not int"):
            getattr(plugtorch.tensor([0.0, 1.0]), name)(2)
        with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor, not int"):
            getattr(plugtorch, name)(1, plugtorch.tensor([0.0, 1.0]))
    a, b = [0.0, 1.0, 2.0, 0.0], [0.0, 0.0, -1.0, math.nan]
    ours = getattr(plugtorch, name)(plugtorch.tensor(a), plugtorch.tensor(b))
    theirs = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_and_xlog1py_values_and_gradients_where_input_is_zero(torch, name):
    """torch's +0.0 where input is 0, and input's gradient xlogy(g, y) (the log's value even where
    input is 0), 0 only where input is 0 and the log's argument is not positive."""
    grid = [(x, y) for x in (-0.0, 0.0, 1.0, -1.5) for y in (-2.0, -1.0, -0.0, 0.0, 0.5, 2.0, math.nan, math.inf)]
    results = []
    for lib in (plugtorch, torch):
        fn = lib.xlogy if name == "xlogy" else lib.special.xlog1py
        x = lib.tensor([p[0] for p in grid], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([p[1] for p in grid], dtype=lib.float64, requires_grad=True)
        out = fn(x, y)
        out.backward(lib.full_like(out, 1.5))
        results.append((out.detach().numpy(), x.grad.numpy(), y.grad.numpy()))
    (ours, our_gx, our_gy), (theirs, their_gx, their_gy) = results
    assert _agree(ours, theirs, "float64").all(), [grid[i] for i in np.flatnonzero(~_agree(ours, theirs, "float64"))]
    np.testing.assert_allclose(our_gx, their_gx, rtol=1e-14, atol=0)
    np.testing.assert_allclose(our_gy, their_gy, rtol=1e-14, atol=0)


@pytest.mark.parametrize("ns,name", [("F", "celu"), ("F", "hardswish"), ("", "logit"), ("", "sinc"),
                                     ("F", "elu"), ("F", "selu"), ("F", "softplus"), ("F", "mish")])
def test_gradients_at_extreme_values_match_torch(torch, ns, name):
    """No nan from a branch where() leaves unused (celu at 1e10, hardswish at inf), sinc's 0 where
    pi x^2 underflows, and logit's nan outside [0, 1]."""
    values = [math.inf, -math.inf, 1e10, -1e10, 1e-300, -1e-300, 0.25, -0.25, 1.5, -1.5, 40.0, -40.0]
    grads = []
    for lib in (plugtorch, torch):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        getattr(_namespace(lib, ns), name)(x).backward(lib.ones(len(values), dtype=lib.float64))
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-300)


PAIR_EDGES = [math.nan, math.inf, -math.inf, -0.0, 0.0, -1.0, 1.0, 2.5, -2.5, 1e-300]


@pytest.mark.parametrize("name", ["div", "atan2", "maximum", "minimum", "logaddexp", "logaddexp2", "mul", "sub"])
def test_binary_gradients_at_edge_pairs_match_torch(torch, name):
    """Every pair of edge values: div's other-gradient (a / b) / b (b * b underflows), atan2's 0 where
    a^2 + b^2 is 0, maximum's and minimum's gradient to both operands where one is nan, logaddexp's
    1 (not nan) beside an infinite operand."""
    pairs = [(a, b) for a in PAIR_EDGES for b in PAIR_EDGES]
    grads = []
    for lib in (plugtorch, torch):
        a = lib.tensor([p[0] for p in pairs], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([p[1] for p in pairs], dtype=lib.float64, requires_grad=True)
        getattr(lib, name)(a, b).backward(lib.full((len(pairs),), 1.5, dtype=lib.float64))
        grads.append((a.grad.numpy(), b.grad.numpy()))
    for ours, theirs in zip(grads[0], grads[1]):
        bad = ~np.isclose(ours, theirs, rtol=1e-12, atol=0, equal_nan=True)
        assert not bad.any(), [(pairs[i], ours[i], theirs[i]) for i in np.flatnonzero(bad)]


def test_div_gradient_of_a_tiny_float32_divisor_is_finite_as_torchs(torch):
    # b * b underflows to 0 in float32 for |b| below ~1e-19; (a / b) / b does not
    grads = []
    for lib in (plugtorch, torch):
        b = lib.tensor([1e-25, -3e-22, 2.0], requires_grad=True)
        (lib.tensor([1e-30, 2e-30, 1.0]) / b).sum().backward()
        grads.append(b.grad.numpy())
    assert np.isfinite(grads[0]).all()
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_logical_ops_refuse_a_number_while_an_fx_proxy_lives():
    """A live Proxy anywhere in the process (a trace, a failed test's traceback) switches on the
    functions' Proxy lookup; a number is still refused, and a Proxy operand still records."""
    import plugtorch.fx as fx
    graph = fx.Graph()
    x = fx.Proxy(graph.placeholder("x"))
    for name in ("logical_and", "logical_or"):
        with pytest.raises(TypeError, match=rf"{name}\(\): argument 'other' \(position 2\) must be Tensor, not int"):
            getattr(plugtorch, name)(plugtorch.tensor([0.0, 1.0]), 1)
        assert getattr(plugtorch, name)(x, x).node.target is getattr(plugtorch, name)
    with pytest.raises(TypeError, match=r"gcd\(\): argument 'other' \(position 2\) must be Tensor, not int"):
        plugtorch.gcd(plugtorch.tensor([4, 6]), 2)
    assert plugtorch.gcd(x, x).node.target is plugtorch.gcd


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_family_keeps_the_sign_of_zero_as_torch(torch, dtype):
    """relu is x < 0 ? 0 : x (torch's): -0.0 stays -0.0 and nan stays nan, through the native
    kernel (C-ordered), NumPy's (a strided view), the decomposition (under a mode), in place, and
    in relu6, hardtanh, leaky_relu and elu; the gradient at +-0 is 0."""
    values = [-0.0, 0.0, math.nan, -math.inf, math.inf, -1e-45, 1e-45, -2.0, 3.0, 7.0]
    x, tx = plugtorch.tensor(values, dtype=getattr(plugtorch, dtype)), torch.tensor(values, dtype=getattr(torch, dtype))
    F, TF = plugtorch.nn.functional, torch.nn.functional
    cases = [(F.relu(x), TF.relu(tx)), (plugtorch.relu(x.reshape(2, 5).t()), torch.relu(tx.reshape(2, 5).t())),
             (x.clone().relu_(), tx.clone().relu_()), (F.relu6(x), TF.relu6(tx)), (F.hardtanh(x), TF.hardtanh(tx)),
             (F.leaky_relu(x), TF.leaky_relu(tx)), (F.elu(x), TF.elu(tx))]
    with plugtorch.autograd.forward_ad.dual_level():  # a mode: the op's decomposition, not a kernel
        dual = plugtorch.autograd.forward_ad.make_dual(x, plugtorch.ones_like(x))
        cases.append((plugtorch.autograd.forward_ad.unpack_dual(F.relu(dual)).primal.detach(), TF.relu(tx)))
    for i, (ours, theirs) in enumerate(cases):
        assert _agree(ours.numpy(), theirs.numpy(), dtype).all(), (i, ours.numpy(), theirs.numpy())
    grads = []
    for lib, t in ((plugtorch, x), (torch, tx)):
        t = t.clone().requires_grad_(True)
        lib.relu(t).backward(lib.ones_like(t))
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(*grads)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_angle_and_hypot_gradients_at_nan_and_the_origin_match_torch(torch, dtype):
    """angle's gradient on real input is 0 everywhere, nan included (its value passes nan on);
    hypot's is x / hypot(x, y), nan at the origin as torch's (0 / 0: hypot has no gradient there),
    and inf beats nan in its value."""
    values = [math.nan, -0.0, 0.0, -1.0, 2.0, math.inf, -math.inf]
    others = [0.0, 0.0, -0.0, 0.0, math.nan, 1.0, math.nan]
    results = []
    for lib in (plugtorch, torch):
        dt = getattr(lib, dtype)
        x = lib.tensor(values, dtype=dt, requires_grad=True)
        angle = lib.angle(x)
        (ga,) = lib.autograd.grad(angle.sum(), x)
        a, b = lib.tensor(values, dtype=dt, requires_grad=True), lib.tensor(others, dtype=dt, requires_grad=True)
        h = lib.hypot(a, b)
        gh = lib.autograd.grad(h, (a, b), lib.full_like(h, 1.5))
        results.append([angle.detach().numpy(), ga.numpy(), h.detach().numpy(), *(g.numpy() for g in gh)])
    for ours, theirs in zip(*results):
        assert _agree(ours, theirs, dtype).all(), (ours, theirs)
    assert not results[0][1].any()
    assert np.isnan(results[0][3][1:3]).all()  # (-0, 0) and (0, -0): the origin


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_threshold_as_torchs_at_signed_zero_and_nan(torch, dtype):
    """x <= threshold ? value : x: -0.0 is at a threshold of 0 (value's sign then), nan passes with
    a gradient of 1; in place through F.threshold(inplace=True) and threshold_; integers take the
    number cast to their dtype."""
    floats = dtype != "int64"
    values = [-0.0, 0.0, math.nan, -1.0, 2.0, 0.5, 1.0, math.inf] if floats else [-3, 0, 1, 2, 5]
    settings = [(0.0, -0.0), (-0.0, 5.0), (1.0, math.nan), (0.5, -2.5)] if floats else [(1, 0), (2, 0.5), (-4, 9)]
    for th, value in settings:
        results = []
        for lib in (plugtorch, torch):
            F = lib.nn.functional
            x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=floats)
            out = [F.threshold(x, th, value), lib.threshold(x, th, value)]
            y = x.detach().clone()
            F.threshold(y, th, value, inplace=True)
            z = x.detach().clone()
            lib.threshold_(z, th, value)
            out += [y, z]
            if floats:
                out.append(lib.autograd.grad((out[0] * 1.5).sum(), x)[0])
            results.append([t.detach().numpy() for t in out])
        for ours, theirs in zip(*results):
            assert _agree(ours, theirs, dtype).all(), (th, value, ours, theirs)
