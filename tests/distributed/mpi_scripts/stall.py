"""One rank stops arriving mid-epoch; the others must end the job with a diagnosis.

Usage: stall.py MODE [TIMEOUT_S]. The stalled rank is the last one, at step 5:
  sleep    sleeps forever (stuck in its own code, waiting on I/O)
  spin     spins in Python forever (a deadlock in user code that holds no lock we know)
  exit     leaves the training loop and exits cleanly (a rank with fewer batches, no join())
  mismatch posts a broadcast where the others post the bucket all-reduce
"""
import sys
import time

import plugtorch
import plugtorch.distributed as dist
import plugtorch.optim
from plugtorch import nn
from plugtorch.nn.parallel import DistributedDataParallel

mode = sys.argv[1]
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
dist.init(timeout=timeout)
rank, world = dist.get_rank(), dist.get_world_size()
plugtorch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
opt = plugtorch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1000):
    if rank == world - 1 and step == 5:
        print(f"rank {rank} stalls ({mode}) at step {step}", flush=True)
        if mode == "sleep":
            time.sleep(10**6)
        elif mode == "spin":
            while True:
                pass
        elif mode == "exit":
            break
        elif mode == "mismatch":
            dist.broadcast(plugtorch.zeros(3), src=0)
    opt.zero_grad()
    model(plugtorch.randn(4, 8)).pow(2).mean().backward()
    opt.step()
print(f"rank {rank} left the loop", flush=True)
