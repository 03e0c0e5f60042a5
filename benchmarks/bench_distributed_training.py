"""Data-parallel training throughput: plugtorch DDP over MPI vs PyTorch DDP over gloo.

The workload: an MNIST-shaped MLP (784-512-256-10, ReLU) or ``plugtorch train``'s MNIST
CNN (``--model cnn``), cross-entropy, SGD with momentum, a fixed per-rank batch,
synthetic inputs (data loading is not measured). Samples/s counts every rank's samples.

    python benchmarks/bench_distributed_training.py                       # 1, 2, 4 ranks, a table
    python benchmarks/bench_distributed_training.py --model cnn --ranks 1,2,4 --repeat 3

runs ``plugtorch`` (``python``, then ``mpiexec -n N``) and PyTorch (DDP, gloo backend;
ranks from the MPI launcher, rendezvous over TCP) on each number of ranks; 4 ranks on
this 2-core machine are oversubscribed. No thread variable is set: plugtorch sizes each
rank's BLAS pool itself, and the PyTorch workers call ``torch.set_num_threads`` with the
same share (cores // ranks). The cores are shared with other work, so runs are
interleaved and both the best and the median are shown. "plugtorch --local" runs the
ranks without DDP: the most N ranks can reach on the cores they actually got, so
DDP / --local is the cost of communication alone; "--sync-only" adds just a 4-byte
all-reduce per step: the cost of ranks waiting for each other. ``--threads 1`` pins
every run to one BLAS thread (steadier when other jobs load the machine).
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


def _share() -> int:
    """This rank's share of the cores, as plugtorch sizes it (for the PyTorch workers)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return int(os.environ["OMP_NUM_THREADS"])
    world = int(os.environ.get("PMI_SIZE", "1"))
    return max(1, len(os.sched_getaffinity(0)) // world)


def _batches(rank, batch, model, n=8):
    rng = np.random.default_rng(rank)
    shape = (batch, SIZES[0]) if model == "mlp" else (batch, 1, 28, 28)
    return [(rng.standard_normal(shape).astype(np.float32),
             rng.integers(0, SIZES[-1], batch)) for _ in range(n)]


def run_plugtorch(batch, steps, warmup, local=False, sync_only=False, model_name="mlp"):
    import plugtorch
    import plugtorch.distributed as dist
    import plugtorch.optim
    from plugtorch import nn
    from plugtorch.nn.parallel import DistributedDataParallel

    dist.init()
    rank, world = dist.get_rank(), dist.get_world_size()
    plugtorch.manual_seed(0)
    if model_name == "cnn":
        from plugtorch.apps.train import CNN
        model = CNN(dropout=0.0)
    else:
        layers = []
        for a, b in zip(SIZES[:-1], SIZES[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        model = nn.Sequential(*layers[:-1])
    if not (local or sync_only):  # --local: no communication (the ceiling for N ranks)
        model = DistributedDataParallel(model)
    token = plugtorch.zeros(1)  # --sync-only: no DDP, but ranks meet once a step
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    data = [(plugtorch.from_numpy(x), plugtorch.from_numpy(y)) for x, y in _batches(rank, batch, model_name)]

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


class TorchCNN:
    """``plugtorch.apps.train.CNN`` in PyTorch (built lazily: torch is imported in the worker only)."""

    @staticmethod
    def build():
        from torch import nn

        class CNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1, self.conv2 = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
                self.pool = nn.MaxPool2d(2)
                self.fc1, self.fc2 = nn.Linear(32 * 7 * 7, 128), nn.Linear(128, 10)

            def forward(self, x):
                x = self.pool(self.conv1(x).relu())
                x = self.pool(self.conv2(x).relu())
                return self.fc2(self.fc1(x.flatten(1)).relu())
        return CNN()


def run_torch(batch, steps, warmup, model_name="mlp"):
    import torch
    import torch.distributed as tdist
    from torch import nn

    torch.set_num_threads(_share())
    world = int(os.environ.get("PMI_SIZE", "1"))
    rank = int(os.environ.get("PMI_RANK", "0"))
    torch.manual_seed(0)
    if model_name == "cnn":
        model = TorchCNN.build()
    else:
        layers = []
        for a, b in zip(SIZES[:-1], SIZES[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        model = nn.Sequential(*layers[:-1])
    if world > 1:
        tdist.init_process_group("gloo", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in _batches(rank, batch, model_name)]

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
                                             args.sync_only, args.model)
    else:
        rank, world, seconds = run_torch(args.batch, args.steps, args.warmup, args.model)
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
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env["MASTER_ADDR"] = "127.0.0.1"
    if args.threads:
        env.update(OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
                   MKL_NUM_THREADS=str(args.threads))
    worlds = [int(w) for w in args.ranks.split(",")]
    configs = [(f, w) for w in worlds for f in ("plugtorch", "torch")]
    configs += [("plugtorch --local", w) for w in worlds if w > 1]
    if args.sync_only_too:
        configs += [("plugtorch --sync-only", w) for w in worlds if w > 1]
    runs: dict = {c: [] for c in configs}
    for _ in range(args.repeat):  # interleaved, so load from other processes hits all alike
        for framework, world in configs:
            cmd = [sys.executable, __file__, "--worker", *framework.split(), "--batch", str(args.batch),
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--model", args.model]
            if world > 1:
                cmd = [mpiexec, "-n", str(world)] + cmd
            env["MASTER_PORT"] = str(_free_port())
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
            runs[framework, world].append(json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"])
    workload = f"MLP {'-'.join(map(str, SIZES))}" if args.model == "mlp" else "MNIST CNN (plugtorch train's)"
    threads = f"{args.threads} thread(s) per rank" if args.threads else "threads sized by plugtorch"
    print(f"{workload}, batch {args.batch} per rank, {args.steps} steps, {len(os.sched_getaffinity(0))} cores, "
          f"{threads}, "
          f"{args.repeat} interleaved runs each; load average {os.getloadavg()[0]:.2f}")
    print(f"{'framework':>22} {'ranks':>5} {'best samples/s':>15} {'speed-up':>9} "
          f"{'median samples/s':>17} {'speed-up':>9}")
    for framework, world in configs:
        best, med = max(runs[framework, world]), float(np.median(runs[framework, world]))
        one = runs.get((framework.split()[0], 1))  # the speed-up is against 1 rank, if --ranks has it
        up_best = f"{best / max(one):8.2f}x" if one else f"{'-':>9}"
        up_med = f"{med / float(np.median(one)):8.2f}x" if one else f"{'-':>9}"
        print(f"{framework:>22} {world:5d} {best:15.0f} {up_best} {med:17.0f} {up_med}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("plugtorch", "torch"))
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--ranks", default="1,2,4", help="comma-separated numbers of ranks")
    parser.add_argument("--sync-only-too", action="store_true", help="also run the --sync-only rows")
    parser.add_argument("--threads", type=int, help="BLAS threads per rank for every run (OMP_NUM_THREADS); "
                        "default: plugtorch's sizing, cores // ranks")
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
