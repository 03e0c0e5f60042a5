"""plugtorch.save / load: torch's zip format, the weights_only reader and safe globals, whole
objects with weights_only=False, refusal of bare pickles, atomic writes."""
from __future__ import annotations

import io
import json
import math
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import plugtorch
from plugtorch import nn, optim
from plugtorch.serialization import (
    UnsafeCheckpointError,
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
)


class Net(nn.Module):
    """A model of the user's own (importable, as pickle needs), holding a tied weight."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.register_buffer("scale", plugtorch.full((3,), 2.0))
        self.note = "kept as an attribute"

    def forward(self, x):
        return self.body(x) * self.scale


class Config:
    """A plain class of the user's, holding a tensor: loadable once allowed as a safe global."""

    def __init__(self, lr, table):
        self.lr, self.table = lr, table


def _state():
    w = plugtorch.randn(3, 4, generator=plugtorch.Generator().manual_seed(0))
    return {
        "model": OrderedDict([("fc.weight", w), ("fc.bias", plugtorch.zeros(4, dtype=plugtorch.float64)),
                              ("steps", plugtorch.tensor(7))]),
        "epoch": 3, "lr": 1e-3, "name": "mlp", "done": False, "nothing": None,
        "history": [0.5, 0.25, math.inf], "betas": (0.9, 0.999),
        "state": {0: {"step": 2, "exp_avg": plugtorch.ones(2)}},
        "mask": plugtorch.tensor([True, False]), "bytes": plugtorch.tensor([1, 2], dtype=plugtorch.uint8),
        "dtype": plugtorch.float16,
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


def test_torch_reads_the_file_with_weights_only(tmp_path, torch):
    obj = _state()
    plugtorch.save(obj, tmp_path / "c.pt")
    theirs = torch.load(tmp_path / "c.pt", weights_only=True)
    assert list(theirs) == list(obj) and isinstance(theirs["model"], OrderedDict)
    for key in ("fc.weight", "fc.bias", "steps"):
        np.testing.assert_array_equal(theirs["model"][key].numpy(), obj["model"][key].numpy())
    assert theirs["model"]["fc.bias"].dtype == torch.float64 and theirs["dtype"] == torch.float16
    assert theirs["mask"].tolist() == [True, False] and theirs["betas"] == (0.9, 0.999)
    with zipfile.ZipFile(tmp_path / "c.pt") as zf:
        assert {"archive/data.pkl", "archive/byteorder", "archive/version"} <= set(zf.namelist())


def test_a_parameter_and_a_transposed_tensor_reach_torch_intact(tmp_path, torch):
    p = nn.Parameter(plugtorch.arange(6.0).reshape(2, 3))
    plugtorch.save({"p": p, "t": p.detach().t(), "empty": plugtorch.zeros(0, 2)}, tmp_path / "p.pt")
    theirs = torch.load(tmp_path / "p.pt")
    assert isinstance(theirs["p"], torch.nn.Parameter) and theirs["p"].requires_grad
    assert theirs["t"].tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert theirs["empty"].shape == (0, 2)


def _legacy_file(path, obj_node, arrays):
    """A file as plugtorch wrote them before it wrote torch's format: JSON and .npy records."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugtorch.json", json.dumps({"format": "plugtorch.save", "version": 1,
                                                  "object": obj_node}))
        for i, arr in enumerate(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=arr.dtype == object)
            zf.writestr(f"tensors/{i}.npy", buf.getvalue())


def test_files_of_earlier_plugtorch_versions_still_load(tmp_path):
    node = {"__dict__": [["w", {"__tensor__": 0, "dtype": "float32", "device": "numpy",
                                "requires_grad": True}], ["n", 3]], "ordered": True}
    _legacy_file(tmp_path / "old.pt", node, [np.arange(3, dtype=np.float32)])
    out = plugtorch.load(tmp_path / "old.pt")
    assert isinstance(out, OrderedDict) and out["n"] == 3
    assert out["w"].tolist() == [0.0, 1.0, 2.0] and out["w"].requires_grad


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


def test_object_arrays_inside_an_old_archive_are_refused(tmp_path):
    _legacy_file(tmp_path / "sneaky.pt", {"__dict__": [["w", {"__ndarray__": 0}]], "ordered": False},
                 [np.array([{"a": 1}], dtype=object)])
    with pytest.raises(UnsafeCheckpointError, match="without pickling"):
        plugtorch.load(tmp_path / "sneaky.pt")


def test_an_unpicklable_object_leaves_no_file_behind(tmp_path):
    path = tmp_path / "x.pt"
    with pytest.raises((pickle.PicklingError, AttributeError), match="local"):
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


class _Crash:
    def __reduce__(self):
        raise KeyboardInterrupt("simulated crash while writing")


def test_crash_mid_write_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    plugtorch.save({"epoch": 1, "w": plugtorch.ones(1000)}, path)
    before = path.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        plugtorch.save({"epoch": 2, "w": plugtorch.zeros(1000), "v": _Crash()}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # no temporary file left behind
    assert plugtorch.load(path)["epoch"] == 1


def test_generator_state_round_trip_resumes_the_stream(tmp_path):
    g = plugtorch.Generator().manual_seed(9)
    plugtorch.rand(5, generator=g)
    plugtorch.save({"rng": g.get_state()}, tmp_path / "g.pt")
    expected = plugtorch.rand(5, generator=g)
    g2 = plugtorch.Generator()
    g2.set_state(plugtorch.load(tmp_path / "g.pt")["rng"])
    np.testing.assert_array_equal(plugtorch.rand(5, generator=g2).numpy(), expected.numpy())


# -- whole objects, weights_only and safe globals ------------------------------------------------

def test_a_whole_model_round_trips_with_weights_only_false(tmp_path):
    model = Net()
    model.eval()
    plugtorch.save(model, tmp_path / "model.pt")
    loaded = plugtorch.load(tmp_path / "model.pt", weights_only=False)
    assert type(loaded) is Net and not loaded.training and loaded.note == "kept as an attribute"
    assert isinstance(loaded.body[0].weight, nn.Parameter) and loaded.body[0].weight.requires_grad
    assert list(loaded.state_dict()) == list(model.state_dict())
    x = plugtorch.randn(5, 4, generator=plugtorch.Generator().manual_seed(1))
    np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    loaded.body[0].weight.data.mul_(0)  # its own memory, not the saved model's
    assert model.body[0].weight.abs().sum().item() > 0


def test_the_weights_only_reader_refuses_a_model_saying_what_to_do(tmp_path):
    plugtorch.save(Net(), tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError, match=r"Net.*weights_only=False.*add_safe_globals"):
        plugtorch.load(tmp_path / "model.pt")
    with pytest.raises(UnsafeCheckpointError, match="no code from the file ran"):
        plugtorch.load(tmp_path / "model.pt", weights_only=None)  # None means True, as in torch


def test_an_optimizer_round_trips_with_its_model(tmp_path):
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = plugtorch.randn(4, 3, generator=plugtorch.Generator().manual_seed(2))
    model(x).sum().backward()
    opt.step()
    plugtorch.save({"model": model, "opt": opt}, tmp_path / "both.pt")
    loaded = plugtorch.load(tmp_path / "both.pt", weights_only=False)
    model2, opt2 = loaded["model"], loaded["opt"]
    assert opt2.param_groups[0]["params"][0] is model2.weight  # shared objects stay shared
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    np.testing.assert_allclose(model2.weight.detach().numpy(), model.weight.detach().numpy(), rtol=1e-6)


def test_a_class_allowed_by_safe_globals_loads_with_weights_only(tmp_path):
    clear_safe_globals()
    plugtorch.save({"cfg": Config(0.5, plugtorch.arange(3))}, tmp_path / "cfg.pt")
    with pytest.raises(UnsafeCheckpointError, match="Config"):
        plugtorch.load(tmp_path / "cfg.pt")
    with safe_globals([Config]):
        assert get_safe_globals() == [Config]
        cfg = plugtorch.load(tmp_path / "cfg.pt")["cfg"]
    assert get_safe_globals() == []
    assert type(cfg) is Config and cfg.lr == 0.5
    assert isinstance(cfg.table, plugtorch.Tensor) and cfg.table.tolist() == [0, 1, 2]
    add_safe_globals([(Config, f"{Config.__module__}.Config")])
    try:
        assert plugtorch.load(tmp_path / "cfg.pt")["cfg"].lr == 0.5
    finally:
        clear_safe_globals()
    with pytest.raises(UnsafeCheckpointError):
        plugtorch.load(tmp_path / "cfg.pt")


def test_numpy_arrays_need_weights_only_false_as_in_torch(tmp_path, torch):
    plugtorch.save({"a": np.arange(3, dtype=np.int16)}, tmp_path / "np.pt")
    with pytest.raises(UnsafeCheckpointError, match="numpy"):
        plugtorch.load(tmp_path / "np.pt")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "np.pt")
    out = plugtorch.load(tmp_path / "np.pt", weights_only=False)["a"]
    assert out.dtype == np.int16 and out.tolist() == [0, 1, 2]
    # torch's recipe for allowing them works here too
    from numpy._core.multiarray import _reconstruct
    with safe_globals([_reconstruct, np.ndarray, np.dtype, type(np.dtype(np.int16))]):
        assert plugtorch.load(tmp_path / "np.pt")["a"].tolist() == [0, 1, 2]


def test_a_model_torch_pickled_loads_as_plugtorch_classes(tmp_path, torch):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))
    torch.save(theirs, tmp_path / "seq.pt")
    ours = plugtorch.load(tmp_path / "seq.pt", weights_only=False)
    assert type(ours) is nn.Sequential and type(ours[0]) is nn.Linear and type(ours[1]) is nn.Tanh
    assert isinstance(ours[0].weight, nn.Parameter)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with torch.no_grad():
        expected = theirs(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(plugtorch.from_numpy(x)).detach().numpy(), expected, rtol=1e-5,
                               atol=1e-6)
    ours.add_module("3", nn.ReLU())  # its tables are plugtorch's again
    assert len(ours) == 4
    # and its state_dict still loads with the default, weights-only reader
    torch.save(theirs.state_dict(), tmp_path / "sd.pt")
    assert list(plugtorch.load(tmp_path / "sd.pt")) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_a_torch_class_plugtorch_lacks_is_named(tmp_path, torch):
    torch.save(torch.nn.Bilinear(2, 2, 1), tmp_path / "bilinear.pt")
    with pytest.raises(pickle.UnpicklingError, match=r"torch\.nn\.modules\.linear\.Bilinear"):
        plugtorch.load(tmp_path / "bilinear.pt", weights_only=False)


def test_load_arguments_torch_has_and_plugtorch_does_not_support_are_refused(tmp_path):
    plugtorch.save({"w": plugtorch.ones(1)}, tmp_path / "w.pt")
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        plugtorch.load(tmp_path / "w.pt", pickle_module=pickle, weights_only=True)
    assert plugtorch.load(tmp_path / "w.pt", pickle_module=pickle, weights_only=False)["w"].item() == 1
    with pytest.raises(ValueError, match="mmap"):
        plugtorch.load(tmp_path / "w.pt", mmap=True)
