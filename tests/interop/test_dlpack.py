"""Arrays without copies: DLPack both ways with NumPy and PyTorch, from_numpy, __array__, pickling."""
from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import plugtorch


def test_numpy_to_plugtorch_shares_memory_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = plugtorch.from_dlpack(a)
    assert t.shape == (2, 3) and t.dtype is plugtorch.float32 and t.backend == "numpy"
    t.add_(1)                      # a write through plugtorch ...
    assert a[0, 0] == 1.0          # ... is seen by NumPy
    a[1, 2] = -5                   # and the other way round
    assert t[1, 2].item() == -5


def test_plugtorch_to_numpy_shares_memory():
    t = plugtorch.zeros(4)
    a = np.from_dlpack(t)
    a[0] = 3
    assert t[0].item() == 3
    t[1] = 7
    assert a[1] == 7


def test_torch_both_ways(torch):
    x = torch.arange(4.0)
    t = plugtorch.from_dlpack(x)
    t[0] = 100
    assert x[0].item() == 100
    y = torch.from_dlpack(plugtorch.arange(6).reshape(2, 3).t())  # strides travel too
    assert y.stride() == (1, 3) and y.tolist() == [[0, 3], [1, 4], [2, 5]]
    p = plugtorch.ones(3)
    z = torch.from_dlpack(p)
    z.mul_(4)
    assert p.tolist() == [4.0, 4.0, 4.0]
    for dtype, pt_dtype in [(torch.float16, plugtorch.float16), (torch.int64, plugtorch.int64),
                            (torch.bool, plugtorch.bool), (torch.uint8, plugtorch.uint8)]:
        assert plugtorch.from_dlpack(torch.zeros(2, dtype=dtype)).dtype is pt_dtype
        assert torch.from_dlpack(plugtorch.zeros(2, dtype=pt_dtype)).dtype is dtype
    assert plugtorch.from_dlpack(torch.tensor(2.5)).shape == ()
    assert plugtorch.from_dlpack(torch.zeros(0, 3)).shape == (0, 3)


def test_a_bare_capsule_is_read_only(torch):
    x = torch.arange(3.0)
    t = plugtorch.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    x[1] = 9  # still the same memory ...
    assert t.tolist() == [0.0, 9.0, 2.0]
    assert not t.numpy().flags.writeable  # ... but a legacy capsule cannot say it may be written


def test_copy_argument(torch):
    x = torch.arange(3.0)
    c = plugtorch.from_dlpack(x, copy=True)
    c[0] = 5
    assert x[0].item() == 0
    a = np.arange(3.0)
    assert np.shares_memory(plugtorch.from_dlpack(a, copy=False).numpy(), a)


def test_refusals_match_torch(torch):
    with pytest.raises(BufferError, match="Can't export tensors that require gradient"):
        plugtorch.from_dlpack(torch.ones(2, requires_grad=True))
    with pytest.raises(BufferError, match="Can't export tensors that require gradient"):
        torch.from_dlpack(plugtorch.ones(2, requires_grad=True))
    z = plugtorch.from_dlpack(torch.tensor([1 + 2j, 3 - 1j]))  # complex crosses both ways
    assert z.dtype is plugtorch.complex64 and z.tolist() == [1 + 2j, 3 - 1j]
    assert torch.from_dlpack(z).tolist() == [1 + 2j, 3 - 1j]
    with pytest.raises(TypeError, match="expected an object with __dlpack__"):
        plugtorch.from_dlpack([1, 2])


def test_dlpack_device_is_the_cpu():
    assert plugtorch.ones(1).__dlpack_device__() == (1, 0)  # kDLCPU


def test_cupy_arrays_when_present():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (no CUDA device here)")
    backends = [b for b in plugtorch.get_registry().backends.values()
                if b.available and b.array_module is cupy]
    if not backends:
        pytest.skip("no registered backend keeps its arrays in CuPy")
    a = cupy.arange(3, dtype=cupy.float32)
    t = plugtorch.from_dlpack(a)
    t.add_(1)
    assert float(a[0]) == 1.0 and t.backend == backends[0].name


# -- from_numpy and __array__, as torch's ------------------------------------------------------

def test_from_numpy_shares_memory():
    a = np.zeros((2, 2), dtype=np.int32)
    t = plugtorch.from_numpy(a)
    t[0, 1] = 4
    a[1, 0] = 2
    assert a[0, 1] == 4 and t[1, 0].item() == 2 and t.dtype is plugtorch.int32


@pytest.mark.parametrize("bad", [[1, 2], np.float32(1.0), np.array([None, 1]), np.array(["a"]),
                                 np.arange(3, dtype=">f4")], ids=["list", "scalar", "object", "str",
                                                                  "big-endian"])
def test_from_numpy_refuses_what_torch_refuses(torch, bad):
    with pytest.raises(Exception) as theirs:
        torch.from_numpy(bad)
    with pytest.raises(type(theirs.value)) as ours:
        plugtorch.from_numpy(bad)
    assert str(ours.value).split(". The only")[0] == str(theirs.value).split(". The only")[0]


def test_from_numpy_warns_about_read_only_arrays():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        plugtorch.from_numpy(a)


def test_array_protocol_is_torchs(torch):
    t = plugtorch.arange(4.0)
    a = np.asarray(t)
    assert np.shares_memory(a, t.numpy())          # no copy on the host, as torch's
    assert not np.shares_memory(np.array(t, copy=True), a)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    msg = "Can't call numpy\\(\\) on Tensor that requires grad"
    for lib in (torch, plugtorch):
        with pytest.raises(RuntimeError, match=msg):
            np.asarray(lib.ones(2, requires_grad=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy 2's copy= keyword is understood, no fallback
        np.asarray(t, copy=False)


def test_tensors_pickle_for_worker_processes():
    p = plugtorch.nn.Parameter(plugtorch.randn(2, 3))
    for t in (plugtorch.arange(6).reshape(2, 3), p, plugtorch.tensor(True)):
        back = pickle.loads(pickle.dumps(t))
        assert type(back) is type(t) and back.dtype is t.dtype and back.requires_grad == t.requires_grad
        np.testing.assert_array_equal(back.detach().numpy(), t.detach().numpy())
    y = (p * 2).sum()
    assert not pickle.loads(pickle.dumps(y)).requires_grad  # the graph stays behind
