"""erf, the primitive NumPy has no ufunc for: libm's in C where the native kernels are built, NumPy
operations where neither they nor SciPy are there — never a Python call per element, which made
a transformer's GELU most of its step."""
from __future__ import annotations

import ast
import math
import pathlib
import sys

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native, special, xp_table

import plugtorch

ROOT = pathlib.Path(__file__).resolve().parents[2]
EDGES = [0.0, -0.0, 1e-300, -1e-300, 1e-8, 0.5, 1.9999999, 2.0, 2.0000001, 3.5, 5.9, 6.0, 27.0, 1e300,
         np.inf, -np.inf]


def _points():
    return np.concatenate([np.linspace(-7, 7, 20001), EDGES, -np.asarray(EDGES)])


def _ulps(got, want):
    """Distance in units in the last place of ``want``'s dtype."""
    spacing = np.spacing(np.abs(want).astype(want.dtype)).astype(np.float64)
    return np.where(got == want, 0.0, np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing)


def _reference(x64):
    return np.array([math.erf(v) for v in x64])


@pytest.mark.parametrize("impl", ["numpy operations", "native"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_matches_libm(impl, dtype):
    if impl == "native" and not native.enabled():
        pytest.skip(f"the native kernels are not built or are off here ({native.status()})")
    fn = special.erf if impl == "numpy operations" else native.primitives()["erf"]
    with np.errstate(over="ignore"):  # 1e300 is inf in float32
        x = _points().astype(dtype)
    want = _reference(x.astype(np.float64)).astype(dtype)
    got = fn(x)
    assert got.dtype == dtype and got.shape == x.shape
    # the C is libm's erf, or for float glibc's vector erff (libmvec) where linked: its four-lane
    # form is within 2 ulp; the 8- and 16-lane forms (AVX2, AVX-512) reach -1/1 from |x| ~ 3.67,
    # where erf is 1 - 2.4e-7: 4 ulp of the value below 1, 2.4e-7 absolute. The NumPy operations
    # are exact in float32 (computed in float64) and within 16 ulp in float64
    tolerances = {("native", np.float32): 4, ("native", np.float64): 1}
    tolerance = tolerances.get((impl, dtype), 1 if dtype == np.float32 else 16)
    worst = _ulps(got, want)
    assert worst.max() <= tolerance, f"{impl} {dtype.__name__}: {worst.max()} ulp at x={x[worst.argmax()]!r}"
    assert np.signbit(fn(np.array([-0.0], dtype)))[0]
    assert np.isnan(fn(np.array([np.nan], dtype)))[0]


def test_native_erf_gives_each_element_the_same_value_in_any_layout():
    if not native.enabled():
        pytest.skip(f"the native kernels are not built or are off here ({native.status()})")
    x = np.linspace(-3, 3, 60, dtype=np.float32).reshape(6, 10)
    fn = native.primitives()["erf"]
    for view in (x.T, x[:, ::2], x[::-1]):
        got = fn(view)
        assert got.shape == view.shape
        np.testing.assert_array_equal(got, fn(np.ascontiguousarray(view)))  # each element's value, wherever it sits


def test_without_scipy_erf_is_numpy_operations(monkeypatch):
    monkeypatch.setattr(xp_table, "_scipy_erf", lambda: None)
    x = np.linspace(-4, 4, 101)
    np.testing.assert_array_equal(xp_table.numpy_erf(x), special.erf(x))


def test_no_per_element_python_in_the_library():
    """``numpy.frompyfunc`` and ``numpy.vectorize`` call Python once per element (the conformance
    samples' reference math, in plugtorch/testing, may: it computes expected values)."""
    found = []
    library = [p for p in (ROOT / "plugtorch").rglob("*.py") if "testing" not in p.parts]
    for path in library + list((ROOT / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("frompyfunc", "vectorize"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.attr}")
    assert not found, "per-element Python:\n" + "\n".join(found)


def test_every_unary_primitive_runs_without_a_python_call_per_element():
    b = plugtorch.get_registry().backends["numpy"]
    x = np.linspace(0.1, 0.9, 100_000, dtype=np.float32)
    calls = []

    def count(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)
    names = [n for n in ("neg", "exp", "log", "log1p", "expm1", "sqrt", "abs", "sign", "sin", "cos", "tan", "tanh",
                         "asin", "acos", "atan", "asinh", "atanh", "floor", "ceil", "round", "erf")
             if n in b.primitives]
    for name in names:
        calls.clear()
        sys.setprofile(count)
        try:
            b.primitives[name](x)
        finally:
            sys.setprofile(None)
        assert len(calls) < 50, f"primitive {name!r} made {len(calls)} Python calls on 100,000 elements"
