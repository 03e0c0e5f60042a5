"""Valid PyTorch calls plugtorch must accept: argument forms and the tensor API that ports reach for."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F


def _same(ours, theirs):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert np.allclose(np.asarray(ours.tolist(), dtype=float), np.asarray(theirs.tolist(), dtype=float),
                       equal_nan=True)
    assert list(ours.shape) == list(theirs.shape)


def test_gather_with_an_index_smaller_than_the_input(torch):
    x = np.arange(12).reshape(3, 4)
    index = [[0, 1], [1, 1]]
    _same(plugtorch.tensor(x).gather(1, plugtorch.tensor(index)), torch.tensor(x).gather(1, torch.tensor(index)))
    w = plugtorch.tensor(x, dtype=plugtorch.float64, requires_grad=True)
    tw = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    w.gather(0, plugtorch.tensor([[2], [0]])).sum().backward()
    tw.gather(0, torch.tensor([[2], [0]])).sum().backward()
    _same(w.grad, tw.grad)


def test_randint_with_high_and_size_only():
    x = plugtorch.randint(10, (3, 4))
    assert x.shape == (3, 4) and x.dtype is plugtorch.int64
    assert int(x.min()) >= 0 and int(x.max()) < 10


def test_where_with_two_numbers(torch):
    cond = [True, False, True]
    for a, b in ((1.0, 0), (1, 0), (True, False), (2.5, -1.5)):
        _same(plugtorch.where(plugtorch.tensor(cond), a, b), torch.where(torch.tensor(cond), a, b))


def test_max_pool2d_on_integer_input(torch):
    x = np.arange(16).reshape(1, 1, 4, 4)
    _same(F.max_pool2d(plugtorch.tensor(x), 2), torch.nn.functional.max_pool2d(torch.tensor(x), 2))


@pytest.mark.parametrize("source,target", [("float32", "int32"), ("int32", "float32"), ("int32", "int16"),
                                           ("int16", "int32"), ("float64", "uint8"), ("uint8", "bool")])
def test_view_as_another_dtype_reinterprets_the_bits(torch, source, target):
    values = np.arange(8).reshape(2, 4) % 2 if source == "uint8" else np.arange(8).reshape(2, 4)
    x = plugtorch.tensor(values, dtype=getattr(plugtorch, source))
    tx = torch.tensor(values, dtype=getattr(torch, source))
    _same(x.view(getattr(plugtorch, target)), tx.view(getattr(torch, target)))


def test_view_as_another_dtype_is_a_view():
    x = plugtorch.zeros(4, dtype=plugtorch.int32)
    v = x.view(plugtorch.float32)
    v[0] = 1.0
    assert x[0].item() == 1065353216  # the bits of 1.0f


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "std", "var", "prod", "logsumexp"])
def test_numpy_style_axis_and_keepdims(torch, op):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    ours = getattr(plugtorch.tensor(x), op)(axis=1, keepdims=True)
    theirs = getattr(torch.tensor(x), op)(axis=1, keepdims=True)
    _same(ours, theirs)


@pytest.mark.parametrize("op", ["max", "min", "all", "any", "argmax", "argmin"])
def test_axis_alias_on_the_one_dim_reductions(torch, op):
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    ours = getattr(plugtorch, op)(plugtorch.tensor(x), axis=1)
    theirs = getattr(torch, op)(torch.tensor(x), axis=1)
    if isinstance(theirs, tuple):
        for o, t in zip(ours, theirs):
            _same(o, t)
    else:
        _same(ours, theirs)


def test_axis_and_dim_together_is_an_error():
    with pytest.raises(TypeError, match="alias"):
        plugtorch.ones(2, 3).sum(dim=0, axis=1)


@pytest.mark.parametrize("name", ["int", "long", "float", "double", "half", "uint8", "int8", "int16",
                                  "float16", "short", "bool"])
def test_dtype_aliases(torch, name):
    assert getattr(plugtorch, name).name == str(getattr(torch, name)).split(".")[-1]


@pytest.mark.parametrize("dtype", ["float16", "uint8", "int8", "int16", "int32"])
def test_storage_and_arithmetic_in_the_small_dtypes(torch, dtype):
    values = [[1, 2, 3], [4, 5, 6]]
    x, tx = plugtorch.tensor(values, dtype=getattr(plugtorch, dtype)), torch.tensor(values, dtype=getattr(torch, dtype))
    _same(x * 3 + x, tx * 3 + tx)
    _same(x.sum(0), tx.sum(0))
    _same(x - 1, tx - 1)


@pytest.mark.parametrize("method", ["int", "long", "half", "float", "double", "short", "char", "byte", "bool"])
def test_conversion_methods(torch, method):
    _same(getattr(plugtorch.tensor([1.5, -2.0, 0.0]), method)(), getattr(torch.tensor([1.5, -2.0, 0.0]), method)())


def test_type_with_and_without_a_dtype(torch):
    x, tx = plugtorch.tensor([1.5, 2.0]), torch.tensor([1.5, 2.0])
    assert x.type() == "plugtorch.FloatTensor" and tx.type() == "torch.FloatTensor"
    _same(x.type(plugtorch.int32), tx.type(torch.int32))
    _same(x.type("torch.DoubleTensor"), tx.type("torch.DoubleTensor"))
    assert x.half().type() == "plugtorch.HalfTensor"
    with pytest.raises(ValueError, match="invalid type"):
        x.type("torch.ComplexTensor")


# -- the tensor API ports stopped at -----------------------------------------------------------

def test_addcmul_and_addcdiv_in_place(torch):
    x, tx = plugtorch.ones(3), torch.ones(3)
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]
    x.addcmul_(plugtorch.tensor(a), plugtorch.tensor(b), value=0.5)
    tx.addcmul_(torch.tensor(a), torch.tensor(b), value=0.5)
    x.addcdiv_(plugtorch.tensor(a), plugtorch.tensor(b), value=2)
    tx.addcdiv_(torch.tensor(a), torch.tensor(b), value=2)
    _same(x, tx)


def test_normal_and_uniform_fill_in_place():
    x = plugtorch.empty(2000)
    assert x.uniform_(-2, 3) is x
    assert float(x.min()) >= -2 and float(x.max()) < 3 and abs(float(x.mean()) - 0.5) < 0.15
    x.uniform_(**{"from": 5, "to": 6})
    assert float(x.min()) >= 5
    x.normal_(1.0, 0.5, generator=plugtorch.Generator().manual_seed(0))
    assert abs(float(x.mean()) - 1.0) < 0.05 and abs(float(x.std()) - 0.5) < 0.05
    w = plugtorch.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.normal_()
    with plugtorch.no_grad():
        w.uniform_()
    assert float(w.abs().sum()) > 0


def test_normal_is_reproducible_with_a_generator():
    a = plugtorch.empty(5).normal_(generator=plugtorch.Generator().manual_seed(3))
    b = plugtorch.empty(5).normal_(generator=plugtorch.Generator().manual_seed(3))
    assert a.tolist() == b.tolist()


def test_stride_and_is_contiguous(torch):
    x, tx = plugtorch.arange(24.0).reshape(2, 3, 4), torch.arange(24.0).reshape(2, 3, 4)
    for f in (lambda t: t, lambda t: t.transpose(0, 2), lambda t: t[:, 1:, ::2], lambda t: t.permute(1, 0, 2),
              lambda t: t[0].unsqueeze(0).expand(5, 3, 4)):
        assert f(x).stride() == f(tx).stride()
        assert f(x).is_contiguous() == f(tx).is_contiguous()
        assert f(x).stride(-1) == f(tx).stride(-1)


def test_unique_as_torch(torch):
    values = [3, 1, 2, 3, 1, 7]
    for kwargs in ({}, {"return_inverse": True}, {"return_counts": True},
                   {"return_inverse": True, "return_counts": True}):
        ours = plugtorch.tensor(values).unique(**kwargs)
        theirs = torch.tensor(values).unique(**kwargs)
        pairs = zip(ours, theirs) if isinstance(theirs, tuple) else [(ours, theirs)]
        for o, t in pairs:
            _same(o, t)
    rows = [[1, 2], [1, 2], [0, 5]]
    for o, t in zip(plugtorch.unique(plugtorch.tensor(rows), dim=0, return_inverse=True, return_counts=True),
                    torch.unique(torch.tensor(rows), dim=0, return_inverse=True, return_counts=True)):
        _same(o, t)


def test_unique_is_in_the_graph_but_not_differentiable():
    x = plugtorch.tensor([2.0, 1.0, 2.0], requires_grad=True)
    u = x.unique()
    assert u.requires_grad and repr(u.grad_fn) == "<Unique2Backward0>"
    with pytest.raises(RuntimeError, match="derivative for 'unique' is not implemented"):
        u.sum().backward()


def test_hstack_vstack_and_friends(torch):
    pieces = [[1, 2], [3, 4]]
    for name in ("hstack", "vstack", "dstack", "column_stack", "row_stack"):
        _same(getattr(plugtorch, name)([plugtorch.tensor(p) for p in pieces]),
              getattr(torch, name)([torch.tensor(p) for p in pieces]))
    _same(plugtorch.atleast_2d(plugtorch.tensor(1.0)), torch.atleast_2d(torch.tensor(1.0)))
    assert plugtorch.atleast_3d(plugtorch.ones(3)).shape == torch.atleast_3d(torch.ones(3)).shape


def test_allclose_and_isclose(torch):
    a = [1.0, float("inf"), float("nan"), 1e-9]
    b = [1.0 + 1e-7, float("inf"), float("nan"), 0.0]
    _same(plugtorch.isclose(plugtorch.tensor(a), plugtorch.tensor(b)), torch.isclose(torch.tensor(a), torch.tensor(b)))
    assert plugtorch.allclose(plugtorch.tensor(a), plugtorch.tensor(b), equal_nan=True) is True
    assert plugtorch.allclose(plugtorch.tensor(a), plugtorch.tensor(b)) is False
    assert plugtorch.tensor([1.0]).allclose(plugtorch.tensor([1.0 + 1e-9]))


def test_inference_mode():
    w = plugtorch.ones(2, requires_grad=True)
    with plugtorch.inference_mode():
        assert plugtorch.is_inference_mode_enabled() and not plugtorch.is_grad_enabled()
        assert not (w * 2).requires_grad
        with plugtorch.inference_mode(False):
            assert (w * 2).requires_grad
    assert plugtorch.is_grad_enabled() and not plugtorch.is_inference_mode_enabled()

    @plugtorch.inference_mode()
    def called():
        return (w * 2).requires_grad

    @plugtorch.inference_mode
    def bare():
        return (w * 2).requires_grad
    assert called() is False and bare() is False


def test_set_and_get_num_threads():
    before = plugtorch.get_num_threads()
    plugtorch.set_num_threads(1)
    try:
        assert plugtorch.get_num_threads() == 1
    finally:
        plugtorch.set_num_threads(before)
    with pytest.raises(ValueError):
        plugtorch.set_num_threads(0)
