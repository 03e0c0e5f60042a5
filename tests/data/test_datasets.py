"""MNIST / Fashion-MNIST: IDX parsing, checksums, data roots, clear errors and downloads (local only)."""
from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

import plugtorch
from plugtorch.datasets import (
    MNIST,
    ChecksumError,
    DatasetNotFoundError,
    FashionMNIST,
    IDXFormatError,
    data_roots,
    parse_idx,
    read_idx,
)
from plugtorch.datasets.store import Resource, load_files
from plugtorch.utils.data import DataLoader, Subset, default_collate

TEST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _idx(arr: np.ndarray, code=0x08) -> bytes:
    return bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _copy_test_split(src: Path, dest_root: Path, transform=None) -> Path:
    folder = dest_root / "mnist"
    folder.mkdir(parents=True)
    for name in TEST_FILES:
        data = (src / "mnist" / name).read_bytes()
        (folder / name).write_bytes(transform(name, data) if transform else data)
    return folder


# -- the IDX format -----------------------------------------------------------------------

def test_parse_idx_reads_shape_and_big_endian_values():
    arr = np.arange(6, dtype=">i4").reshape(2, 3)
    out = parse_idx(_idx(arr, 0x0C))
    assert out.shape == (2, 3) and out.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert parse_idx(_idx(np.array([7, 8], dtype=np.uint8))).dtype == np.uint8


def test_truncated_and_foreign_files_give_clear_errors(tmp_path):
    data = _idx(np.zeros((4, 2, 2), dtype=np.uint8))
    with pytest.raises(IDXFormatError, match=r"truncated: its header declares shape \(4, 2, 2\)"):
        parse_idx(data[:-3], "images")
    with pytest.raises(IDXFormatError, match="not an IDX file"):
        parse_idx(b"<html>not found</html>", "page")
    gz = tmp_path / "x.gz"
    gz.write_bytes(gzip.compress(data)[:-10])
    with pytest.raises(IDXFormatError, match="truncated or corrupt gzip"):
        read_idx(gz)


# -- the real files -----------------------------------------------------------------------

def test_mnist_test_split_loads_and_verifies(data_root):
    ds = MNIST(data_root, train=False)
    assert len(ds) == 10000 and ds.data.shape == (10000, 28, 28)
    assert ds.data.dtype is plugtorch.uint8 and ds.targets.dtype is plugtorch.int64
    assert ds.targets[:5].tolist() == [7, 2, 1, 0, 4]
    image, label = ds[0]
    assert image.shape == (1, 28, 28) and image.dtype is plugtorch.float32 and label == 7
    assert image.min().item() >= 0.0 and image.max().item() <= 1.0


def test_mnist_fast_batches_equal_per_sample_collation(data_root):
    ds = MNIST(data_root, train=False)
    idx = [5, 0, 9999, 17]
    fast = ds.get_batch(idx)
    slow = default_collate([ds[i] for i in idx])
    np.testing.assert_array_equal(fast[0].numpy(), slow[0].numpy())
    assert fast[1].tolist() == slow[1].tolist()
    x, y = next(iter(DataLoader(Subset(ds, list(range(100))), batch_size=32)))
    assert x.shape == (32, 1, 28, 28) and y.shape == (32,)


def test_transforms_apply_per_sample(data_root):
    ds = MNIST(data_root, train=False, transform=lambda x: x * 2, target_transform=lambda y: y + 10)
    x, y = ds.get_batch([0, 1])
    assert y.tolist() == [17, 12]
    assert x.max().item() == pytest.approx(2.0)


def test_uncompressed_and_recompressed_files_are_accepted(data_root, tmp_path):
    # A raw copy (checked against the uncompressed md5) and a re-gzipped copy with another
    # header (as Debian ships Fashion-MNIST) both verify.
    def alter(name, data):
        return gzip.compress(gzip.decompress(data), mtime=0) if "labels" in name else data
    folder = _copy_test_split(data_root, tmp_path, alter)
    images = folder / "t10k-images-idx3-ubyte.gz"
    (folder / "t10k-images-idx3-ubyte").write_bytes(gzip.decompress(images.read_bytes()))
    images.unlink()
    assert MNIST(tmp_path, train=False).targets[:3].tolist() == [7, 2, 1]


def test_corrupt_file_is_refused_with_the_checksums(data_root, tmp_path):
    def flip(name, data):
        if "labels" not in name:
            return data
        raw = bytearray(gzip.decompress(data))
        raw[-1] ^= 1
        return gzip.compress(bytes(raw))
    _copy_test_split(data_root, tmp_path, flip)
    with pytest.raises(ChecksumError, match="ec29112dd5afa0611ce80d1b7f02629c"):
        MNIST(tmp_path, train=False)


def test_truncated_download_is_reported_as_truncated(data_root, tmp_path):
    _copy_test_split(data_root, tmp_path, lambda name, d: d[: len(d) // 2] if "images" in name else d)
    with pytest.raises(IDXFormatError, match="truncated or corrupt gzip"):
        MNIST(tmp_path, train=False)


def test_missing_files_message_says_what_to_place_where(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        MNIST(tmp_path, train=False)
    msg = str(info.value)
    assert f"{tmp_path / 'mnist'}/" in msg
    assert "t10k-images-idx3-ubyte.gz" in msg and "9fb629c4189551a2d022fa330f9573f3" in msg
    assert "PLUGTORCH_DATA" in msg


def test_data_root_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PLUGTORCH_DATA", str(tmp_path / "env"))
    assert data_roots(tmp_path / "explicit")[0] == tmp_path / "explicit"
    assert data_roots()[0] == tmp_path / "env"
    monkeypatch.delenv("PLUGTORCH_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert data_roots()[0] == tmp_path / "cache" / "plugtorch"
    assert data_roots()[-1] == Path("/usr/share/datasets")


def test_fashion_mnist_from_the_debian_location():
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    ds = FashionMNIST(Path("/nonexistent-root"), train=False)
    assert len(ds) == 10000 and ds.classes[ds.targets[0].item()] == "Ankle boot"


# -- downloads (never leave this machine) --------------------------------------------------

def test_download_from_a_file_mirror(data_root, tmp_path):
    mirror = _copy_test_split(data_root, tmp_path / "mirror")

    class LocalMNIST(MNIST):
        mirrors = [tmp_path.joinpath("nowhere").as_uri() + "/", mirror.as_uri() + "/"]

    ds = LocalMNIST(tmp_path / "root", train=False, download=True)
    assert len(ds) == 10000
    for name in TEST_FILES:
        assert (tmp_path / "root" / "mnist" / name).read_bytes() == (mirror / name).read_bytes()
    assert not list((tmp_path / "root" / "mnist").glob(".*"))  # no temporary files left


def _synthetic(tmp_path):
    payload = gzip.compress(_idx(np.arange(10, dtype=np.uint8)))
    raw = gzip.decompress(payload)
    res = Resource("tiny-idx1-ubyte", hashlib.md5(payload).hexdigest(), hashlib.md5(raw).hexdigest())
    served = tmp_path / "served"
    served.mkdir()
    (served / "tiny-idx1-ubyte.gz").write_bytes(payload)
    (served / "bad-idx1-ubyte.gz").write_bytes(gzip.compress(b"\0\0\x08\x01\0\0\0\x02ab"))
    return res, served


def test_download_over_http_from_localhost(tmp_path):
    res, served = _synthetic(tmp_path)
    handler = functools.partial(_QuietHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        out = load_files("Tiny", "tiny", [res], data_dir=tmp_path / "root",
                         download_missing=True, mirrors=[url])
        assert parse_idx(out[res.name]).tolist() == list(range(10))
        bad = Resource("bad-idx1-ubyte", "0" * 32, "1" * 32)
        with pytest.raises(DatasetNotFoundError) as info:
            load_files("Tiny", "tiny", [bad], data_dir=tmp_path / "root2",
                       download_missing=True, mirrors=[url])
        assert "does not match the published checksum" in str(info.value)
        assert not (tmp_path / "root2" / "tiny" / "bad-idx1-ubyte.gz").exists()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_unreachable_mirror_explains_where_to_put_files(tmp_path, capsys):
    res, _ = _synthetic(tmp_path)
    other = Resource("other-idx1-ubyte", "0" * 32, "1" * 32)
    with pytest.raises(DatasetNotFoundError) as info:
        load_files("Tiny", "tiny", [res, other], data_dir=tmp_path / "root",
                   download_missing=True, mirrors=["http://127.0.0.1:9/"])
    msg = str(info.value)
    assert "Downloading them failed" in msg and "http://127.0.0.1:9/tiny-idx1-ubyte.gz" in msg
    assert "other-idx1-ubyte.gz: skipped, the mirror was unreachable" in msg  # tried once only
    assert capsys.readouterr().err.count("downloading http://127.0.0.1:9/") == 1
    assert f"{tmp_path / 'root' / 'tiny'}/" in msg


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
