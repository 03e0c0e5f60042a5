"""The NumPy backend computes log(-1), 1/0, sqrt(-1) and exp(1000) quietly, as torch does
(nan or inf, no RuntimeWarning), and leaves the caller's own NumPy error state as it was
(``xp_table.ignoring_fp_errors``), with NumPy's context variable and without it."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import xp_table

import plugtorch as pt


def _cases():
    neg, zero, big = pt.tensor([-1.0, 4.0]), pt.tensor([0.0, 2.0]), pt.tensor([1000.0, 1.0])
    return [
        ("log", lambda: pt.log(neg), [np.nan, np.log(4.0)]),
        ("sqrt", lambda: pt.sqrt(neg), [np.nan, 2.0]),
        ("div", lambda: pt.tensor([1.0, 1.0]) / zero, [np.inf, 0.5]),
        ("exp", lambda: pt.exp(big), [np.inf, np.e]),
        ("log_ in place", lambda: pt.tensor([-1.0, 4.0]).log_(), [np.nan, np.log(4.0)]),
        ("div_ in place", lambda: pt.tensor([1.0, 1.0]).div_(zero), [np.inf, 0.5]),
    ]


@pytest.fixture(params=["context variable", "errstate"])
def fp_state(request, monkeypatch):
    if request.param == "errstate":  # a NumPy without the context variable: errstate each call
        monkeypatch.setattr(xp_table, "_FP_STATE", None)
        backend = pt.get_registry().backends["numpy"]
        for name in ("log", "sqrt", "div", "exp"):  # the table's kernels, rebuilt on the fallback
            quiet = xp_table.ignoring_fp_errors(getattr(np, {"div": "true_divide"}.get(name, name)), out=...)
            monkeypatch.setitem(backend.kernels, name, quiet)
    elif xp_table._FP_STATE is None:
        pytest.skip(f"NumPy {np.__version__} keeps no floating-point error context variable")
    return request.param


@pytest.mark.parametrize("name, run, want", _cases(), ids=[c[0] for c in _cases()])
def test_quiet_values_and_the_callers_state(fp_state, name, run, want):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail the test
        before = np.geterr()
        np.testing.assert_allclose(run().numpy(), np.array(want, np.float32), rtol=1e-6)
        assert np.geterr() == before
    with np.errstate(all="raise"):  # the caller's choice holds around plugtorch's call
        np.testing.assert_allclose(run().numpy(), np.array(want, np.float32), rtol=1e-6)
        with pytest.raises(FloatingPointError):
            np.log(np.float32(-1.0))


def test_the_callers_state_is_back_after_an_error():
    def fails(x):
        np.log(x)  # quiet here
        raise ValueError("boom")

    quiet = xp_table.ignoring_fp_errors(fails)
    with np.errstate(all="raise"):
        with pytest.raises(ValueError, match="boom"):
            quiet(np.float32(-1.0))
        with pytest.raises(FloatingPointError):
            np.log(np.float32(-1.0))
