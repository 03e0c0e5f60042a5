"""Package discovery only; all metadata lives in pyproject.toml.

The built-in backend plugins live in backends/ and install as the
``plugtorch_backends`` package, so every subpackage is found automatically.
"""
import sys

from setuptools import Extension, find_packages, setup

core = find_packages(include=["plugtorch", "plugtorch.*"])
backends = ["plugtorch_backends" + p[len("backends"):]
            for p in find_packages(include=["backends", "backends.*"])]

# Non-Python files the code reads at run time: the CUDA kernel sources (NVRTC compiles them on
# a GPU; tests build them for the CPU) and the header that runs them there.
data = {"plugtorch_backends.cupy_backend": ["kernels/*.cu", "kernels/*.cuh"], "plugtorch.testing.cuda_cpu": ["*.h"],
        "plugtorch_backends.numpy_backend.native": ["*.pyi"], "plugtorch.core": ["_native.pyi"]}

# The NumPy backend's native kernels (backends/numpy_backend/native): plain C on the buffer
# protocol, no NumPy headers. optional=True: without a C compiler the install still succeeds and
# the backend runs its NumPy kernels (`plugtorch plugins` says which). Values must match the
# NumPy kernels bit for bit, hence no FMA contraction and no fast-math.
flags = [] if sys.platform == "win32" else ["-O3", "-std=c11", "-ffp-contract=off", "-fno-math-errno"]


def _libmvec() -> bool:
    """Whether glibc's vector math library (libmvec: erf, exp, tanh four floats a call, since glibc
    2.35 on x86-64) is there to link; the kernels call the scalar functions without it."""
    import ctypes.util
    import os
    import platform
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return False
    try:
        major, minor = map(int, os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2])
    except (ValueError, OSError, IndexError, AttributeError, TypeError):
        return False
    return (major, minor) >= (2, 35) and ctypes.util.find_library("mvec") is not None


mvec = _libmvec()
native = Extension("plugtorch_backends.numpy_backend.native._kernels",
                   sources=["backends/numpy_backend/native/_kernels.c", "backends/numpy_backend/native/threadpool.c"],
                   depends=["backends/numpy_backend/native/typed.h", "backends/numpy_backend/native/attention.h",
                            "backends/numpy_backend/native/threadpool.h",
                            "backends/numpy_backend/native/vector_math.h"],
                   extra_compile_args=flags, optional=True,
                   define_macros=[("PLUGTORCH_MVEC", "1")] if mvec else [], libraries=["mvec", "m"] if mvec else [])

# The LSTM's time loop and gate arithmetic (native/rnn.c), a module of its own beside _kernels: optional too.
rnn_c = Extension("plugtorch_backends.numpy_backend.native._rnn", sources=["backends/numpy_backend/native/rnn.c"],
                  depends=["backends/numpy_backend/native/vector_math.h", "backends/numpy_backend/native/threadpool.h",
                           "backends/numpy_backend/native/gemm_api.h"],
                  extra_compile_args=flags, optional=True,
                  define_macros=native.define_macros,
                  libraries=native.libraries)

# torch.special's functions NumPy has no ufunc for (native/special.c), a module of its own: optional too;
# without it the backend's special primitive uses SciPy where installed (special_functions.py).
special_c = Extension("plugtorch_backends.numpy_backend.native._special",
                      sources=["backends/numpy_backend/native/special.c"], extra_compile_args=flags, optional=True,
                      libraries=["m"] if sys.platform != "win32" else [])

# The matrix product for the shapes OpenBLAS runs slowly (native/gemm.c; AVX-512 chosen at run time,
# NumPy's matmul elsewhere): a module of its own, optional too.
gemm_c = Extension("plugtorch_backends.numpy_backend.native._gemm", sources=["backends/numpy_backend/native/gemm.c"],
                   depends=["backends/numpy_backend/native/threadpool.h", "backends/numpy_backend/native/gemm_api.h"],
                   extra_compile_args=flags, optional=True)

# The core's hottest paths in C (plugtorch/core/_native.c: wrap, Node, the backward loop): optional
# too; without it their Python twins run (plugtorch/core/native.py).
core_c = Extension("plugtorch.core._native", sources=["plugtorch/core/_native.c"], extra_compile_args=flags,
                   optional=True)

setup(packages=core + backends, package_dir={"plugtorch_backends": "backends"}, package_data=data,
      ext_modules=[native, rnn_c, special_c, gemm_c, core_c])
