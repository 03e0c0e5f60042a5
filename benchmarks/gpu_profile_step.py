"""cProfile of 50 eager MNIST CNN steps (batch 64, Adam) on the CuPy backend: where the host time
goes, by own time and by cumulative time.

    python benchmarks/gpu_profile_step.py > profile.txt      (benchmarks/gpu_check.sh runs it)
"""
import cProfile
import pstats
import sys

import cupy

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.apps.train import CNN

model = CNN(dropout=0.0).to("cupy")
opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)
x = plugtorch.randn(64, 1, 28, 28, device="cupy")
y = plugtorch.randint(0, 10, (64,), device="cupy")


def step():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


for _ in range(20):
    step()
cupy.cuda.get_current_stream().synchronize()
prof = cProfile.Profile()
prof.enable()
for _ in range(50):
    step()
cupy.cuda.get_current_stream().synchronize()
prof.disable()
stats = pstats.Stats(prof, stream=sys.stdout)
stats.sort_stats("tottime").print_stats(30)
stats.sort_stats("cumulative").print_stats(30)
