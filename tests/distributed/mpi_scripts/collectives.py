"""Every collective of plugtorch.distributed over MPI, checked on every rank.

A failed assert raises on that rank, which aborts the job: the launcher exits non-zero.
"""
import numpy as np

import plugtorch
import plugtorch.distributed as dist

pg = dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi", pg
assert dist.is_mpi_available()

# all_reduce: every op, float and int
base = np.arange(6, dtype=np.float32) + rank
expected = {
    dist.ReduceOp.SUM: sum(np.arange(6) + r for r in range(world)),
    dist.ReduceOp.AVG: sum(np.arange(6) + r for r in range(world)) / world,
    dist.ReduceOp.MAX: np.arange(6) + world - 1,
    dist.ReduceOp.MIN: np.arange(6),
    dist.ReduceOp.PRODUCT: np.prod([np.arange(6) + r for r in range(world)], axis=0),
}
for op, want in expected.items():
    t = plugtorch.from_numpy(base.copy())
    version = t._version
    assert dist.all_reduce(t, op=op) is None
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, err_msg=str(op))
    assert t._version > version, "a collective must bump the version counter like any in-place op"
ints = plugtorch.tensor([rank, 10 * rank])
dist.all_reduce(ints)
assert ints.tolist() == [sum(range(world)), 10 * sum(range(world))] and ints.dtype is plugtorch.int64

# float16 sums with its own rounding (plugtorch's NumPy sum, not MPICH's slower one)
h = plugtorch.tensor([1.0 + 2.0**-10, 3e-7, -2.0, 60000.0], dtype=plugtorch.float16)
dist.all_reduce(h)
want = np.float16([1.0 + 2.0**-10, 3e-7, -2.0, 60000.0])
total = want.copy()
for _ in range(world - 1):
    with np.errstate(over="ignore"):
        total = total + want
assert h.dtype is plugtorch.float16 and np.array_equal(h.numpy(), total), (h.numpy(), total)
h = plugtorch.full((3,), 2.0, dtype=plugtorch.float16)
dist.all_reduce(h, op=dist.ReduceOp.AVG)
assert h.tolist() == [2.0] * 3

# a 0-d tensor and a non-contiguous view (written back into the base tensor)
s = plugtorch.tensor(float(rank + 1))
dist.all_reduce(s, op=dist.ReduceOp.MAX)
assert s.item() == world
base2 = plugtorch.arange(6.0).reshape(2, 3) * (rank + 1)
view = base2.t()
dist.all_reduce(view)
np.testing.assert_allclose(base2.numpy(), np.arange(6.0).reshape(2, 3) * sum(range(1, world + 1)))

# async: post two, wait in reverse order
a, b = plugtorch.full((1000,), float(rank)), plugtorch.ones(3)
wa = dist.all_reduce(a, async_op=True)
wb = dist.all_reduce(b, op=dist.ReduceOp.AVG, async_op=True)
assert wb.wait() and wa.wait() and wa.is_completed()
assert a.numpy().min() == sum(range(world)) and b.tolist() == [1.0, 1.0, 1.0]

# broadcast from the last rank
t = plugtorch.full((2, 2), float(rank))
dist.broadcast(t, src=world - 1)
assert t.numpy().tolist() == [[world - 1.0] * 2] * 2

# all_gather
out = [plugtorch.zeros(3) for _ in range(world)]
dist.all_gather(out, plugtorch.tensor([rank, rank, -rank]).float())
assert [o.tolist() for o in out] == [[r, r, -r] for r in range(world)]

# objects
objs = [None] * world
dist.all_gather_object(objs, {"rank": rank})
assert objs == [{"rank": r} for r in range(world)]
lst = [rank, "x"] if rank == 1 else [None, None]
dist.broadcast_object_list(lst, src=1)
assert lst == [1, "x"]

dist.barrier()
work = dist.barrier(async_op=True)
work.wait()
print(f"collectives ok on rank {rank} of {world}")
dist.destroy_process_group()
