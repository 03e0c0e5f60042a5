"""plugtorch.load reads torch.save files without running code, and refuses malicious ones."""
from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import plugtorch
from plugtorch.serialization import UnsafeCheckpointError

from .torch_models import images, plugtorch_model, plugtorch_outputs, torch_twin, train_a_little


@pytest.mark.parametrize("name", ["mlp", "cnn", "bn"])
def test_state_dicts_saved_by_torch_give_the_same_outputs(torch, tmp_path, name):
    torch.manual_seed(0)
    twin = train_a_little(torch, torch_twin(torch, name))
    path = tmp_path / f"{name}.pt"
    torch.save(twin.state_dict(), path)
    state = plugtorch.load(path)
    assert isinstance(state, OrderedDict) and list(state) == list(twin.state_dict())
    model = plugtorch_model(name)
    model.load_state_dict(state)
    x = images()
    with torch.no_grad():
        expected = twin(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(plugtorch_outputs(model, x), expected, rtol=1e-4, atol=1e-5)


def test_everything_weights_only_accepts(torch, tmp_path):
    base = torch.arange(10.0)
    obj = {
        "param": torch.nn.Parameter(torch.ones(2)),
        "transposed": torch.arange(6).view(2, 3).t(),           # strides (1, 3)
        "views": (base[2:5], base[5:]),                          # one storage, two offsets
        "ints": [torch.tensor(7, dtype=torch.int16), torch.tensor([True, False])],
        "empty": torch.zeros(0, 3), "dtype": torch.float16, "size": torch.Size([2, 3]),
        "bytes": b"\x00\xff", "set": {1, 2}, "nested": {"lr": 0.1, "name": "adam", "none": None},
        "half": torch.tensor([0.5, -1.0], dtype=torch.float16), "bf16": torch.tensor([1.5], dtype=torch.bfloat16),
    }
    torch.save(obj, tmp_path / "misc.pt")
    with pytest.warns(UserWarning, match="bfloat16 tensors were widened"):
        out = plugtorch.load(tmp_path / "misc.pt")
    assert isinstance(out["param"], plugtorch.nn.Parameter) and out["param"].requires_grad
    np.testing.assert_array_equal(out["transposed"].numpy(), obj["transposed"].numpy())
    np.testing.assert_array_equal(out["views"][0].numpy(), [2, 3, 4])
    np.testing.assert_array_equal(out["views"][1].numpy(), [5, 6, 7, 8, 9])
    assert out["ints"][0].dtype is plugtorch.int16 and out["ints"][0].shape == () and out["ints"][0].item() == 7
    assert out["ints"][1].tolist() == [True, False]
    assert out["empty"].shape == (0, 3) and out["dtype"] is plugtorch.float16
    assert out["size"] == (2, 3) and out["bytes"] == b"\x00\xff" and out["set"] == {1, 2}
    assert out["nested"] == {"lr": 0.1, "name": "adam", "none": None}
    assert out["half"].dtype is plugtorch.float16 and out["bf16"].dtype is plugtorch.float32
    assert out["bf16"].item() == 1.5
    out["transposed"].add_(1)  # each tensor owns writable memory


def test_a_big_endian_archive_is_byteswapped(torch, tmp_path):
    torch.save({"w": torch.tensor([1.0, -2.0, 3.5]), "i": torch.tensor([1, 256])}, tmp_path / "le.pt")
    with zipfile.ZipFile(tmp_path / "le.pt") as src, zipfile.ZipFile(tmp_path / "be.pt", "w") as dst:
        for name in src.namelist():
            raw = src.read(name)
            if name.endswith("byteorder"):
                raw = b"big"
            elif "/data/" in name and not name.endswith("serialization_id"):
                itemsize = 4 if name.endswith("/0") else 8
                raw = np.frombuffer(raw, dtype=f"<{'f' if itemsize == 4 else 'i'}{itemsize}").byteswap().tobytes()
            dst.writestr(name, raw)
    out = plugtorch.load(tmp_path / "be.pt")
    assert out["w"].tolist() == [1.0, -2.0, 3.5] and out["i"].tolist() == [1, 256]


def test_no_torch_import_is_needed(torch, tmp_path):
    torch.save({"w": torch.arange(3.0)}, tmp_path / "w.pt")
    code = ("import sys; sys.modules['torch'] = None\n"  # any `import torch` now fails
            "import plugtorch\n"
            f"print(plugtorch.load({str(tmp_path / 'w.pt')!r})['w'].tolist())")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[0.0, 1.0, 2.0]"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit is deprecated in 2.13
def test_torchscript_archives_are_refused(torch, tmp_path):
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), tmp_path / "scripted.pt")
    with pytest.raises(UnsafeCheckpointError, match="TorchScript"):
        plugtorch.load(tmp_path / "scripted.pt")


# -- malicious files: each would run code if unpickled; none may -------------------------------

def _archive(path, payload: bytes, storages: dict | None = None) -> None:
    """A zip laid out like torch.save's, with ``payload`` as its data.pkl."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\n")
        for key, raw in (storages or {}).items():
            zf.writestr(f"archive/data/{key}", raw)


class _Exploit:
    """Unpickles into a call of ``fn(*args)``: what a malicious checkpoint carries."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def _exploits(marker: str) -> dict[str, bytes]:
    """Pickles that create ``marker`` when unpickled (test_the_exploits_are_real checks it)."""
    touch = _Exploit(os.system, f"touch {marker}")
    return {
        "reduce os.system": pickle.dumps({"w": touch}, protocol=2),
        "eval, protocol 4": pickle.dumps(_Exploit(eval, f"open({marker!r}, 'w')"), protocol=4),
        "inside a state dict": pickle.dumps(OrderedDict(w=[1, 2, touch]), protocol=2),
        "INST opcode": b"(S'touch " + marker.encode() + b"'\nios\nsystem\n.",
        "subprocess, protocol 5": pickle.dumps(_Exploit(subprocess.check_output, ["touch", marker]),
                                               protocol=5),
    }


def _tricks() -> dict[str, bytes]:
    """Pickles that reach for something unsafe through a name the reader does allow."""
    rebuild = b"ctorch._utils\n_rebuild_tensor_v2\n"
    return {
        "getattr on an allowed name": b"cbuiltins\ngetattr\n(" + rebuild + b"S'__globals__'\ntR.",
        "rebuild with a foreign storage": rebuild + b"(cos\nsystem\nK\x00)))\x89tR.",
        "a storage type called": b"ctorch\nFloatStorage\n(S'x'\ntR.",
    }


def test_the_exploits_are_real(tmp_path):
    for case, payload in _exploits(str(tmp_path / "ran")).items():
        pickle.loads(payload)  # what an ordinary unpickler does with them
        assert (tmp_path / "ran").exists(), case
        (tmp_path / "ran").unlink()


@pytest.mark.parametrize("case", list(_exploits("/x")) + list(_tricks()))
def test_malicious_pickles_are_refused_and_never_run(tmp_path, case):
    marker = str(tmp_path / "pwned")
    payload = {**_exploits(marker), **_tricks()}[case]
    _archive(tmp_path / "evil.pt", payload)
    with pytest.raises(UnsafeCheckpointError, match="refused|not a readable"):
        plugtorch.load(tmp_path / "evil.pt")
    assert not os.path.exists(marker), f"{case}: code from the file ran"


def test_torch_refuses_them_too(torch, tmp_path):
    marker = str(tmp_path / "pwned")
    _archive(tmp_path / "evil.pt", _exploits(marker)["reduce os.system"])
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "evil.pt", weights_only=True)
    assert not os.path.exists(marker)


def test_extension_codes_cannot_smuggle_a_global(tmp_path):
    import copyreg
    marker = str(tmp_path / "pwned")
    copyreg.add_extension("os", "system", 0xF1)
    try:
        payload = b"\x80\x02\x82\xf1(S'touch " + marker.encode() + b"'\ntR."  # EXT1 0xf1 -> os.system
        _archive(tmp_path / "evil.pt", payload)
        with pytest.raises(UnsafeCheckpointError, match="os.system"):
            plugtorch.load(tmp_path / "evil.pt")
    finally:
        copyreg.remove_extension("os", "system", 0xF1)
    assert not os.path.exists(marker)


def _storage_ref(key: str, numel: int) -> bytes:
    return (b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX" + len(key).to_bytes(4, "little")
            + key.encode() + b"X\x03\x00\x00\x00cpuK" + bytes([numel]) + b"tQ")


def test_out_of_bounds_views_are_refused_not_read(tmp_path):
    # a tensor of 4 elements claimed over a storage of 2: reading it would leak memory
    payload = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + _storage_ref("0", 2)
               + b"K\x00K\x04\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtR.")
    _archive(tmp_path / "oob.pt", payload, {"0": np.ones(2, np.float32).tobytes()})
    with pytest.raises(UnsafeCheckpointError, match="reach element 3 of a storage of 2"):
        plugtorch.load(tmp_path / "oob.pt")


def test_setting_attributes_on_a_tensor_is_refused(tmp_path):
    # BUILD after the rebuild: a pickle trying to overwrite a tensor's internals
    payload = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + _storage_ref("0", 2)
               + b"K\x00K\x02\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtR}X\x05\x00\x00\x00_dataK\x01sb.")
    _archive(tmp_path / "build.pt", payload, {"0": np.ones(2, np.float32).tobytes()})
    with pytest.raises(UnsafeCheckpointError, match="set attributes on a tensor"):
        plugtorch.load(tmp_path / "build.pt")


def test_a_truncated_storage_is_refused(tmp_path):
    payload = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + _storage_ref("0", 4)
               + b"K\x00K\x04\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtR.")
    _archive(tmp_path / "short.pt", payload, {"0": b"\x00" * 8})
    with pytest.raises(UnsafeCheckpointError, match="fewer than its 4 elements"):
        plugtorch.load(io.BytesIO((tmp_path / "short.pt").read_bytes()))
