"""The NumPy backend's ``special`` primitive without its C extension (built without a compiler, or
``PLUGTORCH_NATIVE_KERNELS=0``): SciPy's functions serve, and give the C's (torch's) values at
NaN, the infinities and the signed zeros, where SciPy's own differ (lgamma(-inf), erfinv(-0))."""
from __future__ import annotations

import math

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import special_functions as sf

EDGES = np.array([math.nan, math.inf, -math.inf, -0.0, 0.0, -1.0, 1.0, -0.5, 0.5, 3.0, -3.0, 1e30])
UNARY = sorted(sf.FUNCTIONS - {"polygamma", "zeta", "gammainc", "gammaincc"})


@pytest.fixture
def scipy_path(monkeypatch):
    pytest.importorskip("scipy.special", reason="SciPy (the fallback under test) is not installed")
    if sf._native() is None:
        pytest.skip("the C extension is not built here: nothing to compare SciPy's values with")
    native = sf._native()
    monkeypatch.setattr(sf, "_native", lambda: None)
    return native


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_scipy_gives_the_c_values_at_the_edges(scipy_path, name, dtype):
    # far out, J0 and J1 are rounding noise in both (torch's included): left out
    x = (EDGES[np.abs(EDGES) < 1e30] if name in ("j0", "j1") else EDGES).astype(dtype)
    got = sf.numpy_special(name, x, None, 0)
    flat = np.ascontiguousarray(x, dtype=np.float64)
    want = np.empty_like(flat)
    scipy_path.apply(name, flat, None, 0, want)
    with np.errstate(over="ignore"):
        want = want.astype(dtype)
    assert got.dtype == dtype
    # nan where the C has nan (its sign aside), elsewhere the same sign (-0 included) and values
    # within rounding
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=name)
    np.testing.assert_array_equal(np.signbit(got)[~nan], np.signbit(want)[~nan], err_msg=name)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, err_msg=name)


def test_lgamma_of_minus_inf_is_inf_and_erfinv_keeps_a_zeros_sign(scipy_path):
    assert sf.numpy_special("lgamma", np.array([-np.inf, np.inf]), None, 0).tolist() == [np.inf, np.inf]
    zeros = sf.numpy_special("erfinv", np.array([-0.0, 0.0], np.float32), None, 0)
    assert np.signbit(zeros).tolist() == [True, False]
