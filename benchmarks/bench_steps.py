"""Training steps: plugtorch beside PyTorch and a hand-written NumPy floor.

The MLP (784-128-10, ReLU, cross-entropy, Adam) at batch 64 and 128, and ``plugtorch
train``'s MNIST CNN (2 conv, 2 pool, 2 linear, dropout; Adam) at batch 64, each step
zero_grad + forward + backward + optimizer update on fixed synthetic data. Each test
records its process's peak RSS (``extra_info["peak_rss_mib"]``).

Two ways to run it:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest benchmarks/bench_steps.py   # one process
    python benchmarks/compare_steps.py --threads 1,2                                        # one per library

In one process the libraries share a C allocator, and importing plugtorch tunes glibc's
(``backends/numpy_backend/allocator.py``) for torch too; ``BENCH_LIB=plugtorch|torch|numpy``
keeps only that library's tests (the others skip, saying so), which is how
``compare_steps.py`` measures each library in a process of its own, as users run them.
No library is imported at module level, so a ``BENCH_LIB=torch`` process never loads plugtorch.
"""
from __future__ import annotations

import os
import resource

import numpy as np
import pytest

LIB = os.environ.get("BENCH_LIB")


def _warm_c_allocator() -> None:
    """Free one 16 MiB block, as loading a dataset does before a training script's first step.

    When glibc frees a block it had mmapped (above its threshold, 128 KiB at start) it raises
    the threshold to that block's size, up to 32 MiB, and later blocks below it come from the
    heap instead of freshly faulted pages. A training script has freed such blocks before its
    first step; a benchmark process that never did charges PyTorch page faults its users do not
    pay: its CNN step took 17.1-17.4 ms on one thread in such a process, 14.5-14.7 ms after this.
    plugtorch fixes the threshold itself when it loads (allocator.py), so this
    changes nothing for it; every library's process runs it alike."""
    block = np.ones(4 << 20, np.float32)
    del block


_warm_c_allocator()


def _only(lib: str):
    if LIB and lib != LIB:
        pytest.skip(f"BENCH_LIB={LIB}: {lib} is measured in a process of its own")


def _peak(benchmark):
    benchmark.extra_info["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    benchmark.extra_info["lib"] = LIB or "all in one process"


def _torch():
    torch = pytest.importorskip("torch", reason="PyTorch is the comparison peer; pip install torch==2.13.0")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    return torch


def _step(lib, model, opt, x, y):
    def step():
        opt.zero_grad()
        lib.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def _mlp(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(784, 128), lib.nn.ReLU(), lib.nn.Linear(128, 10))


def _plugtorch_step(model_name: str, batch: int, compiled: bool):
    """plugtorch's step for the MLP or the CNN; compiled: under plugtorch.compile, warmed up and
    captured, so the benchmark times replays."""
    import plugtorch
    if model_name == "mlp":
        model, shape = _mlp(plugtorch), (batch, 784)
    else:
        from plugtorch.apps.train import CNN
        plugtorch.manual_seed(0)
        model, shape = CNN(), (batch, 1, 28, 28)
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)
    step = _step(plugtorch, model, opt, plugtorch.randn(*shape), plugtorch.randint(0, 10, (batch,)))
    if not compiled:
        return step
    step = plugtorch.compile(step, fullgraph=True)
    step()
    step()
    assert step.captures == 1
    return step


@pytest.mark.parametrize("batch", [64, 128])
@pytest.mark.benchmark(group="MLP step 784-128-10 + Adam")
def test_mlp_plugtorch(benchmark, batch):
    _only("plugtorch")
    benchmark.pedantic(_plugtorch_step("mlp", batch, compiled=False), rounds=300, warmup_rounds=50)
    _peak(benchmark)


@pytest.mark.parametrize("batch", [64, 128])
@pytest.mark.benchmark(group="MLP step 784-128-10 + Adam")
def test_mlpcompiled_plugtorch(benchmark, batch):
    """The same step under plugtorch.compile: captured once, its kernels replayed."""
    _only("plugtorch")
    benchmark.pedantic(_plugtorch_step("mlp", batch, compiled=True), rounds=300, warmup_rounds=50)
    _peak(benchmark)


@pytest.mark.parametrize("batch", [64, 128])
@pytest.mark.benchmark(group="MLP step 784-128-10 + Adam")
def test_mlp_torch(benchmark, batch):
    _only("torch")
    torch = _torch()
    model = _mlp(torch)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = _step(torch, model, opt, torch.randn(batch, 784), torch.randint(0, 10, (batch,)))
    benchmark.pedantic(step, rounds=300, warmup_rounds=50)
    _peak(benchmark)


@pytest.mark.parametrize("batch", [64, 128])
@pytest.mark.benchmark(group="MLP step 784-128-10 + Adam")
def test_mlp_numpy_floor(benchmark, batch):
    """The same step written by hand in NumPy: in-place Adam, no autograd, no dispatch."""
    _only("numpy")
    rng = np.random.default_rng(0)
    params = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in ((784, 128), (128,), (128, 10), (10,))]
    moments = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    state = {"t": 0}
    scratch = [np.empty_like(p) for p in params]

    def step():
        w1, b1, w2, b2 = params
        h = x @ w1
        h += b1
        np.maximum(h, 0, out=h)
        z = h @ w2
        z += b2
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)            # softmax; the loss value itself is not needed
        z[np.arange(batch), y] -= 1
        z /= batch
        grads = [None, None, h.T @ z, z.sum(axis=0)]
        dh = z @ w2.T
        dh *= h > 0
        grads[0], grads[1] = x.T @ dh, dh.sum(axis=0)
        state["t"] += 1
        t = state["t"]
        for p, g, (m, v), s in zip(params, grads, moments, scratch):
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            np.multiply(g, g, out=s)
            s *= 0.001
            v += s
            np.sqrt(v, out=s)
            s /= (1 - 0.999 ** t) ** 0.5
            s += 1e-8
            np.divide(m, s, out=s)
            s *= -1e-3 / (1 - 0.9 ** t)
            p += s
    benchmark.pedantic(step, rounds=300, warmup_rounds=50)
    _peak(benchmark)


@pytest.mark.benchmark(group="MNIST CNN step + Adam, batch 64")
def test_cnn_plugtorch(benchmark):
    _only("plugtorch")
    benchmark.pedantic(_plugtorch_step("cnn", 64, compiled=False), rounds=40, warmup_rounds=5)
    _peak(benchmark)


@pytest.mark.benchmark(group="MNIST CNN step + Adam, batch 64")
def test_cnncompiled_plugtorch(benchmark):
    _only("plugtorch")
    benchmark.pedantic(_plugtorch_step("cnn", 64, compiled=True), rounds=40, warmup_rounds=5)
    _peak(benchmark)


@pytest.mark.benchmark(group="MNIST CNN step + Adam, batch 64")
def test_cnn_torch(benchmark):
    _only("torch")
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class CNN(nn.Module):  # plugtorch.apps.train's CNN, in torch (as benchmarks/torch_mnist_peer.py, which
        def __init__(self):  # imports plugtorch for its data and so is not used here)
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
            self.pool, self.dropout = nn.MaxPool2d(2), nn.Dropout(0.25)
            self.fc1, self.fc2 = nn.Linear(32 * 7 * 7, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv2(self.pool(F.relu(self.conv1(x))))))
            return self.fc2(self.dropout(F.relu(self.fc1(x.flatten(1)))))

    torch.manual_seed(0)
    model = CNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = _step(torch, model, opt, torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    benchmark.pedantic(step, rounds=40, warmup_rounds=5)
    _peak(benchmark)
