"""The collectives that only move bytes, for every dtype, including those MPI has no type for.

They hand MPI a byte spec of the tensor's own memory (``[array, MPI.BYTE]``); bfloat16, bool,
complex and the small ints must arrive bit for bit, on every rank.
"""
import plugtorch
import plugtorch.distributed as dist

dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
ar = plugtorch.arange(6)


def of(k, dt):
    return (ar + k).to(dt)


for dt in (plugtorch.bfloat16, plugtorch.float16, plugtorch.complex64, plugtorch.bool, plugtorch.int8,
           plugtorch.float64):
    x = of(rank, dt)
    out = plugtorch.zeros(6 * world, dtype=dt)
    dist.all_gather_into_tensor(out, x)
    assert out.equal(plugtorch.cat([of(k, dt) for k in range(world)])), (dt, out)
    got = [plugtorch.zeros(6, dtype=dt) for _ in range(world)] if rank == 0 else None
    dist.gather(x, got, dst=0)
    assert rank != 0 or all(got[k].equal(of(k, dt)) for k in range(world)), (dt, got)
    mine = plugtorch.zeros(6, dtype=dt)
    dist.scatter(mine, [of(10 * k, dt) for k in range(world)] if rank == 0 else None, src=0)
    assert mine.equal(of(10 * rank, dt)), (dt, mine)
    if rank < 2:  # ranks 0 and 1 exchange one tensor
        if rank == 0:
            dist.send(of(7, dt), 1)
        else:
            y = plugtorch.zeros(6, dtype=dt)
            dist.recv(y, 0)
            assert y.equal(of(7, dt)), (dt, y)
    blocks = plugtorch.zeros(2 * world, dtype=dt)
    dist.all_to_all_single(blocks, plugtorch.cat([of(100 * rank + k, dt)[:2] for k in range(world)]))
    assert blocks.equal(plugtorch.cat([of(100 * k + rank, dt)[:2] for k in range(world)])), (dt, blocks)

print(f"byte dtypes ok on rank {rank} of {world}")
dist.destroy_process_group()
