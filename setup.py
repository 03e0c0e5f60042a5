"""Package discovery only; all metadata lives in pyproject.toml.

The built-in backend plugins live in backends/ and install as the
``plugtorch_backends`` package, so every subpackage is found automatically.
"""
from setuptools import find_packages, setup

core = find_packages(include=["plugtorch", "plugtorch.*"])
backends = ["plugtorch_backends" + p[len("backends"):]
            for p in find_packages(include=["backends", "backends.*"])]

# Non-Python files the code reads at run time: the CUDA kernel sources (NVRTC compiles them on
# a GPU; tests build them for the CPU) and the header that runs them there.
data = {"plugtorch_backends.cupy_backend": ["kernels/*.cu", "kernels/*.cuh"], "plugtorch.testing.cuda_cpu": ["*.h"]}

setup(packages=core + backends, package_dir={"plugtorch_backends": "backends"}, package_data=data)
