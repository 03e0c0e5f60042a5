"""How much of the gradient all-reduce hides behind backward (DDP overlap).

    python benchmarks/bench_distributed_overlap.py                  # 2 ranks, shared memory
    python benchmarks/bench_distributed_overlap.py --rate 1gbit     # 2 namespace hosts, 1 Gbit/s link (root)

For an MLP of about 12.6M parameters (50 MB of float32 gradients in 25 MB buckets) each
rank measures, interleaved step by step, the medians of:

* ``local``: forward + backward with no DDP (the compute);
* ``comm``: the same buckets all-reduced back to back with no compute (the communication);
* ``ddp``: forward + backward under DDP, up to the gradients being averaged.

``exposed = ddp - local`` is the communication backward had to wait for, ``hidden = local
+ comm - ddp`` the communication that ran during backward, and ``overlap = hidden / comm``.
A bucket can only start once backward has produced all of its gradients, so even perfect
progress hides at most what the bucket timeline allows (``--bucket-cap-mb`` changes it).
Each is measured with the MPI plugin's progress thread (the default) and without it
(``PLUGTORCH_MPI_PROGRESS_THREAD=0``: posted buckets advance only when a later gradient
hook happens to poll them).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

SIZES = (1024, 2048, 2048, 2048, 1024)


def worker(args):
    import plugtorch
    import plugtorch.distributed as dist
    from plugtorch import nn
    from plugtorch.nn.parallel import DistributedDataParallel

    dist.init()
    rank = dist.get_rank()
    plugtorch.manual_seed(0)

    def mlp():
        layers = []
        for a, b in zip(SIZES[:-1], SIZES[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers[:-1])

    plain, wrapped = mlp(), mlp()
    ddp = DistributedDataParallel(wrapped, bucket_cap_mb=args.bucket_cap_mb)
    buckets = [plugtorch.zeros(b.flat.numel()) for b in ddp.reducer.buckets]
    x = plugtorch.randn(args.batch, SIZES[0])

    def local():
        plain.zero_grad()
        plain(x).pow(2).mean().backward()

    def comm():
        works = [dist.all_reduce(b, async_op=True) for b in buckets]
        for w in works:
            w.wait()

    def with_ddp():
        wrapped.zero_grad()
        ddp(x).pow(2).mean().backward()

    times: dict = {"local": [], "comm": [], "ddp": []}
    for step in range(args.steps + 2):
        for name, fn in (("local", local), ("comm", comm), ("ddp", with_ddp)):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if step >= 2:  # warm-up
                times[name].append(dt)
    med = {k: float(np.median(v)) for k, v in times.items()}
    slowest = [None] * dist.get_world_size()
    dist.all_gather_object(slowest, med)
    if rank == 0:
        med = {k: max(m[k] for m in slowest) for k in med}
        print(json.dumps({"params": sum(p.numel() for p in plain.parameters()),
                          "buckets": len(buckets), **med}))


def driver(args):
    mpiexec = shutil.which("mpiexec")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd_tail = [sys.executable, __file__, "--worker", "--batch", str(args.batch), "--steps", str(args.steps),
                "--bucket-cap-mb", str(args.bucket_cap_mb)]
    cluster = None
    if args.rate:
        from plugtorch.distributed.netns import Cluster
        cluster = Cluster(hosts=2, rate=None if args.rate == "none" else args.rate).__enter__()
    rows = {"on": [], "off": []}
    try:
        for _ in range(args.repeat):
            for mode in rows:
                env["PLUGTORCH_MPI_PROGRESS_THREAD"] = "1" if mode == "on" else "0"
                if cluster is None:
                    cmd = [mpiexec, "-n", "2", *cmd_tail]
                else:
                    cmd = cluster.mpiexec(cmd_tail, env={"PLUGTORCH_MPI_PROGRESS_THREAD": env[
                        "PLUGTORCH_MPI_PROGRESS_THREAD"]})
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
                if out.returncode:
                    sys.exit(f"{' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
                rows[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        if cluster is not None:
            cluster.close()
    first = rows["on"][0]
    where = "2 ranks, shared memory" if cluster is None else f"2 namespace hosts, link {args.rate}"
    print(f"{where}; MLP {'-'.join(map(str, SIZES))} ({first['params'] / 1e6:.1f}M parameters, "
          f"{first['buckets']} buckets of <= {args.bucket_cap_mb:g} MB), batch {args.batch} per rank, "
          f"medians of {args.steps} steps, "
          f"best of {args.repeat} runs; load average {os.getloadavg()[0]:.2f}")
    print(f"{'progress thread':>15} {'local ms':>9} {'comm ms':>8} {'ddp ms':>7} {'exposed ms':>11} "
          f"{'hidden ms':>10} {'overlap':>8}")
    for mode, runs in rows.items():
        best = min(runs, key=lambda r: r["ddp"] - r["local"])  # the run least disturbed by other load
        hidden = best["local"] + best["comm"] - best["ddp"]
        print(f"{mode:>15} {1e3 * best['local']:9.1f} {1e3 * best['comm']:8.1f} {1e3 * best['ddp']:7.1f} "
              f"{1e3 * (best['ddp'] - best['local']):11.1f} {1e3 * hidden:10.1f} {hidden / best['comm']:8.0%}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--rate", help="run on 2 network-namespace hosts with this link rate (e.g. 1gbit, "
                        "10gbit, none for unshaped); needs root")
    args = parser.parse_args()
    worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    main()
