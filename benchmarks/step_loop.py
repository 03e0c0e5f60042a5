"""Per-op overhead and MNIST steps timed by a plain loop, for comparing commits.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/step_loop.py ops
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/step_loop.py mlp 64 eager 300
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/step_loop.py cnn 64 compiled 40

``ops`` prints the best of 7 repeats per call of ``a + b`` with autograd, ``a.add_(b)`` without a
graph, and a 10-op chain with its backward ((8, 8) float32); ``mlp``/``cnn`` print the median
of N training steps (zero_grad, forward, backward, Adam) of ``bench_steps.py``'s MLP or the MNIST
CNN after 5 warm-up steps, eager or under ``plugtorch.compile``. The models are written out
here, from the public API only, so that the same file runs against an older commit's checkout
(``PYTHONPATH`` pointing at it) and each commit is timed in a process of its own.
"""
import sys
import timeit

import plugtorch

nn, F = plugtorch.nn, plugtorch.nn.functional


class CNN(nn.Module):
    """``plugtorch train``'s CNN: conv16-pool-conv32-pool-fc128-dropout-fc10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.dropout = nn.Dropout(0.25)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(self.dropout(x))


def ops() -> None:
    def chain(a, b):
        y = a
        for i in range(10):
            y = (y * b).tanh() if i % 2 else y + b
        y.sum().backward()

    a = plugtorch.randn(8, 8, requires_grad=True)
    b = plugtorch.randn(8, 8, requires_grad=True)
    c, d = plugtorch.randn(8, 8), plugtorch.randn(8, 8)

    def best(f, n):
        return min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6
    print(f"chain {best(lambda: chain(a, b), 2000):.1f} us  a+b {best(lambda: a + b, 100000):.3f} us  "
          f"add_ {best(lambda: c.add_(d), 100000):.3f} us")


def steps(model_name: str, batch: int, mode: str, n: int) -> None:
    plugtorch.manual_seed(0)
    if model_name == "mlp":
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        x = plugtorch.randn(batch, 784)
    else:
        model = CNN()
        x = plugtorch.randn(batch, 1, 28, 28)
    y = plugtorch.randint(0, 10, (batch,))
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    if mode == "compiled":
        step = plugtorch.compile(step, fullgraph=True)
    for _ in range(5):
        step()
    times = sorted(timeit.repeat(step, number=1, repeat=n))
    print(f"{model_name} {batch} {mode} {times[len(times) // 2] * 1e6:.1f} us")


if __name__ == "__main__":
    if sys.argv[1:] == ["ops"]:
        ops()
    elif len(sys.argv) == 5 and sys.argv[1] in ("mlp", "cnn") and sys.argv[3] in ("eager", "compiled"):
        steps(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)
