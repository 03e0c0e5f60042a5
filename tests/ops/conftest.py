"""Fixtures of the NumPy backend's native-kernel tests."""
from __future__ import annotations

import contextlib

import pytest


@pytest.fixture
def one_thread():
    """One BLAS thread, so the native kernels run on one job (their rules need the pool that follows
    OpenBLAS's thread count); skips where the AVX-512 module is off."""
    from plugtorch_backends.numpy_backend import native
    from plugtorch_backends.numpy_backend.native import gemm
    if not gemm.ON:
        pytest.skip(f"the native product is off here ({gemm.STATUS})")
    from threadpoolctl import threadpool_limits

    import plugtorch
    plugtorch.ones(1)  # the backend registers, and with it the BLAS pool the rules read
    with threadpool_limits(limits=1, user_api="blas"):
        assert gemm._pool_follows_blas() and native._kernels.pool_info()[0] == 1, \
            "the pool does not follow OpenBLAS's thread count here"
        yield


@pytest.fixture
def two_threads():
    """A context manager: two BLAS threads inside it, which the native kernels' pool follows, so a
    kernel splits over two jobs (skips where the pool does not follow OpenBLAS's thread count)."""
    from plugtorch_backends.numpy_backend import native
    from plugtorch_backends.numpy_backend.native import gemm
    from threadpoolctl import threadpool_limits

    import plugtorch
    plugtorch.ones(1)  # the backend registers, and with it the BLAS pool the kernels follow
    if not gemm._pool_follows_blas():
        pytest.skip("the native kernels' pool does not follow OpenBLAS's thread count here")

    @contextlib.contextmanager
    def limits():
        with threadpool_limits(limits=2, user_api="blas"):
            assert native._kernels.pool_info()[0] == 2, "the pool does not follow OpenBLAS's thread count here"
            yield
    return limits
