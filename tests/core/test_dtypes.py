"""dtypes and PyTorch's type promotion, checked against torch where it is installed."""
from __future__ import annotations

import itertools

import pytest

import plugtorch
from plugtorch.core import dtypes as D

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def _pt(name):
    return D.dtype_from_name(name)


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(NAMES, 2)))
def test_promote_types_matches_torch(torch, a, b):
    expect = torch.promote_types(getattr(torch, a), getattr(torch, b))
    assert D.promote_types(_pt(a), _pt(b)).name == str(expect).replace("torch.", "")


@pytest.mark.parametrize("tensor_dtype", ["bool", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("scalar", [True, 2, 2.5])
def test_python_scalars_do_not_upcast_tensors(torch, tensor_dtype, scalar):
    t = plugtorch.ones(3, dtype=_pt(tensor_dtype))
    tt = torch.ones(3, dtype=getattr(torch, tensor_dtype))
    assert (t * scalar).dtype.name == str((tt * scalar).dtype).replace("torch.", "")
    assert (t + scalar).dtype.name == str((tt + scalar).dtype).replace("torch.", "")


@pytest.mark.parametrize("dim_dtype,zero_dtype", [("float32", "float64"), ("int32", "float64"),
                                                  ("int32", "int64"), ("bool", "int32"),
                                                  ("float16", "float32")])
def test_zero_dim_tensors_promote_only_across_categories(torch, dim_dtype, zero_dtype):
    a = plugtorch.ones(2, dtype=_pt(dim_dtype))
    b = plugtorch.tensor(1, dtype=_pt(zero_dtype))
    ta = torch.ones(2, dtype=getattr(torch, dim_dtype))
    tb = torch.tensor(1, dtype=getattr(torch, zero_dtype))
    assert (a + b).dtype.name == str((ta + tb).dtype).replace("torch.", "")


def test_inferred_dtypes_follow_torch():
    assert plugtorch.tensor([1.0, 2]).dtype is plugtorch.float32
    assert plugtorch.tensor([1, 2]).dtype is plugtorch.int64
    assert plugtorch.tensor([True]).dtype is plugtorch.bool
    assert plugtorch.arange(3).dtype is plugtorch.int64
    assert plugtorch.arange(0, 1, 0.5).dtype is plugtorch.float32
    assert plugtorch.full((2,), 7).dtype is plugtorch.int64
    assert (plugtorch.tensor([1, 2]) / 2).dtype is plugtorch.float32  # true division
    assert plugtorch.tensor([1, 2]).sum().dtype is plugtorch.int64
    assert plugtorch.tensor([True, True]).sum().item() == 2


def test_set_default_dtype_changes_inference_and_scalar_promotion():
    plugtorch.set_default_dtype(plugtorch.float64)
    try:
        assert plugtorch.tensor([1.5]).dtype is plugtorch.float64
        assert (plugtorch.tensor([1]) * 0.5).dtype is plugtorch.float64
    finally:
        plugtorch.set_default_dtype(plugtorch.float32)
    with pytest.raises(TypeError, match="only floating-point"):
        plugtorch.set_default_dtype(plugtorch.int64)


def test_only_floating_tensors_can_require_grad():
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        plugtorch.tensor([1, 2], requires_grad=True)


def test_result_dtype_is_read_from_the_backend_array():
    for name in NAMES:
        t = plugtorch.zeros(2, dtype=_pt(name))
        assert t.dtype.name == name and t.numpy().dtype.name == name


@pytest.mark.parametrize("data,message", [
    ([[1, 2], [3]], "expected sequence of length 2 at dim 1 (got 1)"),
    ([[[1], [2]], [[3], [4, 5]]], "expected sequence of length 1 at dim 2 (got 2)"),
    ([[1, 2], 3], "expected a sequence at dim 1 but found a number"),
])
def test_ragged_lists_get_torchs_message_not_the_backends(data, message):
    with pytest.raises(ValueError) as info:
        plugtorch.tensor(data)
    assert message in str(info.value)
