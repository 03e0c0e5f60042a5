"""torchrun-style start: init_process_group(backend, init_method="env://"), then an all_reduce.

argv: the backend name, and optionally a rank that exits with status 3 before the all_reduce.
"""
import os
import sys

import plugtorch
import plugtorch.distributed as dist

backend = sys.argv[1]
dist.init_process_group(backend, init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
if "RANK" in os.environ:  # under the launcher (plain mpiexec sets none)
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"]), (rank, world)
if len(sys.argv) > 2 and rank == int(sys.argv[2]):
    sys.exit(3)
t = plugtorch.tensor([float(rank + 1), 1.0])
dist.all_reduce(t)
assert t.tolist() == [world * (world + 1) / 2, float(world)], t
print(f"all_reduce ok on rank {rank}", flush=True)
dist.destroy_process_group()
