"""Host microseconds per call of the CuPy calls an eager MNIST CNN step (batch 64) makes, beside
PyTorch's for the same work: where the CuPy backend's step time goes, since on a GPU it is bound
by the host (benchmarks/gpu_bench.py: batch 512 costs what batch 64 does).

    python benchmarks/gpu_host_overhead.py > overhead.json      (benchmarks/gpu_check.sh runs it)

Each figure: calls back to back, one synchronisation, median of 7 repeats of 500 calls.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import cupy
import numpy
from plugtorch_backends.cupy_backend.modules import THREADS, blocks, cupy_loader, kernel_finder


def host_us(fn, sync, calls=500):
    for _ in range(20):
        fn()
    sync()
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return float(statistics.median(runs))


def main() -> int:
    sync = cupy.cuda.get_current_stream().synchronize
    f = cupy.float32
    x2, w2 = cupy.ones((64, 1568), f), cupy.ones((128, 1568), f)        # fc1: x @ w.T
    w_conv = cupy.ones((1, 32, 144), f)                                 # conv2: (G, O, K)
    col = cupy.ones((64, 1, 144, 196), f)                               # (N, G, K, P)
    col3 = col.reshape(64, 144, 196)
    w_batched = cupy.ascontiguousarray(cupy.broadcast_to(w_conv[0], (64, 32, 144)))
    g = cupy.ones((64, 32, 14, 14), f)
    a, b = cupy.ones(4096, f), cupy.ones(4096, f)
    kernel = kernel_finder(cupy_loader())("binary", "add", numpy.dtype(f))
    out = cupy.empty_like(a)
    n = numpy.int64(a.size)
    results = {"cupy": {
        "matmul 2-D (64,1568)@(1568,128)": host_us(lambda: cupy.matmul(x2, w2.T), sync),
        "matmul broadcast (1,32,144)@(64,1,144,196)": host_us(lambda: cupy.matmul(w_conv, col), sync),
        "matmul batched (64,32,144)@(64,144,196)": host_us(lambda: cupy.matmul(w_batched, col3), sync),
        "sum over (0,2,3) of (64,32,14,14)": host_us(lambda: g.sum(axis=(0, 2, 3)), sync),
        "copy (64,32,14,14)": host_us(lambda: g.copy(), sync),
        "ufunc add (4096,)": host_us(lambda: a + b, sync),
        "RawKernel launch (binary.cu add, 4096)": host_us(
            lambda: kernel((blocks(1024),), (THREADS,), (a, b, out, n)), sync),
        "empty (64,32,14,14)": host_us(lambda: cupy.empty((64, 32, 14, 14), f), sync),
    }}
    try:
        import torch
        tsync = torch.cuda.synchronize
        tx, tw = torch.ones(64, 1568, device="cuda"), torch.ones(128, 1568, device="cuda")
        tg = torch.ones(64, 32, 14, 14, device="cuda")
        ta, tb = torch.ones(4096, device="cuda"), torch.ones(4096, device="cuda")
        tin, tconv = torch.ones(64, 16, 14, 14, device="cuda"), torch.ones(32, 16, 3, 3, device="cuda")
        results["torch"] = {
            "matmul 2-D (64,1568)@(1568,128)": host_us(lambda: torch.matmul(tx, tw.T), tsync),
            "conv2d (64,16,14,14) * (32,16,3,3), cuDNN": host_us(
                lambda: torch.nn.functional.conv2d(tin, tconv, padding=1), tsync),
            "sum over (0,2,3) of (64,32,14,14)": host_us(lambda: tg.sum(dim=(0, 2, 3)), tsync),
            "copy (64,32,14,14)": host_us(lambda: tg.clone(), tsync),
            "add (4096,)": host_us(lambda: ta + tb, tsync),
        }
    except (ImportError, AssertionError, RuntimeError) as e:  # no torch, or torch without CUDA
        results["torch"] = f"not measured: {e}"
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
