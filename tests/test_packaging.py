"""A wheel of this repository holds every module in it: `pip install .` (not only the editable
install the README uses) gives a working plugtorch. setup.py's find_packages skips a directory
without an __init__.py, and an installed wheel missing one fails at `import plugtorch`."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _tracked_modules():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "plugtorch", "backends"], cwd=ROOT,
                         capture_output=True, text=True)
    for path in out.stdout.split():
        if path.endswith(".py"):
            yield "plugtorch_backends" + path[len("backends"):] if path.startswith("backends/") else path


def _source_copy(dest):
    """The checkout's files (tracked, and new ones not ignored), without a build/ from earlier
    builds, which setuptools would reuse."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout ({out.stderr.strip()}): the tracked files are the reference")
    for path in out.stdout.split():
        src = ROOT / path
        if src.is_file():
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(src.read_bytes())
    return dest


def test_the_wheel_holds_every_module_and_the_c_extensions(tmp_path):
    src = _source_copy(tmp_path / "src")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("plugtorch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(m for m in _tracked_modules() if m not in names)
    assert not missing, f"modules left out of the wheel: {missing[:10]}"
    # the C extension and the files the code reads at run time
    for ext in ("plugtorch_backends/numpy_backend/native/_kernels.", "plugtorch/core/_native."):
        assert any(n.startswith(ext) and n.endswith((".so", ".pyd")) for n in names) or not _compiler_present(), ext
    assert "plugtorch_backends/cupy_backend/kernels/maxpool.cu" in names


def _compiler_present():
    import shutil
    import sysconfig
    return shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is not None
