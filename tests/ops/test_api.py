"""The catalog is exposed where PyTorch exposes it, with PyTorch's result types and errors."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch

TOP_LEVEL = """sin cos exp log log1p expm1 sqrt rsqrt abs sign clamp clip pow reciprocal floor ceil round erf
maximum minimum where logsumexp isnan isinf isfinite sum mean prod var std var_mean std_mean max min amax
amin argmax argmin norm cumsum any all reshape transpose permute swapaxes swapdims movedim moveaxis
squeeze unsqueeze flatten unflatten broadcast_to cat concat stack split tensor_split chunk flip fliplr
flipud roll tile tril triu gather scatter_add index_select masked_fill matmul mm bmm outer ger dot
einsum relu sigmoid softmax log_softmax tanh log2 log10 exp2 sinh cosh trunc fix frac lerp diag
diagonal trace addmm selu celu masked_select argwhere nonzero count_nonzero clamp_min clamp_max sort argsort
topk kthvalue median unbind narrow ravel repeat_interleave meshgrid take_along_dim scatter index_add""".split()

METHODS = """sin cos exp log log1p expm1 sqrt rsqrt abs sign clamp clip pow reciprocal floor ceil round erf
maximum minimum logsumexp isnan isinf isfinite sum mean prod var std max min amax amin argmax argmin
norm cumsum any all reshape view transpose permute swapaxes movedim moveaxis squeeze unsqueeze flatten
unflatten expand expand_as broadcast_to split tensor_split chunk flip fliplr flipud roll repeat tile tril
triu gather scatter_add index_select masked_fill masked_fill_ matmul mm bmm outer dot relu sigmoid
softmax log_softmax add_ sub_ mul_ div_ zero_ fill_ copy_ clamp_ log2 log10 exp2 sinh cosh trunc frac
lerp diag diagonal trace addmm masked_select argwhere nonzero count_nonzero clamp_min clamp_max sort argsort
topk kthvalue median unbind narrow ravel repeat_interleave take_along_dim scatter scatter_ index_add
index_add_""".split()

FUNCTIONAL = ("relu leaky_relu gelu silu softplus elu softmax log_softmax one_hot pad conv2d max_pool2d "
              "avg_pool2d").split()
# in the core (plugtorch.core.ops.activation), for nn.functional to re-export
CORE_ACTIVATIONS = "hardtanh relu6 selu celu mish hardsigmoid hardswish softsign logsigmoid tanhshrink".split()


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_plugtorch_function_exists(name):
    assert callable(getattr(plugtorch, name))


@pytest.mark.parametrize("name", METHODS)
def test_tensor_method_exists(name):
    assert callable(getattr(plugtorch.Tensor, name))


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_nn_functional_exposes_the_core_op(name):
    import plugtorch.nn.functional as F
    assert callable(getattr(F, name))


@pytest.mark.parametrize("name", CORE_ACTIVATIONS)
def test_core_activation_exists_for_nn_functional(name):
    from plugtorch.core.ops import activation
    assert callable(getattr(activation, name))


def test_max_with_dim_returns_named_values_and_indices():
    x = plugtorch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    out = x.max(1)
    assert out.values.tolist() == [5.0, 7.0] and out.indices.tolist() == [1, 0]
    values, indices = plugtorch.min(x, dim=0, keepdim=True)
    assert values.shape == (1, 3) and indices.tolist() == [[0, 1, 0]]


def test_split_and_chunk_return_views_that_share_versions():
    x = plugtorch.arange(10.0)
    parts = x.split(4)
    assert [p.shape[0] for p in parts] == [4, 4, 2]
    assert [c.shape[0] for c in x.chunk(3)] == [4, 4, 2]
    assert [c.shape[0] for c in plugtorch.arange(5).chunk(3)] == [2, 2, 1]
    parts[0].add_(1)
    assert x._version == 1 and x[0].item() == 1.0


def test_var_std_correction_and_unbiased_spellings_agree(torch):
    a = np.random.default_rng(0).standard_normal((4, 5))
    x, t = plugtorch.tensor(a), torch.tensor(a)
    for args, kwargs in [((), {}), ((1,), {"unbiased": False}), ((1,), {"correction": 0}),
                         ((0,), {"correction": 2, "keepdim": True}), ((False,), {})]:
        for name in ("var", "std"):
            got = getattr(x, name)(*args, **kwargs).numpy()
            np.testing.assert_allclose(got, getattr(t, name)(*args, **kwargs).numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="both"):
        x.var(1, unbiased=True, correction=1)


def test_repeated_advanced_indices_accumulate_gradients():
    x = plugtorch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[plugtorch.tensor([0, 0, 2, 0])].sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 1.0]
    y = plugtorch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y.index_select(0, plugtorch.tensor([1, 1])).sum().backward()
    assert y.grad.tolist() == [0.0, 2.0, 0.0]


def test_one_hot_and_pad_match_torch(torch):
    labels = np.array([[0, 3], [2, 1]])
    got = plugtorch.nn.functional.one_hot(plugtorch.tensor(labels), 4)
    assert got.dtype is plugtorch.int64
    np.testing.assert_array_equal(got.numpy(), torch.nn.functional.one_hot(torch.tensor(labels), 4).numpy())
    a = np.arange(12.0).reshape(3, 4)
    for p in [(1, 2), (0, 1, 2, 0), (-1, 1, 1, -2)]:
        np.testing.assert_array_equal(plugtorch.nn.functional.pad(plugtorch.tensor(a), p, value=9).numpy(),
                                      torch.nn.functional.pad(torch.tensor(a), p, value=9).numpy())


def test_norm_subgradient_at_zero_is_zero_like_torch():
    x = plugtorch.zeros(3, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_bad_inputs_give_errors_naming_the_op_and_shapes():
    x = plugtorch.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of tensor b \(4\)"):
        x + plugtorch.ones(4)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"):
        x @ x
    with pytest.raises(RuntimeError, match="einsum.*subscript j has size 2"):
        plugtorch.einsum("ij,jk->ik", x, plugtorch.ones(2, 2))
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor"):
        plugtorch.nn.functional.one_hot(x)
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[3, 3\]"):
        x[0:2] = plugtorch.ones(3, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sum(2)


def test_gelu_tanh_and_exact_differ_and_match_torch(torch):
    a = np.linspace(-3, 3, 7)
    for approx in ("none", "tanh"):
        got = plugtorch.nn.functional.gelu(plugtorch.tensor(a), approximate=approx).numpy()
        want = torch.nn.functional.gelu(torch.tensor(a), approximate=approx).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
