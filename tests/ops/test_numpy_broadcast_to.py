"""The NumPy backend's broadcast_to (``xp_table.numpy_broadcast_to``) is numpy.broadcast_to's
view: the same values, shape and strides, read-only, in ``x``'s memory; NumPy's own error for
shapes that do not broadcast; NumPy's function for layouts the constructor cannot take."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend.xp_table import numpy_broadcast_to

BASE = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("x, shape", [
    (np.ones((), np.float32), (8, 8)),
    (BASE, (5, 2, 3, 4)),
    (BASE[:, :1], (2, 3, 4)),
    (BASE.T, (6, 4, 3, 2)),             # Fortran order
    (BASE[:1, :, :1], (7, 2, 3, 5)),
    (BASE[:0], (3, 0, 3, 4)),           # empty
    (BASE[:, ::2], (2, 2, 2, 4)),       # strided: NumPy's function
    (BASE[::-1], (2, 3, 4)),            # negative strides: NumPy's function
    (np.arange(5, dtype=np.int64), (2, 5)),
    (np.array([True, False]), (3, 2)),
], ids=lambda v: str(v.shape) if isinstance(v, np.ndarray) else str(v))
def test_the_view_is_numpys(x, shape):
    got, want = numpy_broadcast_to(x, shape), np.broadcast_to(x, shape)
    assert got.shape == want.shape and got.dtype == want.dtype and got.strides == want.strides
    np.testing.assert_array_equal(got, want)
    assert not got.flags.writeable
    assert got.size == 0 or np.shares_memory(got, x)
    with pytest.raises(ValueError):
        got[...] = 0


def test_shapes_that_do_not_broadcast_get_numpys_error():
    for x, shape in ((BASE, (2, 3, 5)), (BASE, (3, 4)), (np.ones(3), (2, 4))):
        with pytest.raises(ValueError) as ours:
            numpy_broadcast_to(x, shape)
        with pytest.raises(ValueError) as numpys:
            np.broadcast_to(x, shape)
        assert str(ours.value) == str(numpys.value)
