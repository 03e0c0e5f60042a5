"""plugtorch.func's reverse transforms and module helpers against torch.func: grad, grad_and_value,
vjp, jacrev, their compositions with each other and with vmap (per-example gradients),
functional_call and stack_module_state."""
import numpy as np
import pytest
import torch
import torch.func as tf

import plugtorch as pt
import plugtorch.func as F

rng = np.random.default_rng(1)


def arr(*shape):
    return rng.standard_normal(shape)


def close(got, want, atol=1e-9):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            close(g, w, atol)
        return
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            close(got[k], want[k], atol)
        return
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=atol, rtol=1e-8)


def f_scalar(m):
    return lambda x, y: (m.sin(x) * y).sum() + (x * x).mean()


def test_grad_argnums_has_aux_and_value():
    x, y = arr(3, 2), arr(2)
    P, T = (pt.tensor(x), pt.tensor(y)), (torch.tensor(x), torch.tensor(y))
    close(F.grad(f_scalar(pt))(*P), tf.grad(f_scalar(torch))(*T))
    close(F.grad(f_scalar(pt), argnums=(0, 1))(*P), tf.grad(f_scalar(torch), argnums=(0, 1))(*T))
    close(F.grad(f_scalar(pt), argnums=-1)(*P), tf.grad(f_scalar(torch), argnums=-1)(*T))
    g, v = F.grad_and_value(f_scalar(pt), argnums=1)(*P)
    tg, tv = tf.grad_and_value(f_scalar(torch), argnums=1)(*T)
    close((g, v), (tg, tv))

    def with_aux(m):
        return lambda x: ((x ** 3).sum(), {"double": x * 2})
    g, aux = F.grad(with_aux(pt), has_aux=True)(P[0])
    tg, taux = tf.grad(with_aux(torch), has_aux=True)(T[0])
    close((g, aux), (tg, taux))
    # at top level the results are plain values, as torch's
    assert not g.requires_grad and not v.requires_grad


def test_grad_of_a_pytree_input():
    w = {"a": arr(3), "b": [arr(2, 3), arr(2)]}
    P = {"a": pt.tensor(w["a"]), "b": [pt.tensor(w["b"][0]), pt.tensor(w["b"][1])]}
    T = {"a": torch.tensor(w["a"]), "b": [torch.tensor(w["b"][0]), torch.tensor(w["b"][1])]}

    def f(m):
        return lambda p: m.tanh(p["b"][0] @ p["a"] + p["b"][1]).sum()
    close(F.grad(f(pt))(P), tf.grad(f(torch))(T))


def test_grad_of_grad_and_jacrev_of_jacrev():
    x = arr(4)
    p, t = pt.tensor(x), torch.tensor(x)

    def f(m):
        return lambda x: (m.sin(x) * x.sum() + x ** 3).sum()
    close(F.grad(lambda a: F.grad(f(pt))(a).sum())(p), tf.grad(lambda a: tf.grad(f(torch))(a).sum())(t))

    def g(m):
        return lambda x: m.sin(x) * x.sum()
    close(F.jacrev(F.jacrev(g(pt)))(p), tf.jacrev(tf.jacrev(g(torch)))(t))


def test_jacrev_of_a_few_functions():
    x, w = arr(3, 2), arr(4, 2)
    (px, tx), (pw, tw) = (pt.tensor(x), torch.tensor(x)), (pt.tensor(w), torch.tensor(w))

    def lin(m):
        return lambda x, w: m.tanh(x @ w.t())
    close(F.jacrev(lin(pt))(px, pw), tf.jacrev(lin(torch))(tx, tw))
    close(F.jacrev(lin(pt), argnums=(0, 1))(px, pw), tf.jacrev(lin(torch), argnums=(0, 1))(tx, tw))
    close(F.jacrev(lin(pt), argnums=1, chunk_size=5)(px, pw), tf.jacrev(lin(torch), argnums=1, chunk_size=5)(tx, tw))

    def two_outputs(m):
        return lambda x: (m.softmax(x, -1), x.sum(0))
    close(F.jacrev(two_outputs(pt))(px), tf.jacrev(two_outputs(torch))(tx))

    def with_aux(m):
        return lambda x: (x.exp().sum(1), x.mean())
    close(F.jacrev(with_aux(pt), has_aux=True)(px), tf.jacrev(with_aux(torch), has_aux=True)(tx))


def test_vjp_and_a_vmapped_vjp_fn():
    x, ct = arr(3, 2), arr(4, 3)
    px, tx = pt.tensor(x), torch.tensor(x)

    def f(m):
        return lambda x: m.cumsum(m.sin(x), 0) @ m.ones(2, 3, dtype=m.float64)
    out, fn = F.vjp(f(pt), px)
    tout, tfn = tf.vjp(f(torch), tx)
    close(out, tout)
    close(fn(pt.tensor(ct[:3])), tfn(torch.tensor(ct[:3])))
    cts = arr(5, 3, 3)
    close(F.vmap(fn)(pt.tensor(cts)), tf.vmap(tfn)(torch.tensor(cts)))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn(pt.zeros(2, 2, dtype=pt.float64))


def test_vmap_of_jacrev_and_of_grad_of_grad():
    x = arr(5, 3)
    p, t = pt.tensor(x), torch.tensor(x)

    def g(m):
        return lambda v: m.sin(v) * (v * v).sum()
    close(F.vmap(F.jacrev(g(pt)))(p), tf.vmap(tf.jacrev(g(torch)))(t))

    def s(m):
        return lambda v: (m.sin(v) * v).sum()
    close(F.vmap(F.grad(lambda v: F.grad(s(pt))(v).sum()))(p),
          tf.vmap(tf.grad(lambda v: tf.grad(s(torch))(v).sum()))(t))


def make_mlps():
    net = pt.nn.Sequential(pt.nn.Linear(4, 8), pt.nn.Tanh(), pt.nn.Linear(8, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    net = net.double()
    with torch.no_grad():
        for p, q in zip(net.parameters(), ref.parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    return net, ref


def test_per_example_gradients_of_an_mlp():
    net, ref = make_mlps()
    x, y = arr(6, 4), rng.integers(0, 3, 6)

    def loss(m, model):
        def f(params, xb, yb):
            logits = F.functional_call(model, params, (xb.unsqueeze(0),)) if m is pt else \
                tf.functional_call(model, params, (xb.unsqueeze(0),))
            return m.nn.functional.cross_entropy(logits, yb.unsqueeze(0))
        return f
    params = {k: v.detach() for k, v in net.named_parameters()}
    tparams = {k: v.detach() for k, v in ref.named_parameters()}
    got = F.vmap(F.grad(loss(pt, net)), in_dims=(None, 0, 0))(params, pt.tensor(x), pt.tensor(y))
    want = tf.vmap(tf.grad(loss(torch, ref)), in_dims=(None, 0, 0))(tparams, torch.tensor(x), torch.tensor(y))
    close(got, want)
    assert all(p.grad is None for p in net.parameters())  # the module's own parameters are untouched
    # the mean of the per-example gradients is the batch gradient
    batch = pt.nn.functional.cross_entropy(net(pt.tensor(x)), pt.tensor(y))
    batch.backward()
    for k, p in net.named_parameters():
        np.testing.assert_allclose(got[k].mean(0).numpy(), p.grad.numpy(), atol=1e-12)


def test_per_example_gradients_of_a_conv_layer():
    x, w, b = arr(4, 2, 5, 5), arr(3, 2, 3, 3), arr(3)
    P = [pt.tensor(v) for v in (w, b, x)]
    T = [torch.tensor(v) for v in (w, b, x)]

    def loss(m):
        return lambda w, b, x: (m.nn.functional.conv2d(x.unsqueeze(0), w, b, padding=1) ** 2).mean()
    close(F.vmap(F.grad(loss(pt), argnums=(0, 1)), in_dims=(None, None, 0))(*P),
          tf.vmap(tf.grad(loss(torch), argnums=(0, 1)), in_dims=(None, None, 0))(*T))


def test_functional_call_swaps_and_restores():
    net, _ = make_mlps()
    before = {k: v for k, v in net.named_parameters()}
    zeros = {k: pt.zeros_like(v) for k, v in before.items()}
    out = F.functional_call(net, zeros, pt.randn(2, 4, dtype=pt.float64))
    assert pt.allclose(out, pt.zeros(2, 3, dtype=pt.float64))
    assert all(v is before[k] for k, v in net.named_parameters())
    with pytest.raises(RuntimeError):
        F.functional_call(net, zeros, (pt.randn(2, 5, dtype=pt.float64),))  # the wrong width: the call raises
    assert all(v is before[k] for k, v in net.named_parameters())
    # part of the parameters, in several dicts; the rest are the module's own
    w = {"0.weight": zeros["0.weight"]}
    b = {"0.bias": pt.ones(8, dtype=pt.float64)}
    x = pt.randn(2, 4, dtype=pt.float64)
    want = net[2](net[1](pt.ones(2, 8, dtype=pt.float64)))
    assert pt.allclose(F.functional_call(net, (w, b), x), want)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        F.functional_call(net, (w, w), x)
    with pytest.raises(RuntimeError, match=r"Error\(s\) in reparametrizing for Sequential:\n\tMissing key\(s\)"):
        F.functional_call(net, w, x, strict=True)


def test_functional_call_ties_shared_weights():
    first, second = pt.nn.Linear(3, 3, bias=False), pt.nn.Linear(3, 3, bias=False)
    second.weight = first.weight  # one parameter under two names
    net = pt.nn.Sequential(first, second)
    new, x = pt.eye(3) * 2, pt.ones(1, 3)
    assert pt.allclose(F.functional_call(net, {"0.weight": new}, x), x * 4)
    untied = F.functional_call(net, {"0.weight": new}, x, tie_weights=False)
    assert pt.allclose(untied, (x * 2) @ first.weight.detach().t())
    with pytest.raises(ValueError, match="which are tied"):
        F.functional_call(net, {"0.weight": new, "1.weight": new * 2}, x)


def test_an_ensemble_through_stack_module_state():
    nets, refs = zip(*[make_mlps() for _ in range(3)])
    params, buffers = F.stack_module_state(list(nets))
    tparams, tbuffers = tf.stack_module_state(list(refs))
    close(params, tparams)
    assert params["0.weight"].requires_grad and params["0.weight"].is_leaf
    x = arr(5, 4)

    def run(m, model):
        call = F.functional_call if m is pt else tf.functional_call
        return lambda p, b, x: call(model, (p, b), (x,))
    close(F.vmap(run(pt, nets[0]), in_dims=(0, 0, None))(params, buffers, pt.tensor(x)),
          tf.vmap(run(torch, refs[0]), in_dims=(0, 0, None))(tparams, tbuffers, torch.tensor(x)))
    with pytest.raises(RuntimeError, match="Expected at least one model"):
        F.stack_module_state([])
    with pytest.raises(RuntimeError, match="same class"):
        F.stack_module_state([nets[0], pt.nn.Linear(2, 2)])


def test_errors_as_torch():
    x = pt.randn(3, dtype=pt.float64)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"):
        F.grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a Tensor"):
        F.grad(lambda a: 1.0)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        F.grad(lambda a: a.sum(), argnums=2)(x)
    with pytest.raises(RuntimeError, match="output of function f should be a tuple"):
        F.grad(lambda a: a.sum(), has_aux=True)(x)
    with pytest.raises(ValueError, match="jacrev: `chunk_size` should be greater than 0."):
        F.jacrev(lambda a: a, chunk_size=0)


def test_autograd_on_batched_tensors_inside_vmap_is_refused():
    def backward_inside(x):
        x = x.detach().requires_grad_()
        (x * x).sum().backward()
        return x

    def grad_inside(x):
        x = x.detach().requires_grad_()
        return pt.autograd.grad((x * x).sum(), x)[0]
    for fn in (backward_inside, grad_inside):
        with pytest.raises(RuntimeError, match="differentiate inside vmap with plugtorch.func.grad"):
            F.vmap(fn)(pt.randn(3, 2))


def test_nested_vmaps_around_the_reverse_transforms():
    x, w = arr(2, 3, 4), arr(4)

    def f(m):
        return lambda w, x: (m.sin(x * w) * w).sum()
    for argnums in (0, 1):  # the unmapped weight, and the doubly mapped input
        got = F.vmap(F.vmap(F.grad(f(pt), argnums), in_dims=(None, 0)), in_dims=(None, 0))(pt.tensor(w), pt.tensor(x))
        want = tf.vmap(tf.vmap(tf.grad(f(torch), argnums), in_dims=(None, 0)), in_dims=(None, 0))(
            torch.tensor(w), torch.tensor(x))
        close(got, want)
    close(F.grad(lambda w: F.vmap(f(pt), in_dims=(None, 0))(w, pt.tensor(x[0])).sum())(pt.tensor(w)),
          tf.grad(lambda w: tf.vmap(f(torch), in_dims=(None, 0))(w, torch.tensor(x[0])).sum())(torch.tensor(w)))
    close(F.vmap(F.vmap(F.jacrev(lambda v: pt.sin(v) * v.sum())))(pt.tensor(x)),
          tf.vmap(tf.vmap(tf.jacrev(lambda v: torch.sin(v) * v.sum())))(torch.tensor(x)))

    def h(m):
        return lambda v: m.cumsum(v, 0) * 2
    _, fn = F.vjp(h(pt), pt.tensor(w))
    _, tfn = tf.vjp(h(torch), torch.tensor(w))
    close(F.vmap(F.vmap(fn))(pt.tensor(x)), tf.vmap(tf.vmap(tfn))(torch.tensor(x)))
    close(F.vmap(lambda v, c: F.vjp(h(pt), v)[1](c))(pt.tensor(x[0]), pt.tensor(x[1])),
          tf.vmap(lambda v, c: tf.vjp(h(torch), v)[1](c))(torch.tensor(x[0]), torch.tensor(x[1])))


def test_gradients_through_an_assignment_under_vmap():
    x, v = arr(3, 4, 2), arr(3, 2)

    def loss(m):
        def f(a, b):
            y = a * 2.0
            y[0] = b * 3
            return (y ** 2).sum()
        return f
    close(F.vmap(F.grad(loss(pt), argnums=(0, 1)))(pt.tensor(x), pt.tensor(v)),
          tf.vmap(tf.grad(loss(torch), argnums=(0, 1)))(torch.tensor(x), torch.tensor(v)))


def test_jacrev_of_a_small_conv_net():
    x, w, b = arr(2, 2, 4, 4), arr(3, 2, 3, 3), arr(3)

    def net(m):
        nnf = m.nn.functional
        return lambda x, w: nnf.max_pool2d(nnf.relu(nnf.conv2d(x, w, m.tensor(b), padding=1)), 2).sum((2, 3))
    P, T = (pt.tensor(x), pt.tensor(w)), (torch.tensor(x), torch.tensor(w))
    close(F.jacrev(net(pt), argnums=(0, 1))(*P), tf.jacrev(net(torch), argnums=(0, 1))(*T))


def test_jacrev_through_indexing_and_layer_norm_runs_batched():
    from plugtorch.func import _vmap
    x = arr(4, 3)

    def f(m):
        return lambda a: m.nn.functional.layer_norm(a[1:, :2] * a[0, 2], (2,))
    derivatives = {"index_put_zeros", "layer_norm_backward"}
    _vmap.LOOPED.difference_update(derivatives)
    close(F.jacrev(f(pt))(pt.tensor(x)), tf.jacrev(f(torch))(torch.tensor(x)))
    assert not derivatives & _vmap.LOOPED
