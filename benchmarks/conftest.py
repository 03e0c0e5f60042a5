"""Benchmarks pin BLAS/OpenMP to one thread so plugtorch, NumPy and PyTorch compare fairly.

Run: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest benchmarks -q
(the variables must be set before NumPy loads; PyTorch is pinned here too).
"""
import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

# BENCH_LIB=plugtorch|numpy (benchmarks/compare_steps.py) measures a library in a process of its
# own: importing torch there would change what is measured (its allocator, its threads).
if os.environ.get("BENCH_LIB") in (None, "torch"):
    try:
        import torch
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    except ImportError:  # benchmarks against torch skip themselves
        pass
