"""Every hand-written CUDA kernel compiles for the GPUs we target, with warnings as errors.

nvcc (the CUDA toolkit) builds each source for sm_80 (A100) and sm_90 (H100); NVRTC (what
CuPy's RawModule uses at run time, from the nvidia-cuda-nvrtc wheel) builds it with the
backend's own options. Whether the kernels compute the right thing is the business of the
tests that execute them on the CPU (test_kernels_*.py, test_emulated_conformance.py).
Successful compiles are remembered by source hash, so an unchanged kernel costs nothing.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from plugtorch_backends.cupy_backend import fusion
from plugtorch_backends.cupy_backend.modules import NVRTC_OPTIONS, headers, nvrtc_options, sources

SOURCES = sources()
# the fuser's generated kernels (plugtorch.compile's fused elementwise chains), as samples
GENERATED = {f"fused_chain_{k}": fusion.source(chain) for k, chain in enumerate(fusion.sample_chains())}
ARCHS = ("sm_80", "sm_90")
_CACHE = Path(os.environ.get("PLUGTORCH_CUDA_CPU_CACHE") or Path.home() / ".cache" / "plugtorch" / "cuda_cpu")


def _text(stem: str) -> str:
    return GENERATED[stem] if stem in GENERATED else SOURCES[stem].read_text()


def _stamp(kind: str, stem: str, flags) -> Path:
    texts = [_text(stem), *(h.read_text() for h in headers())]  # a changed header recompiles
    key = hashlib.sha256("\0".join([kind, *texts, *flags]).encode()).hexdigest()[:24]
    return _CACHE / f"compiled-{stem}-{kind}-{key}.ok"


def test_the_backend_ships_kernel_sources():
    assert {"im2col", "maxpool", "softmax", "cross_entropy", "optim", "philox"} <= set(SOURCES)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("stem", sorted(SOURCES) + sorted(GENERATED))
def test_nvcc_compiles_the_kernel_without_warnings(stem, arch, tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc (the CUDA toolkit) is not installed, so the kernels cannot be compiled here")
    flags = ["-arch=" + arch, *NVRTC_OPTIONS, "-Werror", "all-warnings", "-cubin"]
    stamp = _stamp("nvcc", stem, flags)
    if stamp.exists():
        return
    path = SOURCES.get(stem)
    if path is None:
        path = tmp_path / f"{stem}.cu"
        path.write_text(GENERATED[stem])
    done = subprocess.run([nvcc, *flags, "-o", str(tmp_path / f"{stem}.cubin"), str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"nvcc {' '.join(flags)} {stem}.cu failed:\n{done.stderr}"
    assert not done.stderr.strip(), f"nvcc warned about {stem}.cu:\n{done.stderr}"
    _CACHE.mkdir(parents=True, exist_ok=True)
    stamp.touch()


@pytest.mark.parametrize("arch", ("compute_80", "compute_90"))
@pytest.mark.parametrize("stem", sorted(SOURCES) + sorted(GENERATED))
def test_nvrtc_compiles_the_kernel_as_cupy_will(stem, arch):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install 'plugtorch[cupy13]'); "
                               "its NVRTC binding compiles the kernels")
    nvrtc = cupy.cuda.nvrtc  # a compiled submodule: reached as an attribute, not importable by name
    try:
        nvrtc.getVersion()
    except Exception as e:
        pytest.skip(f"NVRTC is not loadable ({e}); pip install nvidia-cuda-nvrtc")
    flags = [*nvrtc_options(), "-arch=" + arch]
    stamp = _stamp("nvrtc", stem, flags)
    if stamp.exists():
        return
    prog = nvrtc.createProgram(_text(stem), f"{stem}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, flags)
        except nvrtc.NVRTCError as e:
            pytest.fail(f"NVRTC could not compile {stem}.cu ({e}):\n{nvrtc.getProgramLog(prog)}")
        log = nvrtc.getProgramLog(prog).strip("\x00 \n")
        assert not log, f"NVRTC warned about {stem}.cu:\n{log}"
        assert nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    _CACHE.mkdir(parents=True, exist_ok=True)
    stamp.touch()
