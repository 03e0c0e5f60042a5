"""plugtorch.func.vmap against torch.func.vmap: in_dims/out_dims, pytrees, nesting, randomness,
chunks, the per-example loop, and the errors torch raises."""
import warnings

import numpy as np
import pytest
import torch
import torch.func as tf

import plugtorch as pt
import plugtorch.func as F

rng = np.random.default_rng(0)


def arr(*shape):
    return rng.standard_normal(shape)


def both(a):
    return pt.tensor(a), torch.tensor(a)


def close(got, want, atol=1e-10):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w, atol)
        return
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            close(got[k], want[k], atol)
        return
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=atol, rtol=1e-9)


def test_the_function_sees_one_example():
    seen = []

    def f(x):
        seen.append((tuple(x.shape), x.dim(), x.ndim, len(x), x.numel(), x.size(-1)))
        return x.sum(0)
    out = F.vmap(f)(pt.zeros(5, 3, 2))
    assert seen == [((3, 2), 2, 2, 3, 6, 2)]
    assert tuple(out.shape) == (5, 2)


@pytest.mark.parametrize("in_dims,out_dims", [(0, 0), (1, 0), (-1, 1), (2, -1)])
def test_in_dims_and_out_dims(in_dims, out_dims):
    a = arr(3, 4, 5)
    p, t = both(a)

    def f(m):
        return lambda x: (m.softmax(x, -1) * x).sum(0) + x.mean()
    close(F.vmap(f(pt), in_dims, out_dims)(p), tf.vmap(f(torch), in_dims, out_dims)(t))


def test_unmapped_arguments_pytrees_and_kwargs():
    x, w, b = arr(6, 3), arr(3, 2), arr(2)
    (px, tx), (pw, tw), (pb, tb) = both(x), both(w), both(b)

    def f(m):
        def g(inp, params, *, scale):
            return m.tanh(inp["x"] @ params[0] + params[1]) * scale
        return g
    got = F.vmap(f(pt), in_dims=({"x": 0}, (None, None)))({"x": px}, (pw, pb), scale=2.0)
    want = tf.vmap(f(torch), in_dims=({"x": 0}, (None, None)))({"x": tx}, (tw, tb), scale=2.0)
    close(got, want)


def test_several_outputs_with_their_own_out_dims_and_an_unmapped_output():
    a = arr(4, 3)
    p, t = both(a)

    def f(m):
        return lambda x: (x * 2, m.ones(2, dtype=m.float64), {"s": x.sum()})
    close(F.vmap(f(pt), out_dims=(1, 0, {"s": 0}))(p), tf.vmap(f(torch), out_dims=(1, 0, {"s": 0}))(t))


def test_nested_vmap_is_a_batched_matrix_product():
    a, b = arr(3, 4, 5), arr(5, 2)
    (pa, ta), (pb, tb) = both(a), both(b)

    def dot(m):
        return lambda u, v: (u * v).sum()
    inner = F.vmap(F.vmap(dot(pt), in_dims=(None, 1)), in_dims=(0, None))
    want = tf.vmap(tf.vmap(dot(torch), in_dims=(None, 1)), in_dims=(0, None))
    got = F.vmap(inner, in_dims=(0, None))(pa, pb)
    close(got, tf.vmap(want, in_dims=(0, None))(ta, tb))
    close(got, torch.tensor(a) @ torch.tensor(b))


def test_an_mlp_with_a_loss_under_vmap():
    x, y = arr(5, 7, 4), rng.integers(0, 3, (5, 7))
    w1, b1, w2 = arr(6, 4), arr(6), arr(3, 6)
    P = [pt.tensor(v) for v in (x, y, w1, b1, w2)]
    T = [torch.tensor(v) for v in (x, y, w1, b1, w2)]

    def loss(m):
        nnf = m.nn.functional

        def f(x, y, w1, b1, w2):
            h = nnf.relu(nnf.linear(x, w1, b1))
            logits = nnf.linear(h, w2)
            return nnf.cross_entropy(logits, y) + nnf.mse_loss(m.softmax(logits, 1), nnf.one_hot(y, 3).to(x.dtype))
        return f
    dims = (0, 0, None, None, None)
    close(F.vmap(loss(pt), dims)(*P), tf.vmap(loss(torch), dims)(*T))


@pytest.mark.parametrize("per_example_weight", [False, True])
def test_conv2d_under_vmap(per_example_weight):
    x, w, b = arr(3, 2, 2, 6, 6), arr(3, 4, 2, 3, 3), arr(4)
    (px, tx), (pw, tw), (pb, tb) = both(x), both(w), both(b)
    if not per_example_weight:
        pw, tw = pw[0], tw[0]
    dims = (0, 0 if per_example_weight else None, None)

    def f(m):
        return lambda x, w, b: m.nn.functional.conv2d(x, w, b, padding=1, stride=2)
    close(F.vmap(f(pt), dims)(px, pw, pb), tf.vmap(f(torch), dims)(tx, tw, tb))


def test_chunk_size_gives_the_same_result():
    a = arr(7, 3)
    p, t = both(a)

    def f(m):
        return lambda x: (m.cumsum(x, 0) * x).sum()
    want = tf.vmap(f(torch))(t)
    close(F.vmap(f(pt), chunk_size=3)(p), want)
    close(F.vmap(f(pt), chunk_size=100)(p), want)


def test_an_op_without_a_rule_runs_per_example_and_warns():
    from plugtorch.func import _batching, _vmap
    assert "roll" not in _batching.RULES
    _vmap.LOOPED.discard("roll")
    a = arr(4, 5)
    p, t = both(a)
    with pytest.warns(UserWarning, match="batching rule for roll"):
        got = F.vmap(lambda x: pt.roll(x, 2))(p)
    close(got, tf.vmap(lambda x: torch.roll(x, 2))(t))


def test_in_place_ops_on_a_batched_tensor():
    a = arr(4, 3)
    p, t = both(a)

    def f(x):
        y = x * 1.0
        y.add_(1.5)
        y.mul_(x)
        return y
    close(F.vmap(f)(p), tf.vmap(f)(t))


DATA_DEPENDENT = "data-dependent control flow"


@pytest.mark.parametrize("read", [
    lambda x: bool(x.sum() > 0), lambda x: x.tolist(), lambda x: x.numpy(), lambda x: float(x.sum()),
    lambda x: int(x[0] > 0), lambda x: np.asarray(x),
])
def test_reading_values_raises_torchs_error(read):
    with pytest.raises(RuntimeError, match=DATA_DEPENDENT):
        F.vmap(read)(pt.randn(3, 2))
    with pytest.raises(RuntimeError, match="calling .item"):
        F.vmap(lambda x: x.sum().item())(pt.randn(3, 2))


def test_batched_tensor_repr_names_its_level():
    seen = []
    F.vmap(lambda x: seen.append(repr(x)) or x)(pt.zeros(2, 3))
    assert seen[0].startswith("BatchedTensor(lvl=")


def test_errors_as_torch():
    x, y = pt.randn(3, 2), pt.randn(4, 2)
    with pytest.raises(ValueError, match=r"vmap: Expected all tensors to have the same size in the mapped "
                                         r"dimension, got sizes \[3, 4\] for the mapped dimension"):
        F.vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError, match=r"Got in_dim=2 for some input, but that input is a Tensor of "
                                         r"dimensionality 2 so expected in_dim to satisfy -2 <= in_dim < 2"):
        F.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        F.vmap(lambda a, b: a, in_dims=(0, 0))(x, 1.0)
    with pytest.raises(ValueError, match="got no inputs"):
        F.vmap(lambda: 1)()
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        F.vmap(lambda a: a, out_dims=None)(x)
    with pytest.raises(ValueError, match="must only return Tensors"):
        F.vmap(lambda a: 1.0)(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        F.vmap(lambda a: a, randomness="sometimes")
    with pytest.raises(ValueError, match="Expected at least one Tensor to vmap over"):
        F.vmap(lambda a: a, in_dims=None)(x)


def test_a_batched_tensor_that_escapes_is_refused():
    kept = []
    F.vmap(lambda a: kept.append(a) or a)(pt.randn(3, 2))
    with pytest.raises(RuntimeError, match="vmap that has already returned"):
        F.vmap(lambda b: b + kept[0])(pt.randn(3, 2))


def test_randomness():
    x = pt.zeros(4, 3)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        F.vmap(lambda a: a + pt.rand(3))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        F.vmap(lambda a: pt.nn.functional.dropout(a + 1.0, 0.5))(x)
    different = F.vmap(lambda a: a + pt.rand(3), randomness="different")(x)
    same = F.vmap(lambda a: a + pt.rand_like(a), randomness="same")(x)
    assert tuple(different.shape) == (4, 3) and tuple(same.shape) == (4, 3)
    assert not pt.allclose(different[0], different[1])
    assert pt.allclose(same[0], same[1]) and pt.allclose(same[0], same[3])
    masks = F.vmap(lambda a: pt.nn.functional.dropout(a + 1.0, 0.5), randomness="different")(pt.zeros(64, 16))
    assert not pt.allclose(masks[0], masks[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pt.rand(2)  # outside vmap, draws are untouched


def test_assignments_into_a_batched_tensor():
    x, v = arr(3, 4, 2), arr(3, 2)

    def f(m):
        def g(a, b):
            y = a * 1.0
            y[1] = b
            y[2:, 0] = 7.0
            y[..., 1] = b[0]
            return y
        return g
    close(F.vmap(f(pt))(pt.tensor(x), pt.tensor(v)), tf.vmap(f(torch))(torch.tensor(x), torch.tensor(v)))
    close(F.vmap(f(pt), in_dims=(0, None))(pt.tensor(x), pt.tensor(v[0])),
          tf.vmap(f(torch), in_dims=(0, None))(torch.tensor(x), torch.tensor(v[0])))


def test_chunks_with_several_outputs():
    a = arr(5, 2)
    p, t = both(a)
    close(F.vmap(lambda x: (x * 2, x.sum()), out_dims=(1, 0), chunk_size=2)(p),
          tf.vmap(lambda x: (x * 2, x.sum()), out_dims=(1, 0), chunk_size=2)(t))


def test_indexing_with_tensors_shared_and_per_example():
    x, idx, table = arr(3, 5, 4), rng.integers(0, 5, (3, 2)), arr(5, 2)
    (px, tx) = both(x)
    pi, ti = pt.tensor(idx), torch.tensor(idx)

    def shared(m):
        return lambda a: (a[m.tensor([0, 2])], a[:, m.tensor([1, 3])], a[..., m.tensor([True, False, True, True])])
    close(F.vmap(shared(pt))(px), tf.vmap(shared(torch))(tx))
    with pytest.raises(RuntimeError, match="vmap: We do not support batching operators that can output dynamic"):
        F.vmap(lambda a: a[a[:, 0] > 0])(pt.tensor([[[1.0], [2.0]], [[1.0], [-2.0]]]))  # two rows, then one
    close(F.vmap(lambda a, j: a[j])(px, pi), tf.vmap(lambda a, j: a[j])(tx, ti))
    close(F.vmap(lambda a, j: a[j, 1])(px, pi), tf.vmap(lambda a, j: a[j, 1])(tx, ti))
    close(F.vmap(lambda j: pt.nn.functional.embedding(j, pt.tensor(table)))(pi),
          tf.vmap(lambda j: torch.nn.functional.embedding(j, torch.tensor(table)))(ti))


def test_an_in_place_op_on_an_unmapped_tensor_with_a_mapped_operand_is_refused():
    z = pt.zeros(3)
    with pytest.raises(RuntimeError, match="use the out-of-place op"):
        F.vmap(lambda a: z.add_(a))(pt.randn(4, 3))
    assert z.tolist() == [0.0, 0.0, 0.0]


def test_plugtorch_func_is_torch_funcs_namespace():
    import plugtorch.func
    assert pt.func is plugtorch.func
    for name in ("vmap", "grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd", "hessian", "functional_call",
                 "stack_module_state"):
        assert callable(getattr(pt.func, name)) and hasattr(tf, name), name
