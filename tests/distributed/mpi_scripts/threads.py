"""BLAS threads per rank, and a fixed training workload's speed (rank 0 prints JSON).

Usage: threads.py STEPS [SET_NUM_THREADS]. With SET_NUM_THREADS, the script calls
plugtorch.set_num_threads(N) before joining the world, as a user who chooses would.
STEPS=0 reports the thread counts only.
"""
import json
import sys
import time

import numpy as np

import plugtorch
import plugtorch.distributed as dist
import plugtorch.optim
from plugtorch import nn
from plugtorch.nn.parallel import DistributedDataParallel

steps = int(sys.argv[1])
if len(sys.argv) > 2:
    plugtorch.set_num_threads(int(sys.argv[2]))
dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
threads = [None] * world
dist.all_gather_object(threads, plugtorch.get_num_threads())
if steps == 0:
    if rank == 0:
        print(json.dumps({"threads": threads}))
    sys.exit(0)

plugtorch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)))
opt = plugtorch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
g = np.random.default_rng(rank)
x = plugtorch.from_numpy(g.standard_normal((64, 784)).astype(np.float32))
y = plugtorch.from_numpy(g.integers(0, 10, 64))
loss_fn = nn.CrossEntropyLoss()
for i in range(steps + 10):
    if i == 10:  # after warm-up
        dist.barrier()
        start = time.perf_counter()
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
dist.barrier()
seconds = time.perf_counter() - start
if rank == 0:
    print(json.dumps({"threads": threads, "samples_per_s": world * 64 * steps / seconds}))
