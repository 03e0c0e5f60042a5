"""Forward-mode AD (plugtorch.autograd.forward_ad) against torch.autograd.forward_ad and finite differences."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import plugtorch as pt
import plugtorch.autograd.forward_ad as fw
import plugtorch.nn.functional as F
from plugtorch import library
from plugtorch.core.optable import MODES

RNG = np.random.default_rng(0)


def randn(*shape):
    return RNG.standard_normal(shape)


def both(a):
    return pt.tensor(a), torch.tensor(a)


def forward_both(f_pt, f_torch, primals, tangents):
    """(plugtorch's (value, tangent), torch's) of f at primals (NumPy arrays) along tangents."""
    with fw.dual_level():
        out = f_pt(*[fw.make_dual(pt.tensor(p), pt.tensor(t)) for p, t in zip(primals, tangents)])
        got = fw.unpack_dual(out)
    with tfw.dual_level():
        out = f_torch(*[tfw.make_dual(torch.tensor(p), torch.tensor(t)) for p, t in zip(primals, tangents)])
        want = tfw.unpack_dual(out)
    return got, want


def assert_same(got, want, tol=1e-10):
    np.testing.assert_allclose(got.primal.detach().numpy(), want.primal.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(got.tangent.detach().numpy(), want.tangent.detach().numpy(), rtol=tol, atol=tol)


# -- the API --------------------------------------------------------------------------------------

def test_make_dual_and_unpack_dual_as_torch():
    x, t = pt.randn(3, dtype=pt.float64), pt.ones(3, dtype=pt.float64)
    with fw.dual_level() as level:
        assert level == 0 and MODES.on == 1
        d = fw.make_dual(x, t)
        unpacked = fw.unpack_dual(d)
        assert isinstance(unpacked, fw.UnpackedDualTensor) and unpacked._fields == ("primal", "tangent")
        primal, tangent = unpacked
        assert primal is not d and fw.unpack_dual(primal).tangent is None
        assert primal.tolist() == x.tolist() and tangent.tolist() == t.tolist()
        assert fw.unpack_dual(x) == (x, None)  # a plain tensor: itself and no tangent
        assert not d.requires_grad
        assert fw.unpack_dual(d, level=0).tangent is not None
        t.add_(1)  # the dual keeps its own tangent
        assert fw.unpack_dual(d).tangent.tolist() == [1.0, 1.0, 1.0]
    assert MODES.on == 0
    assert fw.unpack_dual(d).tangent is None  # the level is gone, and the tangents with it


@pytest.mark.parametrize("case", ["size", "int tangent", "int primal", "no level", "nested", "exit twice"])
def test_errors_are_torchs(case):
    def run(m, fwad):
        x = m.randn(3)
        if case == "no level":
            return fwad.make_dual(x, m.ones(3))
        if case == "exit twice":
            fwad.enter_dual_level()
            fwad.exit_dual_level()
            return fwad.exit_dual_level(level=0)
        with fwad.dual_level():
            if case == "size":
                fwad.make_dual(x, m.ones(4))
            elif case == "int tangent":
                fwad.make_dual(x, m.ones(3, dtype=m.int32))
            elif case == "int primal":
                fwad.make_dual(m.ones(3, dtype=m.int32), m.ones(3))
            else:
                with fwad.dual_level():
                    pass
    with pytest.raises(Exception) as want:
        run(torch, tfw)
    with pytest.raises(type(want.value)) as got:
        run(pt, fw)
    assert str(got.value).replace("plugtorch.", "torch.") == str(want.value)
    assert MODES.on == 0


def test_no_grad_keeps_tangents_and_integer_results_have_none():
    x = pt.tensor([0.5, -1.0, 2.0], dtype=pt.float64)
    with fw.dual_level(), pt.no_grad():
        d = fw.make_dual(x, pt.ones(3, dtype=pt.float64))
        y = d.exp()
        assert not y.requires_grad
        assert pt.allclose(fw.unpack_dual(y).tangent, x.exp())
        assert fw.unpack_dual(d.argmax()).tangent is None and fw.unpack_dual(d > 0).tangent is None
        assert fw.unpack_dual(d.sign()).tangent.tolist() == [0.0, 0.0, 0.0]  # torch's zeros


def test_forward_and_reverse_mode_mix():
    x = pt.tensor([0.3, -0.7], dtype=pt.float64, requires_grad=True)
    with fw.dual_level():
        d = fw.make_dual(x, pt.tensor([1.0, 0.0], dtype=pt.float64))
        y = (d.sin() * d).sum()
        jt = fw.unpack_dual(y).tangent
    y.backward()
    xd = x.detach()
    assert pt.allclose(x.grad, xd.sin() + xd * xd.cos())
    assert pt.allclose(jt, (xd.sin() + xd * xd.cos())[0])


# -- models against torch ---------------------------------------------------------------------------

def test_mlp_against_torch():
    x, w1, b1, w2, b2 = randn(4, 5), randn(6, 5), randn(6), randn(3, 6), randn(3)
    tangents = [randn(*a.shape) for a in (x, w1, b1, w2, b2)]

    def mlp(m, fn):
        def f(x, w1, b1, w2, b2):
            h = fn.gelu(fn.linear(x, w1, b1))
            h = m.tanh(h) + fn.relu(h) * m.sigmoid(h) - fn.silu(h) / 4
            return fn.softplus(fn.linear(h, w2, b2)).mean(0)
        return f
    got, want = forward_both(mlp(pt, F), mlp(torch, torch.nn.functional), (x, w1, b1, w2, b2), tangents)
    assert_same(got, want)


def test_conv_net_against_torch():
    x, w, b, w2 = randn(2, 3, 7, 7), randn(4, 3, 3, 3), randn(4), randn(5, 36)
    tangents = [randn(*a.shape) for a in (x, w, b, w2)]

    def net(fn):
        def f(x, w, b, w2):
            h = fn.max_pool2d(fn.elu(fn.conv2d(x, w, b, padding=1)), 2)
            h = fn.avg_pool2d(h, 1) + fn.conv2d(h, w[:, :, :1, :1].sum(1, keepdim=True).transpose(0, 1)[:, :4])
            return fn.linear(h.flatten(1), w2)
        return f
    got, want = forward_both(net(F), net(torch.nn.functional), (x, w, b, w2), tangents)
    assert_same(got, want)


def test_softmax_cross_entropy_against_torch():
    logits, target = randn(5, 4), RNG.integers(0, 4, 5)

    def loss(fn, tt):
        def f(z):
            p = fn.softmax(z, 1)
            return fn.cross_entropy(z, tt) + (p * fn.log_softmax(z, 1)).sum() + fn.nll_loss(fn.log_softmax(z, 1), tt)
        return f
    got, want = forward_both(loss(F, pt.tensor(target)), loss(torch.nn.functional, torch.tensor(target)),
                             (logits,), (randn(5, 4),))
    assert_same(got, want)


def test_layer_norm_against_torch():
    x, w, b = randn(3, 4, 6), randn(6), randn(6)
    tangents = [randn(*a.shape) for a in (x, w, b)]

    def f(fn):
        return lambda x, w, b: fn.layer_norm(x, (6,), w, b).pow(2).sum(-1)
    got, want = forward_both(f(F), f(torch.nn.functional), (x, w, b), tangents)
    assert_same(got, want)


def test_shape_ops_joins_and_indexing_against_torch():
    a, b = randn(3, 4), randn(3, 4)

    def f(m):
        def g(a, b):
            c = m.cat([a, b.t().reshape(3, 4)], 0).unsqueeze(0).expand(2, 6, 4)
            s = m.stack([a, b], 1).permute(2, 0, 1)[1:, :, ::-1 if m is np else 1]
            return c.sum((0, 2)).mean() + m.where(a > 0, a, b * 2).sum() + s.sum() + a[[0, 2], 1:].sum()
        return g
    got, want = forward_both(f(pt), f(torch), (a, b), (randn(3, 4), randn(3, 4)))
    assert_same(got, want)


# -- how each op's tangent is found ---------------------------------------------------------------

@pytest.mark.parametrize("name,fn", [
    ("conv1d: via decomposition", lambda m, x: m.nn.functional.conv1d(x.reshape(1, 2, 3), x.reshape(3, 2, 1))),
    ("hardtanh: via decomposition", lambda m, x: m.nn.functional.hardtanh(x * 2)),
    ("cumsum: via vjp", lambda m, x: m.cumsum(x, 0) * x),
    ("logsumexp: via vjp", lambda m, x: m.logsumexp(x.reshape(2, 3), 1)),
    ("prod: via vjp", lambda m, x: x.prod()),
])
def test_fallbacks_against_torch(name, fn):
    x, t = randn(6), randn(6)
    got, want = forward_both(lambda x: fn(pt, x), lambda x: fn(torch, x), (x,), (t,))
    assert_same(got, want)


@pytest.fixture
def ns():
    name = "fwadtest"
    yield name
    library._LIBRARIES.pop(name, None)
    if name in pt.get_registry().plugin_names():
        pt.unregister_plugin(name)


def test_a_plugin_op_gets_tangents_from_its_reverse_rule_or_says_it_has_none(ns):
    @library.custom_op(f"{ns}::cube", mutates_args=())
    def cube(x: pt.Tensor) -> pt.Tensor:
        return x * x * x

    @library.custom_op(f"{ns}::plain", mutates_args=())
    def plain(x: pt.Tensor) -> pt.Tensor:
        return x * 2
    cube.register_autograd(lambda ctx, g: g * 3 * ctx.inputs["x"] ** 2)
    x = pt.tensor([1.0, -2.0], dtype=pt.float64)
    with fw.dual_level():
        d = fw.make_dual(x, pt.tensor([1.0, 0.5], dtype=pt.float64))
        assert fw.unpack_dual(cube(d)).tangent.tolist() == [3.0, 6.0]
        with pytest.raises(RuntimeError, match=f"forward-mode AD is not implemented for op '{ns}::plain': it has "
                                               "no jvp and no derivative"):
            plain(d)
        assert fw.unpack_dual(plain(x)).tangent is None  # no tangent in, nothing to differentiate


# -- in-place ops -------------------------------------------------------------------------------------

@pytest.mark.parametrize("requires_grad", [False, True])
def test_in_place_ops_move_tangents_as_torch(requires_grad):
    p, t = randn(4), randn(4)

    def f(m, fwad, d):
        y = d.clone()
        y.mul_(d)                 # an in-place op on a tensor with a tangent
        z = m.zeros(4, dtype=m.float64)
        z.add_(y)                 # one without a tangent gets one
        z[1:3] = d[:2] * 3        # x[key] = value writes the value's tangent in
        if not requires_grad:  # (plugtorch's autograd does not write an in-place op on a view of a
            # tensor in the graph through to it, with or without forward AD)
            v = z.view(2, 2)
            v[0].sub_(d[2:])      # through a view: the base's tangent follows
        w = d.clone()
        w.zero_()                 # a constant: a zero tangent
        return z * 2 + w + fwad.unpack_dual(z).tangent.sum()
    x, tx = pt.tensor(p, requires_grad=requires_grad), torch.tensor(p, requires_grad=requires_grad)
    with fw.dual_level():
        got = fw.unpack_dual(f(pt, fw, fw.make_dual(x, pt.tensor(t))))
    with tfw.dual_level():
        want = tfw.unpack_dual(f(torch, tfw, tfw.make_dual(tx, torch.tensor(t))))
    assert_same(got, want)
    if requires_grad:  # the graph the in-place ops kept gives torch's gradient too
        got.primal.sum().backward()
        want.primal.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


def test_tangents_are_finite_differences_of_a_composite():
    x, t = randn(3, 3), randn(3, 3)

    def f(a):
        return F.normalize(a @ a.t() + a.abs().sqrt(), dim=1).cumprod(1).std()
    with fw.dual_level():
        jt = fw.unpack_dual(f(fw.make_dual(pt.tensor(x), pt.tensor(t)))).tangent.item()
    eps = 1e-6
    fd = (f(pt.tensor(x + eps * t)) - f(pt.tensor(x - eps * t))).item() / (2 * eps)
    assert abs(jt - fd) < 1e-6 * max(1.0, abs(fd))


def test_complex_tensors_are_refused_naming_the_op():
    x = pt.randn(3, 2, dtype=pt.float64)
    with fw.dual_level():
        d = fw.make_dual(x, pt.ones(3, 2, dtype=pt.float64))
        with pytest.raises(NotImplementedError, match="complex tensors is not supported: op 'view_as_complex'"):
            pt.view_as_complex(d)
        with pytest.raises(NotImplementedError, match=r"make_dual\(\) of a plugtorch.complex128 primal"):
            fw.make_dual(pt.view_as_complex(x), pt.view_as_complex(x))


def _cube(m):
    class Cube(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            ctx.k = k
            return x ** 3 * k, x.detach() * 0  # the second output: no path from x in its ops

        @staticmethod
        def backward(ctx, g, _):
            (x,) = ctx.saved_tensors
            return 3 * ctx.k * x ** 2 * g, None

    class CubeJvp(Cube):
        @staticmethod
        def jvp(ctx, t, _):
            (x,) = ctx.saved_tensors
            return 3 * ctx.k * x ** 2 * t, t * 2  # a jvp may say anything: it is what the outputs get
    return Cube, CubeJvp


def test_a_custom_function_gives_tangents_through_its_jvp_as_torch():
    x, t = randn(3), randn(3)
    results = []
    for m, fwad in ((pt, fw), (torch, tfw)):
        cube, cube_jvp = _cube(m)
        with fwad.dual_level():
            d = fwad.make_dual(m.tensor(x), m.tensor(t))
            with pytest.raises(NotImplementedError) as missing:
                cube.apply(d, 2.0)
            results.append((str(missing.value), [fwad.unpack_dual(o) for o in cube_jvp.apply(d, 2.0)]))
    (got_msg, got), (want_msg, want) = results
    assert got_msg == want_msg
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_functions_carry_tangents(reentrant):
    w, x, t = randn(4, 4), randn(2, 4), randn(2, 4)

    def block(m, fn):
        return lambda h: fn.gelu(h @ m.tensor(w)).tanh()
    with fw.dual_level():
        out = pt.utils.checkpoint.checkpoint(block(pt, F), fw.make_dual(pt.tensor(x), pt.tensor(t)),
                                             use_reentrant=reentrant)
        got = fw.unpack_dual(out)
    with tfw.dual_level():
        want = tfw.unpack_dual(block(torch, torch.nn.functional)(tfw.make_dual(torch.tensor(x), torch.tensor(t))))
    assert_same(got, want)


def test_a_transformer_layer_against_finite_differences():
    # torch 2.13's CPU attention kernel has no forward derivative, so finite differences are the oracle
    pt.manual_seed(0)
    layer = pt.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double().eval()
    x, t = randn(2, 3, 8), randn(2, 3, 8)
    with fw.dual_level(), pt.no_grad():
        jt = fw.unpack_dual(layer(fw.make_dual(pt.tensor(x), pt.tensor(t)))).tangent.numpy()
    with pt.no_grad():
        fd = ((layer(pt.tensor(x + 1e-6 * t)) - layer(pt.tensor(x - 1e-6 * t))) / 2e-6).numpy()
    np.testing.assert_allclose(jt, fd, rtol=1e-5, atol=1e-7)
