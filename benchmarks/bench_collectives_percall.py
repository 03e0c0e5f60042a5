"""Per-call times of collectives and send/recv pairs: raw blocking mpi4py, raw posted (the non-blocking call
waited on at once, the call plugtorch makes) and plugtorch (async_op=False), interleaved call
by call (alternating order); rank 0's 10th percentile and median of each, and raw / plugtorch.

    mpiexec -n 2 python benchmarks/bench_collectives_percall.py 0.25,1,4,16   # sizes in MB; any even
                                                                              # number of ranks

The 10th percentile shrugs off the time slices other work takes on a shared machine, where
bench_collectives.py's means per round scatter widely below 4 MB.
"""
import sys
import time

import numpy as np

import plugtorch
import plugtorch.distributed as dist


def main(sizes: list[float]) -> None:
    dist.init()  # before mpi4py's import, as a training script: plugtorch initialises MPI
    from mpi4py import MPI
    comm = MPI.COMM_WORLD.Dup()
    rank, world = comm.Get_rank(), comm.Get_size()
    if world % 2:
        raise SystemExit("send/recv runs in pairs of ranks (0, 1), (2, 3), ...: run an even number of ranks")
    peer = rank + 1 if rank % 2 == 0 else rank - 1
    clock = time.perf_counter
    for mb in sizes:
        n = int(mb * 2**20 / 4) // world * world  # one block per rank: all_gather's input, reduce_scatter's output
        big, small, out = np.zeros(n, np.float32), np.zeros(n // world, np.float32), np.zeros(n, np.float32)
        t_big, t_small, t_out = (plugtorch.from_numpy(a) for a in (big, small, out))
        cases = {
            "broadcast": (lambda: comm.Bcast(big, root=0), lambda: comm.Ibcast(big, root=0).Wait(),
                          lambda: dist.broadcast(t_big, 0)),
            "all_gather": (lambda: comm.Allgather(small, out), lambda: comm.Iallgather(small, out).Wait(),
                           lambda: dist.all_gather_into_tensor(t_out, t_small)),
            "reduce_scatter": (lambda: comm.Reduce_scatter_block(big, small, MPI.SUM),
                               lambda: comm.Ireduce_scatter_block(big, small, MPI.SUM).Wait(),
                               lambda: dist.reduce_scatter_tensor(t_small, t_big)),
            "all_reduce": (lambda: comm.Allreduce(MPI.IN_PLACE, big, MPI.SUM),
                           lambda: comm.Iallreduce(MPI.IN_PLACE, big, MPI.SUM).Wait(),
                           lambda: dist.all_reduce(t_big)),
            "all_to_all": (lambda: comm.Alltoall(big, out), lambda: comm.Ialltoall(big, out).Wait(),
                           lambda: dist.all_to_all_single(t_out, t_big)),
            # in pairs (0, 1), (2, 3), ...: the even rank sends, the odd one receives
            "send_recv": ((lambda: comm.Send(big, dest=peer)) if rank % 2 == 0 else
                          (lambda: comm.Recv(big, source=peer)),
                          (lambda: comm.Isend(big, dest=peer).Wait()) if rank % 2 == 0 else
                          (lambda: comm.Irecv(big, source=peer).Wait()),
                          (lambda: dist.send(t_big, peer)) if rank % 2 == 0 else (lambda: dist.recv(t_big, peer))),
        }
        calls = int(min(1500, max(100, 400 / mb)))
        for name, fns in cases.items():
            t = np.zeros((calls, 3))
            for fn in fns:
                fn()  # warm up
            comm.Barrier()
            for i in range(calls):
                for j in ((0, 1, 2) if i % 2 else (2, 1, 0)):
                    t0 = clock()
                    fns[j]()
                    t[i, j] = clock() - t0
            if rank == 0:
                p10, p50 = np.percentile(t, 10, axis=0) * 1e6, np.median(t, axis=0) * 1e6
                print(f"{name:>14} {mb:5g} MB  us blocking/posted/plugtorch  p10 {p10[0]:7.1f} {p10[1]:7.1f} "
                      f"{p10[2]:7.1f} ({p10[0] / p10[2]:.2f})   p50 {p50[0]:7.1f} {p50[1]:7.1f} {p50[2]:7.1f} "
                      f"({p50[0] / p50[2]:.2f})", flush=True)


if __name__ == "__main__":
    main([float(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "0.25,1,4,16").split(",")])
