"""The MNIST files committed in data/mnist/: the published files, byte for byte, and documented."""
from __future__ import annotations

import hashlib
import pathlib

from plugtorch.datasets import MNIST

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "mnist"


def test_the_four_files_match_the_published_md5_sums():
    for res in MNIST.resources:
        data = (DATA / f"{res.name}.gz").read_bytes()
        assert hashlib.md5(data, usedforsecurity=False).hexdigest() == res.gz_md5, res.name


def test_sources_note_names_every_file_and_its_sum():
    note = (DATA / "SOURCES.md").read_text()
    for res in MNIST.resources:
        assert f"| {res.name}.gz |" in note and res.gz_md5 in note and res.raw_md5 in note, res.name
    assert sorted(p.name for p in DATA.iterdir()) == sorted(
        [f"{r.name}.gz" for r in MNIST.resources] + ["SOURCES.md"])


def test_a_fresh_clone_trains_offline_from_data(monkeypatch, tmp_path, capsys):
    # the README's main command, shrunk: no network, no environment variable, only --data-dir
    from plugtorch.apps.cli import main
    monkeypatch.delenv("PLUGTORCH_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # an empty cache: nothing found there
    monkeypatch.chdir(DATA.parents[1])
    assert main(["train", "--data-dir", "data", "--no-download", "--epochs", "1",
                 "--limit-train", "256", "--limit-test", "128", "--quiet"]) == 0
    assert "final test accuracy" in capsys.readouterr().out
