"""``native.out_ufunc``: the NumPy backend's elementwise kernels call ``ufunc(..., out=...)`` from C
(``_kernels.OutUfunc``) instead of through a Python lambda. The same results as the Python
function it stands in for, which still takes every call it does not handle."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native
from plugtorch_backends.numpy_backend.bfloat16 import BFLOAT16

import plugtorch

pytestmark = pytest.mark.skipif(not hasattr(native._kernels, "OutUfunc"),
                                reason=f"the native extension is not in use: {native.status()}")


def _slow_calls():
    calls = []

    def slow(*args, **kwargs):
        calls.append((args, kwargs))
        return "slow"
    return calls, slow


@pytest.mark.parametrize("shapes", [((), ()), ((3,), ()), ((2, 3), (3,)), ((0, 2), (1, 2))])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_two_arrays_give_the_ufuncs_result_as_an_array(shapes, dtype):
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(s).astype(dtype) for s in shapes)
    calls, slow = _slow_calls()
    for ufunc in (np.add, np.maximum, np.logical_xor):
        out = native.out_ufunc(ufunc, 2, slow, float_slow=np.dtype(np.float64))(x, y)
        expected = ufunc(x, y, out=...)
        assert type(out) is np.ndarray and out.dtype == expected.dtype and out.shape == expected.shape
        np.testing.assert_array_equal(out, expected)
    assert calls == []


def test_one_array():
    x = np.array(0.5, dtype=np.float32)
    out = native.out_ufunc(np.tanh, 1, lambda a: None)(x)
    assert type(out) is np.ndarray and out.shape == () and out == np.tanh(x)


def test_the_other_calls_go_to_the_python_function():
    calls, slow = _slow_calls()
    binary = native.out_ufunc(np.add, 2, slow, float_slow=np.dtype(np.float64))
    x = np.ones(2)
    assert binary(x, 2.5) == "slow"          # a float beside float_slow's dtype (bfloat16's scalar rule)
    np.testing.assert_array_equal(binary(x.astype(np.float32), 2.5), [3.5, 3.5])  # beside another: the ufunc
    assert binary(x, x, out=x) == "slow"     # keywords
    assert binary(x) == "slow"               # another argument count
    np.testing.assert_array_equal(binary(x, 2), [3.0, 3.0])  # an int is a NumPy weak scalar as it is
    assert len(calls) == 3 and calls[1][1] == {"out": x}
    plain = native.out_ufunc(np.add, 2, slow)
    np.testing.assert_array_equal(plain(x, 2.5), [3.5, 3.5])


def test_errors_are_numpys():
    binary = native.out_ufunc(np.add, 2, lambda *a: None)
    with pytest.raises(ValueError, match="broadcast"):
        binary(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="nin must be 1 or 2"):
        native.out_ufunc(np.add, 3, lambda *a: None)


def test_the_backend_uses_it_and_bfloat16_keeps_its_scalar_rule():
    kernels = plugtorch.get_registry().backends["numpy"].kernels
    assert all(type(kernels[name]).__name__ == "OutUfunc" for name in ("add", "mul", "maximum", "tanh", "neg"))
    x = plugtorch.tensor([1.0, 2.0, 3.0], dtype=plugtorch.bfloat16)
    for out in (x + 2.3, x * 2.3, x + x, x * 2, x.tanh()):
        assert out.dtype is plugtorch.bfloat16 and out._data.dtype == BFLOAT16
