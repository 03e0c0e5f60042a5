"""The erf primitive (gelu's) of the NumPy primitive table, with SciPy and with NumPy operations
alone (``special.erf``, within 10 ulp of libm in float64)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import xp_table


@pytest.mark.parametrize("use_scipy", [True, False], ids=["scipy", "numpy-operations"])
def test_numpy_table_erf_matches_libm_and_keeps_dtype(use_scipy, monkeypatch):
    if use_scipy:
        pytest.importorskip("scipy", reason="SciPy is an optional speed-up for erf and is not installed")
    else:
        monkeypatch.setattr(xp_table, "_scipy_erf", lambda: None)
    table = xp_table.make_table(np, to_host=lambda x: x, from_host_array=lambda a: a)
    x = np.linspace(-6, 6, 241)
    atol = 4e-16 if use_scipy else 10 * np.spacing(1.0)
    np.testing.assert_allclose(table["erf"](x), [math.erf(v) for v in x], rtol=0, atol=atol)
    for dtype in (np.float32, np.float64):
        out = table["erf"](np.asarray(0.5, dtype=dtype))
        assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == ()
    assert table["erf"](np.zeros((0, 3))).shape == (0, 3)
