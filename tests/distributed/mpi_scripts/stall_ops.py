"""The last rank never joins OP on a subgroup; the watchdog must end the job naming it.

Usage: stall_ops.py OP, where OP is reduce_scatter (a collective) or recv (a receive
whose sender never sends).
"""
import sys
import time

import plugtorch
import plugtorch.distributed as dist

op = sys.argv[1]
dist.init(timeout=2.0)
rank, world = dist.get_rank(), dist.get_world_size()
sub = dist.new_group(list(range(world)))
dist.all_reduce(plugtorch.ones(1), group=sub)
if rank == world - 1:
    print(f"rank {rank} stalls before {op}", flush=True)
    time.sleep(60)
elif op == "reduce_scatter":
    dist.reduce_scatter_tensor(plugtorch.zeros(2), plugtorch.zeros(2 * world), group=sub)
else:
    dist.recv(plugtorch.zeros(3), src=world - 1, group=sub)
print(f"rank {rank} was not stopped", flush=True)
