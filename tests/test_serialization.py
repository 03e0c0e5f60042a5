"""plugtorch.save / load: round trips without pickle, refusal of pickles, atomic writes."""
from __future__ import annotations

import io
import math
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import plugtorch
from plugtorch import optim
from plugtorch.serialization import UnsafeCheckpointError


def _state():
    w = plugtorch.randn(3, 4, generator=plugtorch.Generator().manual_seed(0))
    return {
        "model": OrderedDict([("fc.weight", w), ("fc.bias", plugtorch.zeros(4, dtype=plugtorch.float64)),
                              ("steps", plugtorch.tensor(7))]),
        "epoch": 3, "lr": 1e-3, "name": "mlp", "done": False, "nothing": None,
        "history": [0.5, 0.25, math.inf], "betas": (0.9, 0.999),
        "state": {0: {"step": 2, "exp_avg": plugtorch.ones(2)}},
        "mask": plugtorch.tensor([True, False]), "bytes": plugtorch.tensor([1, 2], dtype=plugtorch.uint8),
        "array": np.arange(3, dtype=np.int16), "dtype": plugtorch.float16,
        "rng": plugtorch.Generator().manual_seed(5).get_state(),
    }


def _assert_same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, plugtorch.Tensor):
        assert a.dtype is b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        assert a == b


def test_round_trip_of_nested_state(tmp_path):
    obj = _state()
    path = tmp_path / "ckpt.pt"
    plugtorch.save(obj, path)
    _assert_same(obj, plugtorch.load(path))


def test_round_trip_through_a_file_object_and_requires_grad():
    p = plugtorch.ones(2, requires_grad=True)
    buf = io.BytesIO()
    plugtorch.save({"p": p, "again": p}, buf)
    buf.seek(0)
    out = plugtorch.load(buf)
    assert out["p"].requires_grad and out["p"].is_leaf
    assert out["again"] is out["p"]  # a tensor saved twice is loaded once


def test_optimizer_state_dict_round_trip(tmp_path):
    p = plugtorch.ones(3, requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.grad = plugtorch.ones(3)
    opt.step()
    plugtorch.save(opt.state_dict(), tmp_path / "opt.pt")
    loaded = plugtorch.load(tmp_path / "opt.pt")
    assert loaded["param_groups"][0]["betas"] == (0.9, 0.999)
    q = plugtorch.ones(3, requires_grad=True)
    opt2 = optim.Adam([q], lr=0.1)
    opt2.load_state_dict(loaded)
    assert opt2.state[q]["step"] == 1


def test_file_is_an_npz_without_pickles(tmp_path):
    plugtorch.save(_state(), tmp_path / "c.pt")
    with np.load(tmp_path / "c.pt", allow_pickle=False) as npz:
        arrays = [name for name in npz.files if name != "plugtorch.json"]
        assert len(arrays) == 7 and all(npz[name].dtype != object for name in arrays)
    with zipfile.ZipFile(tmp_path / "c.pt") as zf:
        assert "plugtorch.json" in zf.namelist()


def test_pickled_files_are_refused_without_running_them(tmp_path):
    ran = tmp_path / "ran"

    class Exploit:
        def __reduce__(self):
            return (open, (str(ran), "w"))

    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"x": Exploit()}))
    with pytest.raises(UnsafeCheckpointError, match="never unpickles"):
        plugtorch.load(path)
    assert not ran.exists()


def test_torch_checkpoints_are_read_and_legacy_ones_refused(tmp_path, torch):
    # the restricted reader and its refusals are tested in tests/interop/test_torch_checkpoint.py
    torch.save({"w": torch.ones(2)}, tmp_path / "torch.pt")
    assert plugtorch.load(tmp_path / "torch.pt")["w"].tolist() == [1.0, 1.0]
    torch.save({"w": torch.ones(2)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(UnsafeCheckpointError, match="never unpickles a bare pickle"):
        plugtorch.load(tmp_path / "legacy.pt")


@pytest.mark.parametrize("kind", ["torch", "plugtorch"])
def test_a_truncated_checkpoint_is_refused_naming_the_file(tmp_path, kind, request):
    path = tmp_path / "whole.pt"
    if kind == "torch":
        torch = request.getfixturevalue("torch")
        torch.save({"w": torch.ones(64)}, path)
    else:
        plugtorch.save({"w": plugtorch.ones(64)}, path)
    raw = path.read_bytes()
    for cut in (10, len(raw) // 2, len(raw) - 30):
        with pytest.raises(UnsafeCheckpointError, match="not a readable"):
            plugtorch.load(io.BytesIO(raw[:cut]))


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_object_arrays_inside_an_archive_are_refused(tmp_path):
    path = tmp_path / "sneaky.pt"
    plugtorch.save({"w": plugtorch.ones(2)}, path)
    with zipfile.ZipFile(path, "a") as zf:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        zf.writestr("tensors/0.npy", buf.getvalue())  # a second entry of that name shadows the first
    with pytest.raises(UnsafeCheckpointError, match="without pickling"):
        plugtorch.load(path)


def test_unsupported_objects_are_rejected_before_writing(tmp_path):
    path = tmp_path / "x.pt"
    with pytest.raises(TypeError, match=r"obj\['f'\] of type .*function"):
        plugtorch.save({"f": lambda: 0}, path)
    assert not path.exists() and os.listdir(tmp_path) == []


def test_saved_files_get_ordinary_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        plugtorch.save({"x": 1}, tmp_path / "a.pt")
    finally:
        os.umask(umask)
    assert (tmp_path / "a.pt").stat().st_mode & 0o777 == 0o644
    os.chmod(tmp_path / "a.pt", 0o600)
    plugtorch.save({"x": 2}, tmp_path / "a.pt")  # overwriting keeps the file's mode
    assert (tmp_path / "a.pt").stat().st_mode & 0o777 == 0o600


def test_garbage_is_not_a_checkpoint(tmp_path):
    (tmp_path / "g.pt").write_bytes(b"hello world")
    with pytest.raises(ValueError, match="not a plugtorch checkpoint"):
        plugtorch.load(tmp_path / "g.pt")


def test_crash_mid_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    plugtorch.save({"epoch": 1, "w": plugtorch.ones(1000)}, path)
    before = path.read_bytes()
    calls = []
    real = np.lib.format.write_array

    def crash_after_one(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt("simulated crash while writing")
        return real(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", crash_after_one)
    with pytest.raises(KeyboardInterrupt):
        plugtorch.save({"epoch": 2, "w": plugtorch.zeros(1000), "v": plugtorch.zeros(5)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # no temporary file left behind
    monkeypatch.undo()
    assert plugtorch.load(path)["epoch"] == 1


def test_generator_state_round_trip_resumes_the_stream(tmp_path):
    g = plugtorch.Generator().manual_seed(9)
    plugtorch.rand(5, generator=g)
    plugtorch.save({"rng": g.get_state()}, tmp_path / "g.pt")
    expected = plugtorch.rand(5, generator=g)
    g2 = plugtorch.Generator()
    g2.set_state(plugtorch.load(tmp_path / "g.pt")["rng"])
    np.testing.assert_array_equal(plugtorch.rand(5, generator=g2).numpy(), expected.numpy())
