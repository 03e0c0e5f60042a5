"""How the MPI plugin hands tensor memory to MPI (backends/mpi/buffers.py), in-process.

A device backend is simulated by arrays that are not NumPy arrays: with a CUDA-aware MPI
they must go to MPI as they are, otherwise through a host staging copy that is written
back. No MPI is initialised here.
"""
from __future__ import annotations

import types

import numpy as np
import pytest
from plugtorch_backends.mpi.buffers import Buffer, cuda_aware, write

import plugtorch


class DeviceArray:
    """Stands in for a CuPy array: not a NumPy array, reachable only through its backend."""

    def __init__(self, host):
        self.host = np.array(host)
        self.shape, self.dtype = self.host.shape, self.host.dtype


def device_tensor(values):
    primitives = {
        "to_host": lambda x: x.host.copy(),
        "from_host": lambda a, dtype: DeviceArray(a),
        "contiguous": lambda x: x,
        "setitem": lambda x, index, v: x.host.__setitem__(index, v.host if isinstance(v, DeviceArray) else v),
        "zeros": lambda shape, dtype: DeviceArray(np.zeros(shape, np.float32)),
    }
    return types.SimpleNamespace(_data=DeviceArray(np.asarray(values, np.float32)), _vc=[0],
                                 _backend=types.SimpleNamespace(primitives=primitives), dtype=plugtorch.float32)


def test_contiguous_host_tensor_is_communicated_in_place():
    t = plugtorch.arange(4.0)
    buf = Buffer(t, device_direct=False)
    assert buf.array is t._data and not buf.copied and not buf.staged
    buf.array *= 2  # what MPI would write
    buf.store()
    np.testing.assert_array_equal(t.numpy(), [0, 2, 4, 6])
    assert t._version == 1


def test_strided_view_goes_through_a_contiguous_copy_written_back():
    base = plugtorch.arange(6.0).reshape(2, 3)
    view = base.t()
    buf = Buffer(view, device_direct=False)
    assert buf.copied and buf.array.flags.c_contiguous
    buf.array[...] = -1
    buf.store()
    np.testing.assert_array_equal(base.numpy(), -np.ones((2, 3)))


def test_device_tensor_is_staged_through_host_without_cuda_aware_mpi():
    t = device_tensor([1.0, 2.0])
    buf = Buffer(t, device_direct=False)
    assert buf.staged and isinstance(buf.array, np.ndarray)
    assert isinstance(buf.empty_like(3), np.ndarray) and buf.empty_like(3).shape == (3, 2)
    buf.array += 10
    buf.store()
    np.testing.assert_array_equal(t._data.host, [11, 12])
    write(t, np.array([5.0, 6.0], np.float32), from_host=True)
    np.testing.assert_array_equal(t._data.host, [5, 6])
    assert t._vc[0] == 2


def test_device_tensor_goes_direct_with_cuda_aware_mpi():
    t = device_tensor([1.0, 2.0])
    buf = Buffer(t, device_direct=True)
    assert buf.array is t._data and not buf.staged
    assert isinstance(buf.empty_like(2), DeviceArray)


class FakeComm:
    def __init__(self, kinds):
        self.kinds = kinds

    def Get_info(self):
        kinds = self.kinds
        return types.SimpleNamespace(Get=lambda key: kinds if key == "mpi_memory_alloc_kinds" else None,
                                     Free=lambda: None)


@pytest.mark.parametrize("kinds, expected", [("mpi,system", False), (None, False),
                                             ("mpi,system,cuda:device,cuda:host", True)])
def test_cuda_awareness_is_read_from_the_library(monkeypatch, kinds, expected):
    monkeypatch.delenv("PLUGTORCH_MPI_CUDA_AWARE", raising=False)
    assert cuda_aware(FakeComm(kinds)) is expected
    assert cuda_aware(FakeComm(kinds), query_cuda_support=lambda: 1) is True


def test_cuda_awareness_override(monkeypatch):
    monkeypatch.setenv("PLUGTORCH_MPI_CUDA_AWARE", "1")
    assert cuda_aware(FakeComm("mpi,system")) is True
    monkeypatch.setenv("PLUGTORCH_MPI_CUDA_AWARE", "0")
    assert cuda_aware(FakeComm("cuda:device"), query_cuda_support=lambda: 1) is False


def test_asking_about_cuda_support_does_not_initialise_mpi():
    import subprocess
    import sys
    code = ("import sys; from plugtorch_backends.mpi.buffers import cuda_aware, _mpix_query_cuda_support; "
            "assert _mpix_query_cuda_support() is None; print('mpi4py.MPI' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_the_pypi_mpi_library_reports_it_is_not_cuda_aware():
    import subprocess
    import sys
    pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install mpich mpi4py")
    code = ("from mpi4py import MPI; from plugtorch_backends.mpi.buffers import cuda_aware, "
            "_mpix_query_cuda_support as q; f = q(); print(f is not None and f(), cuda_aware(MPI.COMM_WORLD))")
    env = {k: v for k, v in __import__("os").environ.items() if k != "PLUGTORCH_MPI_CUDA_AWARE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    # MPICH's wheel exports MPIX_Query_cuda_support and answers 0; a library without it gives None
    assert done.stdout.split() in (["0", "False"], ["False", "False"]), done.stdout + done.stderr
