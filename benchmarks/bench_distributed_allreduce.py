"""All-reduce bandwidth: raw mpi4py ``Allreduce`` vs plugtorch's fused DDP bucket.

Run under MPI, one BLAS thread per rank:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpiexec -n 2 python benchmarks/bench_distributed_allreduce.py

For each total size, on the same bytes:

* ``raw``: ``comm.Allreduce(MPI.IN_PLACE, array, MPI.SUM)`` on a NumPy float32 array
  (and, for reference, the same with mpi4py's non-blocking ``Iallreduce(...).Wait()``);
* ``bucket``: the collective each DDP bucket runs — ``all_reduce(flat, AVG, async_op=True)``
  then ``wait()`` (non-blocking ``Iallreduce`` plus the averaging);
* ``ddp_sync``: DDP's whole gradient synchronisation for parameters of that total size
  (64 parameters, default 25 MB buckets): copy each ``.grad`` into its bucket, the bucket
  all-reduces, and the copy back into ``.grad``;
* ``per_param``: one blocking all-reduce per parameter (what fusion avoids), 1024 parameters.

Bandwidth is bytes / time (algorithm bandwidth, "algbw"); bus bandwidth ("busbw", the
nccl-tests convention) is algbw * 2(n-1)/n, the rate each rank's link carries in a ring
all-reduce, comparable across numbers of ranks. Other processes share the cores, so the
methods are timed in interleaved short rounds (alternating order); the ratios are medians
of per-round ratios, which pair measurements taken moments apart.
"""
from __future__ import annotations

import time

import numpy as np

ROUNDS = 31


def main():
    from mpi4py import MPI

    import plugtorch
    import plugtorch.distributed as dist
    from plugtorch import nn
    from plugtorch.nn.parallel import DistributedDataParallel

    dist.init()
    comm = MPI.COMM_WORLD.Dup()
    rank, world = comm.Get_rank(), comm.Get_size()

    def timed(fn, reps):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        dt = (time.perf_counter() - t0) / reps
        return comm.allreduce(dt, op=MPI.MAX)

    class Params(nn.Module):
        def __init__(self, n_params, numel):
            super().__init__()
            for i in range(n_params):
                setattr(self, f"p{i}", nn.Parameter(plugtorch.zeros(numel)))

    if rank == 0:
        print(f"{world} ranks; MB = 2**20 bytes; bandwidth = bytes / best time of {ROUNDS} rounds; "
              "x/raw = median over rounds of the raw time / x time, same round")
        print(f"{'size MB':>8} {'raw MB/s':>9} {'raw busbw':>10} {'Iallreduce/raw':>15} {'bucket MB/s':>12} "
              f"{'bucket busbw':>13} {'bucket/raw':>11} {'ddp_sync MB/s':>14} {'ddp/raw':>8} {'per_param MB/s':>15}")
    for mb in (0.25, 1, 4, 16, 64):
        numel = int(mb * 2**20 / 4)
        reps = max(2, int(8 / mb))
        array = np.random.default_rng(rank).standard_normal(numel).astype(np.float32)
        flat = plugtorch.from_numpy(array)  # the same memory as raw: equally warm in cache
        model = Params(64, numel // 64)
        ddp = DistributedDataParallel(model)
        for p in model.parameters():
            p.grad = plugtorch.ones(p.shape)
        small = [plugtorch.from_numpy(a) for a in np.array_split(array, 1024)]

        def raw():
            comm.Allreduce(MPI.IN_PLACE, array, MPI.SUM)

        def raw_nb():
            comm.Iallreduce(MPI.IN_PLACE, array, MPI.SUM).Wait()

        def bucket():  # the collective a DDP bucket runs
            dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True).wait()

        def ddp_sync():  # exactly what backward's post-accumulate-grad hooks do
            ddp.reducer.prepare(None)
            for p in reversed(list(model.parameters())):
                ddp.reducer._grad_ready(p)

        def per_param():
            for t in small:
                dist.all_reduce(t, op=dist.ReduceOp.SUM)

        methods = [("raw", raw), ("raw_nb", raw_nb), ("bucket", bucket), ("ddp_sync", ddp_sync),
                   ("per_param", per_param)]
        times = {name: [] for name, _ in methods}
        for i in range(ROUNDS):
            for name, fn in (methods if i % 2 else methods[::-1]):  # alternate the order
                times[name].append(timed(fn, reps))
        bw = {k: mb / min(v) for k, v in times.items()}
        ratio = {k: float(np.median(np.array(times["raw"]) / np.array(v))) for k, v in times.items()}
        if rank == 0:
            bus = 2 * (world - 1) / world
            print(f"{mb:8.2f} {bw['raw']:9.0f} {bw['raw'] * bus:10.0f} {ratio['raw_nb']:15.2f} {bw['bucket']:12.0f} "
                  f"{bw['bucket'] * bus:13.0f} {ratio['bucket']:11.2f} {bw['ddp_sync']:14.0f} {ratio['ddp_sync']:8.2f} "
                  f"{bw['per_param']:15.0f}")


if __name__ == "__main__":
    main()
