"""The CuPy backend's GPU targets, beside raw CuPy and PyTorch (CUDA), as one JSON object.

    python benchmarks/gpu_bench.py > gpu_bench.json      (benchmarks/gpu_check.sh runs it)

Device times come from CUDA events, host-side overhead from perf_counter around many calls
followed by one synchronisation; every figure is a median of repeats after warm-up. TF32 is
off on both sides. Targets: a + b on (8, 8) <= 1.5x raw CuPy; a 2**26-element add
>= 0.8x PyTorch's bandwidth; a 4096^2 float32 matmul >= 0.9x PyTorch's FLOP rate; MNIST CNN
step <= 3x PyTorch+cuDNN at batch 512 and <= 4x at 64; MLP step <= 3x. Each step is timed
eagerly and under plugtorch.compile ("plugtorch_compiled", "ratio_compiled").
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import cupy
from plugtorch_backends.cupy_backend import binary_kernels

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.apps.train import CNN, MLP

REPEATS = 7
# steps per timed repeat: with 20, five H200 machines gave eager CNN steps from 2.6 to 4.7 ms
# (one repeat in seven caught by a collection or a stall moves a median of so few)
STEP_CALLS = 100


def median(values):
    return float(statistics.median(values))


def host_time(fn, sync, calls=2000):
    """Seconds per call of ``fn`` measured on the host (dispatch overhead included)."""
    for _ in range(50):
        fn()
    sync()
    runs = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / calls)
    return median(runs)


def event_time(fn, events, elapsed_ms, reps=20):
    """Milliseconds per call on the device, between two CUDA events recorded around ``reps`` calls.
    ``events()`` makes a (start, end) pair; ``elapsed_ms(start, end)`` reads the time between them."""
    for _ in range(3):
        fn()
    start, end = events()
    runs = []
    for _ in range(REPEATS):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        runs.append(elapsed_ms(start, end) / reps)
    return median(runs)


def cupy_time(fn, reps=20):
    """CuPy events on the current stream (what plugtorch's CuPy backend launches on)."""
    return event_time(fn, lambda: (cupy.cuda.Event(), cupy.cuda.Event()), cupy.cuda.get_elapsed_time, reps)


def torch_time(torch, fn, reps=20):
    def events():
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    return event_time(fn, events, lambda start, end: start.elapsed_time(end), reps)


def plugtorch_step(model_name, batch, compiled=False):
    """One Adam step; compiled: under plugtorch.compile (replayed, elementwise chains fused into
    one generated kernel each), warmed up and captured so the timing sees replays only."""
    model = (CNN(dropout=0.0) if model_name == "cnn" else MLP()).to("cupy")
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)
    shape = (batch, 1, 28, 28) if model_name == "cnn" else (batch, 784)
    x = plugtorch.randn(*shape, device="cupy")
    y = plugtorch.randint(0, 10, (batch,), device="cupy")

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    if compiled:
        step = plugtorch.compile(step, fullgraph=True)
        step()
        step()
        assert step.captures == 1
    return step


def torch_step(torch, model_name, batch):
    nn = torch.nn
    if model_name == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
        shape = (batch, 1, 28, 28)
    else:
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        shape = (batch, 784)
    model = model.cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(*shape, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def main() -> int:
    try:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        assert torch.cuda.is_available()
    except (ImportError, AssertionError):
        torch = None
    results: dict = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                     "cupy": cupy.__version__, "torch": getattr(torch, "__version__", None)}
    sync = cupy.cuda.get_current_stream().synchronize

    a, b = plugtorch.randn(8, 8, device="cupy"), plugtorch.randn(8, 8, device="cupy")
    ra, rb = a._data, b._data
    results["add_8x8_us"] = {"plugtorch": 1e6 * host_time(lambda: a + b, sync),
                             "cupy": 1e6 * host_time(lambda: ra + rb, sync)}
    n = 2 ** 26
    a, b = plugtorch.randn(n, device="cupy"), plugtorch.randn(n, device="cupy")
    gbs = lambda ms: 3 * 4 * n / (ms * 1e-3) / 1e9
    results["add_2^26_GBps"] = {"plugtorch": gbs(cupy_time(lambda: a + b)),
                                "cupy": gbs(cupy_time(lambda: a._data + b._data))}
    m = plugtorch.randn(4096, 4096, device="cupy")
    tflops = lambda ms: 2 * 4096 ** 3 / (ms * 1e-3) / 1e12
    results["matmul_4096_TFLOPs"] = {"plugtorch": tflops(cupy_time(lambda: m @ m, reps=5)),
                                     "cupy": tflops(cupy_time(lambda: m._data @ m._data, reps=5))}
    if torch is not None:
        ta, tb = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        results["add_2^26_GBps"]["torch"] = gbs(torch_time(torch, lambda: ta + tb))
        tm = torch.randn(4096, 4096, device="cuda")
        results["matmul_4096_TFLOPs"]["torch"] = tflops(torch_time(torch, lambda: tm @ tm, reps=5))
    # where the CuPy backend's wide-load add (binary_kernels, from MIN_ELEMENTS up) starts to pay:
    # device microseconds per float32 add, plugtorch beside the CuPy ufunc, from 2**12 to 2**26
    # ("wide_kernel": the kernel at every size, MIN_ELEMENTS set aside)
    sweep = results["add_by_size_us"] = {}
    add, threshold = plugtorch.get_registry().backends["cupy"].primitives["add"], binary_kernels.MIN_ELEMENTS
    for k in range(12, 27, 2):
        a, b = plugtorch.randn(2 ** k, device="cupy"), plugtorch.randn(2 ** k, device="cupy")
        sweep[f"2^{k}"] = {"plugtorch": 1e3 * cupy_time(lambda a=a, b=b: a + b),
                           "cupy": 1e3 * cupy_time(lambda a=a, b=b: a._data + b._data)}
        binary_kernels.MIN_ELEMENTS = 0
        sweep[f"2^{k}"]["wide_kernel"] = 1e3 * cupy_time(lambda a=a, b=b: add(a._data, b._data))
        binary_kernels.MIN_ELEMENTS = threshold
        if torch is not None:
            ta, tb = torch.randn(2 ** k, device="cuda"), torch.randn(2 ** k, device="cuda")
            sweep[f"2^{k}"]["torch"] = 1e3 * torch_time(torch, lambda ta=ta, tb=tb: ta + tb)
    for model_name, batch in (("cnn", 512), ("cnn", 64), ("mlp", 64), ("mlp", 128)):
        key = f"{model_name}_step_b{batch}_ms"
        results[key] = {"plugtorch": 1e3 * host_time(plugtorch_step(model_name, batch), sync, calls=STEP_CALLS),
                        "plugtorch_compiled": 1e3 * host_time(plugtorch_step(model_name, batch, compiled=True),
                                                              sync, calls=STEP_CALLS)}
        if torch is not None:
            results[key]["torch"] = 1e3 * host_time(torch_step(torch, model_name, batch), torch.cuda.synchronize,
                                                    calls=STEP_CALLS)
            results[key]["ratio"] = results[key]["plugtorch"] / results[key]["torch"]
            results[key]["ratio_compiled"] = results[key]["plugtorch_compiled"] / results[key]["torch"]
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
