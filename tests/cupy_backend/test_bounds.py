"""The CuPy table's debug-mode index checks (CuPy itself wraps out-of-range indices silently)."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.cupy_backend.bounds import checked

import plugtorch


def wrapping_table():
    """Indexing primitives that behave as CuPy's do: out-of-range indices wrap, nothing raises."""
    def wrap(x, index):
        if not isinstance(index, tuple):
            index = (index,)
        out, dim = [], 0
        for k in index:
            if isinstance(k, np.ndarray) and k.dtype.kind in "iu":
                k = k % x.shape[dim]
            out.append(k)
            dim += k is not None and k is not Ellipsis
        return tuple(out)

    def setitem(x, index, value):
        x[wrap(x, index)] = value
    return {
        "gather": lambda x, axis, index: np.take_along_axis(x, index % x.shape[axis], axis),
        "scatter_add": lambda x, axis, index, src: x,
        "getitem": lambda x, index: x[wrap(x, index)],
        "setitem": setitem,
        "index_add": lambda x, index, values: x,
    }


@pytest.fixture
def table():
    return checked(np, wrapping_table())


def test_without_debug_mode_nothing_is_read_and_indices_wrap_as_on_cupy(table):
    x = np.arange(3.0)
    with plugtorch.debug_mode(False):
        np.testing.assert_array_equal(table["gather"](x, 0, np.array([3, 4])), [0.0, 1.0])


@pytest.mark.parametrize("call", [
    lambda t, x: t["gather"](x, 1, np.array([[0, 5]])),
    lambda t, x: t["scatter_add"](x, 1, np.array([[-6]]), np.ones((1, 1))),
    lambda t, x: t["getitem"](x, (Ellipsis, np.array([0, 9]))),
    lambda t, x: t["getitem"](x, (slice(None), None, np.array([4]))),
    lambda t, x: t["setitem"](x, (np.array([2]),), 0.0),
    lambda t, x: t["index_add"](x, (np.array([0]), np.array([7])), np.ones(1)),
], ids=["gather", "scatter_add", "getitem-ellipsis", "getitem-newaxis", "setitem", "index_add-second-dim"])
def test_debug_mode_raises_numpys_index_error(table, call):
    x = np.zeros((2, 4))
    with plugtorch.debug_mode(True), pytest.raises(IndexError, match="is out of bounds for axis . with size"):
        call(table, x)


def test_debug_mode_passes_valid_indices_including_negative_and_masks(table):
    x = np.arange(8.0).reshape(2, 4)
    with plugtorch.debug_mode(True):
        np.testing.assert_array_equal(table["getitem"](x, (np.array([-2, 1]), np.array([-4, 3]))), [0.0, 7.0])
        np.testing.assert_array_equal(table["getitem"](x, (x > 5,)), [6.0, 7.0])
        np.testing.assert_array_equal(table["gather"](x, 0, np.array([[1, 0, -1, 0]])), [[4.0, 1.0, 6.0, 3.0]])
