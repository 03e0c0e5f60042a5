"""plugtorch.load reads torch.save files without running code, and refuses malicious ones."""
from __future__ import annotations

import contextlib
import functools
import io
import os
import pickle
import struct
import subprocess
import sys
import tracemalloc
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

import plugtorch
from plugtorch.interop.torch_checkpoint import load_torch_zip
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
    assert out["half"].dtype is plugtorch.float16 and out["bf16"].dtype is plugtorch.bfloat16
    assert out["bf16"].item() == 1.5
    out["transposed"].add_(1)  # writable, as torch.load's tensors are


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


def _push(n: int) -> bytes:
    """The opcodes that push the int ``n`` (BININT1, BININT or LONG1, as pickle picks)."""
    return pickle.dumps(n, protocol=2)[2:-1]


def _ints(values) -> bytes:
    return b"(" + b"".join(_push(v) for v in values) + b"t"


def _storage_ref(key: str, numel: int) -> bytes:
    return (b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX" + len(key).to_bytes(4, "little")
            + key.encode() + b"X\x03\x00\x00\x00cpu" + _push(numel) + b"tQ")


def _tensor(numel: int, offset: int, size, stride) -> bytes:
    """The opcodes torch.save writes for a float32 tensor viewing storage "0" of ``numel``."""
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + _storage_ref("0", numel) + _push(offset)
            + _ints(size) + _ints(stride) + b"\x89ccollections\nOrderedDict\n)RtR")


@pytest.mark.parametrize("offset, size, stride, match", [
    (0, (4,), (1,), "reach element 3 of a storage of 2"),       # 4 elements over a storage of 2
    (5, (1,), (1,), "reach element 5 of a storage of 2"),       # an offset past the end
    (0, (2, 2), (1, 2**40), "reach element 1099511627777 of"),  # a stride past the end
    (0, (2**70,), (0,), "a size is an int of 71 bits, larger than any tensor's"),
    (-1, (1,), (1,), "offset -1"),
])
def test_out_of_bounds_views_are_refused_not_read(tmp_path, offset, size, stride, match):
    # reading such a view would leak whatever memory follows the storage
    _archive(tmp_path / "oob.pt", b"\x80\x02" + _tensor(2, offset, size, stride) + b".",
             {"0": np.ones(2, np.float32).tobytes()})
    with pytest.raises(UnsafeCheckpointError, match=match):
        plugtorch.load(tmp_path / "oob.pt")


def test_setting_attributes_on_a_tensor_is_refused(tmp_path):
    # BUILD after the rebuild: a pickle trying to overwrite a tensor's internals
    payload = b"\x80\x02" + _tensor(2, 0, (2,), (1,)) + b"}X\x05\x00\x00\x00_dataK\x01sb."
    _archive(tmp_path / "build.pt", payload, {"0": np.ones(2, np.float32).tobytes()})
    with pytest.raises(UnsafeCheckpointError, match="set attributes on a tensor"):
        plugtorch.load(tmp_path / "build.pt")


def test_a_truncated_storage_is_refused(tmp_path):
    _archive(tmp_path / "short.pt", b"\x80\x02" + _tensor(4, 0, (4,), (1,)) + b".", {"0": b"\x00" * 8})
    with pytest.raises(UnsafeCheckpointError, match="fewer than its 4 elements"):
        plugtorch.load(io.BytesIO((tmp_path / "short.pt").read_bytes()))


# -- what a small file may cost: views stay views, and nothing is allocated on the pickle's word --

@contextlib.contextmanager
def _memory_ceiling(extra: int = 256 << 20):
    """Cap this process's address space at what it maps now plus ``extra`` bytes, so that a
    runaway allocation fails with MemoryError instead of exhausting the machine (Linux; where
    there is no /proc the cap is skipped and the tracemalloc bound of _bounded_load still holds)."""
    try:
        import resource
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = min(limit for limit in (mapped + extra, soft, hard) if limit != resource.RLIM_INFINITY)
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _bounded_load(load, budget: int):
    """``load()``, failing the test if Python and NumPy together allocate more than ``budget``
    bytes at once during it."""
    tracemalloc.start()
    try:
        with _memory_ceiling():
            out = load()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= budget, f"loading took {peak} bytes at its peak, more than {budget}"
    return out


def test_a_stride_0_view_stays_a_view(tmp_path):
    # four bytes seen as 65536 x 65536: copied out, that would be 16 GiB
    _archive(tmp_path / "wide.pt", b"\x80\x02" + _tensor(1, 0, (65536, 65536), (0, 0)) + b".",
             {"0": np.float32(2.5).tobytes()})
    t = _bounded_load(lambda: plugtorch.load(tmp_path / "wide.pt"), 1 << 20)
    assert t.shape == (65536, 65536) and t.stride() == (0, 0)
    assert t[12345, 54321].item() == 2.5
    with pytest.raises(RuntimeError, match="refers to a single memory location"):
        t.add_(1)  # as torch: writing through a view whose elements overlap is refused


def test_views_of_one_storage_share_it_as_in_torch(torch, tmp_path):
    base = torch.arange(12.0).view(3, 4)
    saved = {"base": base, "row": base[1], "column": base[:, 2], "t": base.t(),
             "expanded": torch.arange(3.0).expand(2, 3)}
    torch.save(saved, tmp_path / "views.pt")
    ours, theirs = plugtorch.load(tmp_path / "views.pt"), torch.load(tmp_path / "views.pt")
    for key in saved:
        assert ours[key].stride() == theirs[key].stride(), key
    for out in (ours, theirs):
        out["row"].mul_(10)
        out["t"][2, 0] = -1.0  # base[0, 2], which "column" sees too
    for key in saved:
        np.testing.assert_array_equal(ours[key].numpy(), theirs[key].numpy(), err_msg=key)
    assert ours["base"][1, 0].item() == 40.0 and ours["column"][0].item() == -1.0


def test_moving_overlapping_views_to_another_device_is_bounded(tmp_path):
    # another device gets copies, not views: 4 bytes as 2**25 elements would be 128 MiB there
    _archive(tmp_path / "wide.pt", b"\x80\x02" + _tensor(1, 0, (2**25,), (0,)) + b".",
             {"0": np.float32(1.0).tobytes()})
    with pytest.raises(UnsafeCheckpointError, match="map_location='cpu', where views stay views"):
        _bounded_load(lambda: plugtorch.load(tmp_path / "wide.pt", map_location="cuda"), 1 << 20)


def _nested_lists_bottom_up(depth: int) -> bytes:
    # every list is finished before it goes into its parent
    return b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."


def _nested_lists_top_down(depth: int) -> bytes:
    # each list goes into its parent while still empty and is filled afterwards, so nothing
    # short of walking the result can tell how deep it gets
    def level(i: int) -> bytes:  # a new list into the memo and off the stack; parent, it, APPEND
        return (b"]r" + i.to_bytes(4, "little") + b"0j" + (i - 1).to_bytes(4, "little")
                + b"j" + i.to_bytes(4, "little") + b"a0")
    return b"\x80\x02]r\x00\x00\x00\x00" + b"".join(level(i) for i in range(1, depth)) + b"."


def test_lists_nested_100000_deep_are_refused_or_read(tmp_path):
    _archive(tmp_path / "deep.pt", _nested_lists_bottom_up(100_000))
    with pytest.raises(UnsafeCheckpointError, match="nests objects more than 1000 deep"):
        plugtorch.load(tmp_path / "deep.pt")
    _archive(tmp_path / "deep.pt", _nested_lists_top_down(100_000))
    out, depth = plugtorch.load(tmp_path / "deep.pt"), 1
    while out:
        out, depth = out[0], depth + 1
    assert depth == 100_000


def test_a_tuple_nested_a_million_deep_cannot_crash_the_interpreter(tmp_path):
    # hashing it as a dict key recurses in C with no limit: the process would die, not raise
    _archive(tmp_path / "deep.pt", b"\x80\x02}K\x01" + b"\x85" * 1_000_000 + b"K\x01s.")
    code = ("import plugtorch\n"
            f"try: plugtorch.load({str(tmp_path / 'deep.pt')!r})\n"
            "except plugtorch.serialization.UnsafeCheckpointError as e: print(e)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "nests objects more than 1000 deep" in res.stdout


@pytest.mark.parametrize("payload, match", [
    # LONG_BINPUT 2**31: the unpickler would grow its memo to 2**32 entries, 32 GiB of zeros
    (b"\x80\x02K\x01r\x00\x00\x00\x80.", "would make the unpickler allocate a memo"),
    # BINBYTES8 claiming a terabyte: the unpickler allocates what is claimed before reading
    (b"\x80\x04\x8e" + (2**40).to_bytes(8, "little") + b"xy.", "expected 1099511627776 bytes"),
    # torch.device of a thousand times a list of a thousand times one 64 KiB string: 65 GB as str()
    (b"\x80\x02ctorch\ndevice\nX\x00\x00\x01\x00" + b"x" * 2**16 + b"q\x00"
     + (b"0](" + b"h\x00" * 1000 + b"eq\x00") * 2 + b"\x85R.",
     r"torch.device\(\[\['xxx"),
], ids=["memo index", "bytes length", "str of a shared list"])
def test_claims_in_the_pickle_allocate_nothing(tmp_path, payload, match):
    _archive(tmp_path / "claims.pt", payload)
    with pytest.raises(UnsafeCheckpointError, match=match):
        _bounded_load(lambda: plugtorch.load(tmp_path / "claims.pt"), 1 << 20)


def test_a_torch_device_comes_back_as_its_name(torch, tmp_path):
    torch.save({"a": torch.device("cuda", 1), "b": torch.device("cpu")}, tmp_path / "dev.pt")
    assert plugtorch.load(tmp_path / "dev.pt") == {"a": "cuda:1", "b": "cpu"}


def _rezip(raw: bytes, change) -> bytes:
    """The archive ``raw`` written again, each record's (ZipInfo, bytes) passed through ``change``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            info, data = change(info, src.read(info))
            dst.writestr(info, data)
    return out.getvalue()


def test_deflated_records_are_read_and_other_methods_refused(torch, tmp_path):
    torch.save({"w": torch.arange(4.0)}, tmp_path / "w.pt")
    raw = (tmp_path / "w.pt").read_bytes()

    def method(m):
        def change(info, data):
            info.compress_type = m
            return info, data
        return change
    deflated = _rezip(raw, method(zipfile.ZIP_DEFLATED))
    assert plugtorch.load(io.BytesIO(deflated))["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert torch.load(io.BytesIO(deflated))["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(UnsafeCheckpointError, match="compressed with zip method 12"):
        plugtorch.load(io.BytesIO(_rezip(raw, method(zipfile.ZIP_BZIP2))))


def _data_span(raw: bytes, info: zipfile.ZipInfo) -> tuple[int, int]:
    """Where a record's bytes lie in the archive (after its local header, whose extra field
    torch pads to align the data, so it differs from the central directory's)."""
    name_len, extra_len = struct.unpack_from("<HH", raw, info.header_offset + 26)
    start = info.header_offset + 30 + name_len + extra_len
    return start, start + info.compress_size


def test_a_damaged_record_is_refused_naming_it(torch, tmp_path):
    torch.save({"w": torch.arange(4.0)}, tmp_path / "w.pt")
    raw = bytearray((tmp_path / "w.pt").read_bytes())
    with zipfile.ZipFile(tmp_path / "w.pt") as zf:
        start, _ = _data_span(bytes(raw), zf.getinfo("w/data/0"))
    raw[start] ^= 0xFF  # the record no longer matches its CRC
    with pytest.raises(UnsafeCheckpointError,
                       match=r"not a readable PyTorch checkpoint: w/data/0 cannot be read \(BadZipFile: Bad CRC"):
        plugtorch.load(io.BytesIO(bytes(raw)))


# -- fuzzing: a damaged real file is refused or loaded, whatever the damage -----------------------

FUZZ = settings(max_examples=int(os.environ.get("PLUGTORCH_FUZZ_EXAMPLES", "1000")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@functools.cache
def _torch_files(torch) -> dict[str, bytes]:
    """Small archives written by torch.save, covering what the reader handles."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    adam = torch.optim.Adam(model.parameters())
    model(torch.randn(5, 4)).sum().backward()
    adam.step()
    base = torch.arange(12.0).view(3, 4)
    objects = {
        "state dict": model.state_dict(),
        "optimizer": adam.state_dict(),
        "dtypes": {"half": torch.ones(3, dtype=torch.float16), "bf16": torch.ones(2, dtype=torch.bfloat16),
                   "double": torch.zeros(2, 2, dtype=torch.float64), "long": torch.arange(3),
                   "int": torch.tensor([7], dtype=torch.int32), "byte": torch.tensor([1, 255], dtype=torch.uint8),
                   "bool": torch.tensor([True, False]), "empty": torch.zeros(0, 2),
                   "nested": [{"x": (torch.ones(1), torch.device("cpu"))}, [torch.zeros(2)]],
                   "meta": {"lr": 0.1, "name": "adam", "ids": {1, 2}, "dtype": torch.float16}},
        "views": {"base": base, "row": base[1], "t": base.t(), "expanded": torch.arange(3.0).expand(4, 3),
                  "param": torch.nn.Parameter(torch.ones(2))},
    }
    files = {}
    for name, obj in objects.items():
        buf = io.BytesIO()
        torch.save(obj, buf)
        files[name] = buf.getvalue()
    return files


def _spans(raw: bytes) -> dict[str, list[tuple[int, int]]]:
    """Where the pickle's bytes, the storages' bytes and the zip structure around them lie."""
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        records = {info.filename: _data_span(raw, info) for info in zf.infolist()}
    edges = [0] + [x for span in sorted(records.values()) for x in span] + [len(raw)]
    spans = {"pickle": [s for n, s in records.items() if n.endswith("/data.pkl")],
             "storages": [s for n, s in records.items() if "/data/" in n],
             "zip structure": list(zip(edges[::2], edges[1::2]))}
    return {where: [(a, b) for a, b in found if a < b] for where, found in spans.items()}


def _damage(raw: bytes, draw) -> bytes:
    """``raw`` with damage chosen by ``draw`` (Hypothesis's): where it falls, what it does."""
    where = draw(st.sampled_from(["pickle", "storages", "zip structure"]), label="where")
    how = draw(st.sampled_from(["flip bytes", "overwrite a range", "cut a range out",
                                "truncate a record"]), label="how")
    spans = _spans(raw)[where]
    out = bytearray(raw)

    def position() -> int:
        start, end = draw(st.sampled_from(spans))
        return draw(st.integers(start, end - 1))
    if how == "flip bytes":
        for _ in range(draw(st.integers(1, 8))):
            out[position()] ^= draw(st.integers(1, 255))
    elif how == "overwrite a range":
        at, length = position(), draw(st.integers(1, 64))
        out[at:at + length] = draw(st.one_of(
            st.binary(min_size=length, max_size=length),
            st.sampled_from([b"\x00", b"\xff", b"\x7f", b"\x80"]).map(lambda b: b * length)))
    elif how == "cut a range out":
        at = position()
        del out[at:at + draw(st.integers(1, 64))]
    else:  # the archive written again around a shortened record, so that the reader meets it
        kind = {"pickle": lambda n: n.endswith("/data.pkl"), "storages": lambda n: "/data/" in n,
                "zip structure": lambda n: True}[where]
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            names = [n for n in zf.namelist() if kind(n)]
        cut, keep = draw(st.sampled_from(names)), draw(st.floats(0, 1, exclude_max=True))
        out = bytearray(_rezip(raw, lambda info, data: (info, data[:int(len(data) * keep)]
                                                        if info.filename == cut else data)))
    return bytes(out)


@FUZZ
@given(data=st.data())
def test_damaged_torch_files_are_refused_or_loaded(torch, data):
    # load_torch_zip rather than plugtorch.load: bytes zipfile cannot open at all (a truncated
    # file has lost its central directory) never reach this reader
    files = _torch_files(torch)
    raw = _damage(files[data.draw(st.sampled_from(sorted(files)), label="file")], data.draw)
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
    except Exception:
        reject()
    with zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # whatever a damaged file makes the reader warn about
        try:
            _bounded_load(lambda: load_torch_zip(zf, "damaged.pt"), 64 * len(raw) + (8 << 20))
            event("loaded")
        except UnsafeCheckpointError as e:
            assert str(e).startswith("damaged.pt"), e
            event("refused")
