"""Rank 1 raises in the middle of an epoch of DDP training; the others are left in a
collective. The whole job must end promptly, non-zero, with rank 1's traceback."""
import plugtorch
import plugtorch.distributed as dist
import plugtorch.optim
from plugtorch import nn
from plugtorch.nn.parallel import DistributedDataParallel

dist.init()
rank = dist.get_rank()
model = DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
opt = plugtorch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10_000):
    if rank == 1 and step == 20:
        raise ValueError("injected failure on rank 1 at step 20")
    opt.zero_grad()
    model(plugtorch.randn(16, 4)).pow(2).mean().backward()
    opt.step()
print("the job outlived a failed rank", flush=True)
