"""Collective bandwidth: plugtorch's collectives against the same raw mpi4py calls.

    python benchmarks/bench_collectives.py --ranks 2,4                 # in memory, one host
    sudo python benchmarks/bench_collectives.py --ranks 2,4 --link 1gbit   # 2 namespace hosts

The driver starts one ``mpiexec`` per (collective, ranks) pair, so no run inherits another's
state; ``--link RATE`` runs each on two network-namespace "hosts" joined by a veth link capped
at RATE (``plugtorch.distributed.netns``; needs root), half the ranks on each. Each job runs,
on float32 NumPy arrays and plugtorch tensors sharing their memory (equally warm in cache):

| op | plugtorch | raw mpi4py |
|---|---|---|
| ``all_reduce`` | ``all_reduce(t)`` (SUM) | ``Allreduce(IN_PLACE, t, SUM)`` |
| ``all_gather`` | ``all_gather_into_tensor(out, inp)`` | ``Allgather(inp, out)`` |
| ``reduce_scatter`` | ``reduce_scatter_tensor(out, inp)`` (SUM) | ``Reduce_scatter_block(inp, out, SUM)`` |
| ``broadcast`` | ``broadcast(t, src=0)`` | ``Bcast(t, root=0)`` |
| ``all_to_all`` | ``all_to_all_single(out, inp)`` | ``Alltoall(inp, out)`` |
| ``send_recv`` | even ranks ``send(t, r + 1)``, odd ``recv(t, r - 1)`` | ``Send``/``Recv`` |

The size is the largest buffer of the call, as nccl-tests count it: all_reduce's tensor (of
zeros, so that repeated in-place sums stay finite), all_gather's output,
reduce_scatter's input, each rank's whole all_to_all input, the broadcast or sent tensor.
Bandwidth is size / time (algorithm bandwidth). They are timed in interleaved rounds
(alternating which goes first), each round the slowest rank's mean over a few calls; the
table gives the median time of each and ``plug/raw``, the median over rounds of raw time /
plugtorch time in the same round (1.0: as fast as raw MPI). ``posted`` is raw mpi4py's
non-blocking call waited on at once (``Iallreduce(...).Wait()``, ...), the MPI call plugtorch
makes: raw against posted is MPI's own price for the non-blocking algorithm, posted against
plug plugtorch's. The load average is printed,
since other processes may share the cores.

Over a link, with all_reduce among the ops, the alpha-beta model of docs/distributed.md
("Cost model") is fitted to plugtorch's 2-rank all-reduce times (``T = 2 alpha + n beta``,
least squares on relative error) and checked against the other 2-rank collectives it covers:
``reduce_scatter`` and ``all_gather`` (``alpha + n beta / 2``), ``broadcast`` (``alpha + n beta``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
SIZES_MB = (1, 4, 16, 64)
ROUNDS = 15


def worker(op: str, sizes: list[float], rounds: int) -> None:
    import plugtorch
    import plugtorch.distributed as dist

    dist.init()  # before mpi4py's import, as a plain training script: plugtorch initialises MPI
    from mpi4py import MPI
    comm = MPI.COMM_WORLD.Dup()
    rank, world = comm.Get_rank(), comm.Get_size()

    def timed(fn, reps):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return comm.allreduce((time.perf_counter() - t0) / reps, op=MPI.MAX)

    for mb in sizes:
        numel = int(mb * 2**20 / 4) // world * world  # divisible into equal blocks
        big = np.random.default_rng(rank).standard_normal(numel).astype(np.float32)
        small = np.zeros(numel // world, np.float32)
        out_big = np.zeros(numel, np.float32)
        t_big, t_small, t_out = (plugtorch.from_numpy(a) for a in (big, small, out_big))
        peer = rank + 1 if rank % 2 == 0 else rank - 1
        if op == "all_reduce":
            big[:] = 0  # summed in place over and over: zeros stay finite and normal
            raw = lambda: comm.Allreduce(MPI.IN_PLACE, big, MPI.SUM)
            posted = lambda: comm.Iallreduce(MPI.IN_PLACE, big, MPI.SUM).Wait()
            plug = lambda: dist.all_reduce(t_big)
        elif op == "all_gather":
            raw = lambda: comm.Allgather(small, out_big)
            posted = lambda: comm.Iallgather(small, out_big).Wait()
            plug = lambda: dist.all_gather_into_tensor(t_out, t_small)
        elif op == "reduce_scatter":
            raw = lambda: comm.Reduce_scatter_block(big, small, MPI.SUM)
            posted = lambda: comm.Ireduce_scatter_block(big, small, MPI.SUM).Wait()
            plug = lambda: dist.reduce_scatter_tensor(t_small, t_big)
        elif op == "broadcast":
            raw = lambda: comm.Bcast(big, root=0)
            posted = lambda: comm.Ibcast(big, root=0).Wait()
            plug = lambda: dist.broadcast(t_big, src=0)
        elif op == "all_to_all":
            raw = lambda: comm.Alltoall(big, out_big)
            posted = lambda: comm.Ialltoall(big, out_big).Wait()
            plug = lambda: dist.all_to_all_single(t_out, t_big)
        elif op == "send_recv":
            if peer >= world:
                raise SystemExit("send_recv pairs ranks (0, 1), (2, 3), ...: run an even number of ranks")
            if rank % 2 == 0:
                raw = lambda: comm.Send(big, dest=peer)
                posted = lambda: comm.Isend(big, dest=peer).Wait()
                plug = lambda: dist.send(t_big, dst=peer)
            else:
                raw = lambda: comm.Recv(big, source=peer)
                posted = lambda: comm.Irecv(big, source=peer).Wait()
                plug = lambda: dist.recv(t_big, src=peer)
        else:
            raise SystemExit(f"unknown op {op!r}; one of {', '.join(OPS)}")
        reps = max(2, int(16 / mb))
        raw(), posted(), plug()  # warm up: connections, registrations, first-touch pages
        fns = {"raw": raw, "posted": posted, "plug": plug}
        times: dict[str, list[float]] = {name: [] for name in fns}
        for i in range(rounds):
            order = ("raw", "posted", "plug") if i % 2 else ("plug", "posted", "raw")
            for name in order:
                times[name].append(timed(fns[name], reps))
        if rank == 0:
            raw_t, posted_t, plug_t = (np.median(times[name]) for name in fns)
            ratio = float(np.median(np.array(times["raw"]) / np.array(times["plug"])))
            print(f"RESULT {op} {world} {mb:g} {mb / raw_t:.0f} {mb / posted_t:.0f} {mb / plug_t:.0f} {ratio:.3f}",
                  flush=True)


def driver(args) -> None:
    here = os.path.abspath(__file__)
    mpiexec = shutil.which("mpiexec") or "mpiexec"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    print(f"load average {os.getloadavg()}; link: {args.link or 'memory (one host)'}; MB = 2**20 bytes; "
          f"MB/s = size / median time of {args.rounds} rounds; plug/raw = median of per-round raw/plugtorch time")
    print(f"{'op':>15} {'ranks':>5} {'size MB':>8} {'raw MB/s':>9} {'posted MB/s':>12} {'plug MB/s':>10} "
          f"{'plug/raw':>9}")
    seconds: dict[tuple[str, float], float] = {}  # (op, MB) -> plugtorch's median time on 2 ranks
    for op in args.ops.split(","):
        for n in (int(r) for r in args.ranks.split(",")):
            argv = [sys.executable, here, "--worker", "--op", op, "--sizes", args.sizes, "--rounds", str(args.rounds)]
            if args.link:
                from plugtorch.distributed import netns
                rate = None if args.link == "none" else args.link
                with netns.Cluster(hosts=2, rate=rate) as cluster:
                    cmd = cluster.mpiexec(argv, ranks_per_host=n // 2, env={
                        k: env[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
                    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
            else:
                result = subprocess.run([mpiexec, "-n", str(n), *argv], capture_output=True, text=True, env=env,
                                        timeout=1800)
            rows = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("RESULT ")]
            if result.returncode != 0 or not rows:
                print(f"{op} on {n} ranks failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
                continue
            for name, world, mb, raw_bw, posted_bw, plug_bw, ratio in rows:
                print(f"{name:>15} {world:>5} {mb:>8} {raw_bw:>9} {posted_bw:>12} {plug_bw:>10} {ratio:>9}", flush=True)
                if world == "2":
                    seconds[name, float(mb)] = float(mb) / float(plug_bw)
    print(f"load average {os.getloadavg()}")
    if args.link:  # in memory a byte costs a copy or a sum, not a link's time: no one beta
        check_model(seconds)


# the 2-rank model: time = latencies * alpha + bytes * beta, as (latencies, share of n)
MODEL = {"all_reduce": (2, 1.0), "reduce_scatter": (1, 0.5), "all_gather": (1, 0.5), "broadcast": (1, 1.0)}


def check_model(seconds: dict) -> None:
    """Fit alpha and beta to the 2-rank all-reduces; print the other collectives' predictions."""
    fitted = [(mb * 2**20, t) for (op, mb), t in seconds.items() if op == "all_reduce"]
    if len(fitted) < 2:
        return
    n = np.array([b for b, _ in fitted])
    t = np.array([t for _, t in fitted])
    a = np.stack([np.full_like(n, 2.0), n], axis=1) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    alpha = max(float(alpha), 0.0)
    print(f"alpha-beta fit to the 2-rank all_reduce: alpha {alpha * 1e6:.1f} us, beta {beta * 1e9:.3f} ns/B "
          f"({1 / beta / 2**20:.0f} MB/s)")
    print(f"{'op':>15} {'size MB':>8} {'measured ms':>12} {'predicted ms':>13} {'error':>7}")
    for (op, mb), measured in sorted(seconds.items()):
        if op in MODEL:
            latencies, share = MODEL[op]
            predicted = latencies * alpha + share * mb * 2**20 * beta
            print(f"{op:>15} {mb:>8g} {measured * 1e3:12.2f} {predicted * 1e3:13.2f} "
                  f"{predicted / measured - 1:+7.0%}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--ranks", default="2,4", help="comma-separated numbers of ranks, one mpiexec each")
    p.add_argument("--sizes", default=",".join(map(str, SIZES_MB)), help="MB, comma-separated")
    p.add_argument("--link", default="", help="a tc rate (1gbit, 10gbit) or none: 2 namespace hosts")
    p.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds per size")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--op", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.op, [float(s) for s in args.sizes.split(",")], args.rounds)
    else:
        driver(args)


if __name__ == "__main__":
    main()
