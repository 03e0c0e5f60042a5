"""Data-parallel training throughput: plugtorch DDP over MPI vs PyTorch DDP over gloo.

The workload: an MNIST-shaped MLP (784-512-256-10, ReLU), cross-entropy, SGD with
momentum, a fixed per-rank batch, synthetic inputs (data loading is not measured),
one BLAS thread per rank. Samples/s counts every rank's samples.

    python benchmarks/bench_distributed_training.py            # all four, 5 runs each, a table
    python benchmarks/bench_distributed_training.py --batch 64 --steps 100 --repeat 3

runs ``plugtorch`` on 1 process (``python``) and 2 (``mpiexec -n 2``), and PyTorch on 1
process and 2 (DDP, gloo backend; ranks from the MPI launcher, rendezvous over TCP).
The target is 2-rank plugtorch >= 1.7x the 1-process samples/s. The cores are shared
with other work, so runs are interleaved and both the best and the median are shown,
and "plugtorch --local" runs the 2 ranks without DDP: the most 2 ranks can reach on
the cores they actually got, so DDP / --local is the cost of communication alone;
"--sync-only" adds just a 4-byte all-reduce per step: the cost of ranks waiting for
each other, before any gradient bytes move.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np

SIZES = (784, 512, 256, 10)


def _batches(rank, batch, n=8):
    rng = np.random.default_rng(rank)
    return [(rng.standard_normal((batch, SIZES[0])).astype(np.float32),
             rng.integers(0, SIZES[-1], batch)) for _ in range(n)]


def run_plugtorch(batch, steps, warmup, local=False, sync_only=False):
    import plugtorch
    import plugtorch.distributed as dist
    import plugtorch.optim
    from plugtorch import nn
    from plugtorch.nn.parallel import DistributedDataParallel

    dist.init()
    rank, world = dist.get_rank(), dist.get_world_size()
    plugtorch.manual_seed(0)
    layers = []
    for a, b in zip(SIZES[:-1], SIZES[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    if not (local or sync_only):  # --local: no communication (the ceiling for N ranks)
        model = DistributedDataParallel(model)
    token = plugtorch.zeros(1)  # --sync-only: no DDP, but ranks meet once a step
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    data = [(plugtorch.from_numpy(x), plugtorch.from_numpy(y)) for x, y in _batches(rank, batch)]

    def step(i):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if sync_only:
            dist.all_reduce(token)

    for i in range(warmup):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    dist.barrier()
    return rank, world, time.perf_counter() - t0


def run_torch(batch, steps, warmup):
    import torch
    import torch.distributed as tdist
    from torch import nn

    torch.set_num_threads(1)
    world = int(os.environ.get("PMI_SIZE", "1"))
    rank = int(os.environ.get("PMI_RANK", "0"))
    torch.manual_seed(0)
    layers = []
    for a, b in zip(SIZES[:-1], SIZES[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    if world > 1:
        tdist.init_process_group("gloo", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in _batches(rank, batch)]

    def step(i):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for i in range(warmup):
        step(i)
    if world > 1:
        tdist.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    if world > 1:
        tdist.barrier()
        tdist.destroy_process_group()
    return rank, world, time.perf_counter() - t0


def worker(args):
    if args.worker == "plugtorch":
        rank, world, seconds = run_plugtorch(args.batch, args.steps, args.warmup, args.local,
                                             args.sync_only)
    else:
        rank, world, seconds = run_torch(args.batch, args.steps, args.warmup)
    if rank == 0:
        print(json.dumps({"framework": args.worker, "world": world, "batch_per_rank": args.batch,
                          "steps": args.steps, "seconds": seconds,
                          "samples_per_s": world * args.batch * args.steps / seconds}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def driver(args):
    mpiexec = shutil.which("mpiexec")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1")
    configs = [("plugtorch", 1), ("plugtorch", 2), ("plugtorch --local", 2),
               ("plugtorch --sync-only", 2), ("torch", 1), ("torch", 2)]
    runs: dict = {c: [] for c in configs}
    for _ in range(args.repeat):  # interleaved, so load from other processes hits all alike
        for framework, world in configs:
            cmd = [sys.executable, __file__, "--worker", *framework.split(), "--batch", str(args.batch),
                   "--steps", str(args.steps), "--warmup", str(args.warmup)]
            if world > 1:
                cmd = [mpiexec, "-n", str(world)] + cmd
            env["MASTER_PORT"] = str(_free_port())
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
            runs[framework, world].append(json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"])
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {args.batch} per rank, {args.steps} steps, one BLAS "
          f"thread per rank, {args.repeat} interleaved runs each; load average {os.getloadavg()[0]:.2f}")
    print(f"{'framework':>22} {'ranks':>5} {'best samples/s':>15} {'speed-up':>9} "
          f"{'median samples/s':>17} {'speed-up':>9}")
    for framework, world in configs:
        best, med = max(runs[framework, world]), float(np.median(runs[framework, world]))
        one = runs[framework.split()[0], 1]
        best1, med1 = max(one), float(np.median(one))
        print(f"{framework:>22} {world:5d} {best:15.0f} {best / best1:8.2f}x {med:17.0f} {med / med1:8.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("plugtorch", "torch"))
    parser.add_argument("--batch", type=int, default=128, help="samples per rank per step")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each configuration")
    parser.add_argument("--local", action="store_true",
                        help="(plugtorch worker) no DDP: how fast N ranks go with no communication")
    parser.add_argument("--sync-only", action="store_true",
                        help="(plugtorch worker) no DDP, one 4-byte all-reduce per step")
    args = parser.parse_args()
    worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    main()
