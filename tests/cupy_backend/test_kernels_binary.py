"""The CuPy backend's wide-load add/sub/mul/div (``kernels/binary.cu``), run on the CPU from the
same CUDA source (``cpu_load``): bit for bit NumPy's ufuncs, every remainder of the 16-byte
packs, grids that loop; and the primitives in front of the ufuncs take exactly the operands the
kernels can read as packs, handing every other case to the ufunc."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import binary_kernels
from plugtorch_backends.cupy_backend.modules import NVRTC_OPTIONS, kernel_finder, source_path
from plugtorch_backends.cupy_backend.probe import installed as cupy_installed

FLOATS = [np.float32, np.float64]
UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}
SPECIALS = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-40, -3e-310, 1e38, 2.0 ** -1074]


def _operands(rng, n, dtype):
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    k = min(n, len(SPECIALS))  # special values against each other, where n allows
    a[:k] = SPECIALS[:k]
    b[:k] = SPECIALS[::-1][:k]
    return a, b


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", binary_kernels.OPS)
@pytest.mark.parametrize("n, grid, block", [(1, 1, 32), (3, 1, 32), (4, 1, 32), (5, 1, 32), (11, 1, 32),
                                            (1027, 2, 32), (4099, 3, 64)])
def test_the_kernels_equal_the_ufuncs_bit_for_bit(cpu_load, op, dtype, n, grid, block):
    """Small grids make the loop over packs go round several times; n % 4 covers every tail."""
    rng = np.random.default_rng(n)
    a, b = _operands(rng, n, dtype)
    out = np.full(n, 7, dtype)
    kernel = kernel_finder(cpu_load)("binary", op, np.dtype(dtype))
    kernel((grid,), (block,), (a, b, out, np.int64(n)))
    with np.errstate(all="ignore"):
        want = UFUNCS[op](a, b)
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{want.itemsize}"))


def test_nvcc_turns_each_pack_into_one_128_bit_load_and_store(tmp_path):
    """The point of the kernels: 16-byte memory operations (ld/st.global.v4.f32, .v2.f64) in the
    PTX, not four or two scalar ones (those remain only for the tail)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc (the CUDA toolkit) is not installed, so the PTX cannot be inspected here")
    ptx = tmp_path / "binary.ptx"
    done = subprocess.run([nvcc, "-arch=sm_90", *NVRTC_OPTIONS, "-ptx", "-o", str(ptx), str(source_path("binary"))],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    for op in (r"ld\.global(\.nc)?\.v4\.f32", r"st\.global\.v4\.f32", r"ld\.global(\.nc)?\.v2\.f64",
               r"st\.global\.v2\.f64"):
        assert re.search(op, text), f"no {op} in binary.cu's PTX"


@pytest.fixture
def wide(cpu_load, monkeypatch):
    """The primitives over NumPy and the CPU-built kernels, with a threshold small enough to test,
    and a fallback table that records which operands it was handed."""
    monkeypatch.setattr(binary_kernels, "MIN_ELEMENTS", 8)
    handed = []

    def fallback(name):
        def ufunc(x, y):
            handed.append(name)
            return UFUNCS[name](x, y)
        return ufunc
    table = {name: fallback(name) for name in binary_kernels.OPS}
    return binary_kernels.make_primitives(np, cpu_load, table), handed


def _aligned(n, dtype, offset=0):
    """An array of n elements whose first one lies `offset` elements past a 16-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(n + 64, dtype)
    skip = (-raw.ctypes.data % 16) // itemsize + offset
    return raw[skip:skip + n]


@pytest.mark.parametrize("dtype", FLOATS)
def test_packable_operands_run_the_kernel(wide, dtype):
    primitives, handed = wide
    rng = np.random.default_rng(1)
    for shape in [(9,), (4, 3), (2, 5, 7)]:
        a, b = _aligned(int(np.prod(shape)), dtype).reshape(shape), _aligned(int(np.prod(shape)), dtype).reshape(shape)
        a[...], b[...] = rng.standard_normal(shape), rng.standard_normal(shape)
        for op in binary_kernels.OPS:
            got = primitives[op](a, b)
            assert got.shape == shape and got.dtype == dtype and got.flags.c_contiguous
            np.testing.assert_array_equal(got, UFUNCS[op](a, b))
    assert handed == []


def _not_packable(dtype):
    a = _aligned(16, dtype)
    f = _aligned(12, dtype).reshape(3, 4)
    return {
        "below MIN_ELEMENTS": (a[:4], a[4:8]),
        "broadcast": (a.reshape(4, 4), a[:4]),
        "misaligned": (_aligned(16, dtype, offset=1), a),
        "strided": (a[::2], a[1::2]),
        "fortran order": (np.asfortranarray(f), f),
        "mixed dtypes": (a, a.astype(np.float16)),
        "integers": (a.astype(np.int32), a.astype(np.int32)),
        "float16": (a.astype(np.float16), a.astype(np.float16)),
    }


@pytest.mark.parametrize("case", list(_not_packable(np.float32)))
def test_everything_else_goes_to_the_ufunc(wide, case):
    primitives, handed = wide
    x, y = _not_packable(np.float32)[case]
    assert not (x.size >= binary_kernels.MIN_ELEMENTS and binary_kernels.packable(x, y))
    for op in binary_kernels.OPS:
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(primitives[op](x, y), UFUNCS[op](x, y))
    assert handed == list(binary_kernels.OPS)


_EMULATED = """
import numpy as np, plugtorch
from plugtorch_backends.cupy_backend import binary_kernels as bk
bk.MIN_ELEMENTS = 8  # so that these small operands qualify
packed = []
def counted(x, y, _packable=bk.packable):
    packed.append(_packable(x, y))
    return packed[-1]
bk.packable = counted
rng = np.random.default_rng(2)
a0, b0 = rng.standard_normal((16, 12)).astype(np.float32), rng.standard_normal((16, 12)).astype(np.float32)
results = {}
for device in ("numpy", "cupy_emulated"):
    a = plugtorch.tensor(a0, device=device, requires_grad=True)
    b = plugtorch.tensor(b0, device=device, requires_grad=True)
    out = (a + b) * (a - b) / (b * b + 1)
    out.sum().backward()
    results[device] = [t.detach().cpu().numpy() for t in (out, a.grad, b.grad)]
for got, want in zip(results["cupy_emulated"], results["numpy"]):
    np.testing.assert_array_equal(got, want)
print("kernel launches", sum(packed))
"""


def test_the_emulated_backend_computes_through_the_kernels():
    """A forward and backward of add/sub/mul/div on cupy_emulated (the CuPy backend's code, NumPy
    computing, the kernels from their .cu source on the CPU) equal NumPy's, with the same-shape
    operands going through binary.cu."""
    if not cupy_installed():
        pytest.skip("CuPy is not installed, and the emulated backend checks its calls against CuPy's API "
                    "(pip install 'plugtorch[cupy13]')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLUGTORCH_CONFORMANCE")}
    env["PLUGTORCH_PLUGINS"] = "plugtorch_backends.cupy_backend.emulation"
    done = subprocess.run([sys.executable, "-c", _EMULATED], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    launches = int(done.stdout.split("kernel launches")[1])
    assert launches >= 6, done.stdout  # forward a+b, a-b, *, b*b, / and their gradients' products
