"""Collectives waited on at once (async_op=False) next to async ones.

Each rank alternates which of the two it uses for the same collective, so that every sync
call on one rank meets an async one on another, and posts sync collectives while async
ones are still in flight; every result is checked. The sync ones must not wake the
group's communication thread (where waits spin); the async ones must.
"""
import numpy as np

import plugtorch
import plugtorch.distributed as dist
from plugtorch.distributed import groups

dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
engine = groups.default_group().engine
wakes = []
notify = engine.wakeup.notify_all


def counted():
    wakes.append(1)
    notify()


engine.wakeup.notify_all = counted


def check(t, expected, what):
    assert np.array_equal(t.numpy(), np.asarray(expected, dtype=t.numpy().dtype)), (what, rank, t.numpy(), expected)


for step in range(6):
    sync = (step + rank) % 2 == 0  # rank 0 and rank 1 choose differently at every step
    t = plugtorch.full((1000,), float(rank + step))
    work = dist.all_reduce(t, async_op=not sync)
    if work is not None:
        work.wait()
    check(t, [sum(r + step for r in range(world))] * 1000, "all_reduce")

    b = plugtorch.full((5,), float(rank))
    work = dist.broadcast(b, src=step % world, async_op=not sync)
    if work is not None:
        work.wait()
    check(b, [step % world] * 5, "broadcast")

    out = plugtorch.zeros(3 * world)
    work = dist.all_gather_into_tensor(out, plugtorch.full((3,), float(rank)), async_op=not sync)
    if work is not None:
        work.wait()
    check(out, np.repeat(np.arange(world), 3), "all_gather_into_tensor")

    piece = plugtorch.zeros(2)
    work = dist.reduce_scatter_tensor(piece, plugtorch.arange(2 * world, dtype=plugtorch.float32), async_op=not sync)
    if work is not None:
        work.wait()
    check(piece, [world * (2 * rank), world * (2 * rank + 1)], "reduce_scatter_tensor")

# sync collectives while an async one is in flight: the order of posting is kept
pending = plugtorch.full((1 << 16,), float(rank))
work = dist.all_reduce(pending, async_op=True)
small = plugtorch.ones(4)
dist.all_reduce(small)
dist.barrier()
work.wait()
check(small, [world] * 4, "all_reduce after an async one")
check(pending, [sum(range(world))] * (1 << 16), "the async all_reduce")

# sync ones post quietly (they spin in MPI_Wait, on an oversubscribed node too); async ones
# wake the thread
spins = engine.quiet_waits
assert spins == (engine.thread is not None), "a sync collective sleeps without PLUGTORCH_MPI_WAIT=sleep"
before = len(wakes)
for _ in range(20):
    dist.all_reduce(plugtorch.ones(8))
quiet = len(wakes) - before
before = len(wakes)
for _ in range(20):
    dist.all_reduce(plugtorch.ones(8), async_op=True).wait()
loud = len(wakes) - before
assert loud >= 20, loud
assert quiet == 0 if spins else quiet >= 20, (quiet, spins)  # a sleeping wait needs the thread
print(f"waited.py ok on rank {rank} (spins={spins}, sync wakes {quiet}, async wakes {loud})", flush=True)
