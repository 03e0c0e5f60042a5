"""Train an MLP (no dropout) for K SGD steps with DDP; rank 0 saves the parameters.

Run it with plain ``python`` (one process) or under ``mpiexec -n N``: with the same
seed and global batch every world size must end with the same parameters. The
global batch of B samples is split across ranks by DistributedSampler.
Usage: train_mlp.py OUT.npz [STEPS] [GLOBAL_BATCH]
TRAIN_DEVICE=cupy (or cupy_emulated) trains on that backend: device tensors through MPI.
"""
import os
import socket
import sys

import numpy as np

import plugtorch
import plugtorch.distributed as dist
import plugtorch.optim
from plugtorch import nn
from plugtorch.nn.parallel import DistributedDataParallel
from plugtorch.utils.data.distributed import DistributedSampler

out = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
global_batch = int(sys.argv[3]) if len(sys.argv) > 3 else 32

dist.init()
world, rank = dist.get_world_size(), dist.get_rank()
assert global_batch % world == 0, "the global batch must split evenly across ranks"
local_batch = global_batch // world

rng = np.random.default_rng(0)
X = plugtorch.from_numpy(rng.standard_normal((400, 20)).astype(np.float32))
Y = plugtorch.from_numpy(rng.integers(0, 10, 400))

plugtorch.manual_seed(1234 + rank)  # different on each rank: DDP must make rank 0's win
model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
device = os.environ.get("TRAIN_DEVICE", "numpy")
model.to(device)
X, Y = X.to(device), Y.to(device)
ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)  # several buckets
assert len(ddp.reducer.buckets) > 1
opt = plugtorch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
sampler = DistributedSampler(range(len(X)), shuffle=True, seed=7)

step, epoch = 0, 0
while step < steps:
    sampler.set_epoch(epoch)
    indices = list(sampler)
    for k in range(len(indices) // local_batch):
        if step == steps:
            break
        idx = plugtorch.tensor(indices[k * local_batch:(k + 1) * local_batch], device=device)
        opt.zero_grad()
        loss = loss_fn(ddp(X[idx]), Y[idx])
        loss.backward()
        opt.step()
        step += 1
    epoch += 1

if rank == 0:
    assert all(p.device.type == device for p in model.parameters())
    np.savez(out, **{name: p.detach().cpu().numpy() for name, p in model.named_parameters()})
print(f"rank {rank}/{world} on {socket.gethostname()}: {steps} steps, final local loss {loss.item():.6f}")
