"""Data-parallel training over real TCP links: 2 network-namespace "hosts" on this machine.

    sudo python benchmarks/bench_distributed_network.py --rates memory,10gbit,1gbit --out net.json
    python benchmarks/bench_distributed_model.py net.json        # the alpha-beta model, from these numbers

For each link — ``memory`` (2 ranks on one host, shared memory), or a veth link between
two namespaces capped with ``tc`` htb (``10gbit``, ``1gbit``, ``none`` for uncapped);
see ``plugtorch.distributed.netns`` — one rank per host measures:

* ``sweep``: the time of one all-reduce of 4 KB .. 64 MB, through plugtorch (the DDP
  bucket path) and through raw mpi4py ``Allreduce`` (medians; the alpha-beta fit's data);
* ``hooks``: a 25 MB bucket averaged by each DDP communication hook (none, fp16, bf16):
  its time, and the bytes the link carried;
* ``train``: steps of the MNIST CNN (batch 64 per rank) and of a 25M-parameter MLP
  (1024-4096-4096-1024, batch 32 per rank), without DDP (``local``: the compute) and with
  DDP under each hook: forward, backward (to averaged gradients) and optimizer times, and
  when backward handed each bucket to communication.

Everything is printed as a table and written to ``--out`` as JSON. Both "hosts" share this
machine's cores, and the runs of each link are interleaved with nothing else of ours, but
other jobs may load the machine: the load average is recorded with each result.
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

SIZES_KB = (4, 64, 1024, 4096, 16384, 65536)
HOOKS = ("none", "fp16_compress_hook", "bf16_compress_hook")
MODELS = {"cnn": 64, "mlp25m": 32}  # model -> batch per rank


# -- what each rank runs --------------------------------------------------------------------

def _timed(fn, min_seconds=0.3, min_reps=3, max_reps=200):
    """The slowest rank's median time of ``fn``; every rank runs it equally often."""
    import plugtorch.distributed as dist

    def once():
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def slowest(value):
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, value)
        return max(everyone)

    first = slowest(once())  # the number of repetitions must be the same on every rank
    reps = int(min(max_reps, max(min_reps, min_seconds / max(first, 1e-9))))
    return slowest(float(np.median([once() for _ in range(reps)])))


def sweep():
    from mpi4py import MPI

    import plugtorch
    import plugtorch.distributed as dist
    comm = MPI.COMM_WORLD
    rows = []
    for kb in SIZES_KB:
        numel = kb * 256
        flat = plugtorch.zeros(numel)
        array = np.zeros(numel, dtype=np.float32)
        rows.append({"bytes": numel * 4,
                     "plugtorch": _timed(lambda: dist.all_reduce(flat, async_op=True).wait()),
                     "mpi4py": _timed(lambda: comm.Allreduce(MPI.IN_PLACE, array, MPI.SUM))})
    return rows


def hooks():
    import plugtorch
    import plugtorch.distributed as dist
    from plugtorch.distributed.algorithms.ddp_comm_hooks import default_hooks
    flat = plugtorch.randn(25 * 2**18)  # 25 MB of float32

    def run(name):
        hook = default_hooks.allreduce_hook if name == "none" else getattr(default_hooks, name)
        bucket = dist.GradBucket(0, flat, [flat], [flat], True)
        return lambda: hook(None, bucket).wait()
    return {name: _timed(run(name), min_seconds=1.0) for name in HOOKS}


def build(name):
    from plugtorch import nn
    if name == "cnn":
        from plugtorch.apps.train import CNN
        return CNN(dropout=0.0)
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1024))


def train(name, hook, steps):
    import plugtorch
    import plugtorch.distributed as dist
    import plugtorch.optim
    from plugtorch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from plugtorch.nn.parallel import DistributedDataParallel

    plugtorch.manual_seed(0)
    model = build(name)
    batch = MODELS[name]
    x = plugtorch.randn(batch, 1, 28, 28) if name == "cnn" else plugtorch.randn(batch, 1024)
    target = plugtorch.randint(0, 10, (batch,)) if name == "cnn" else plugtorch.randn(batch, 1024)
    loss_fn = plugtorch.nn.CrossEntropyLoss() if name == "cnn" else plugtorch.nn.MSELoss()
    net, launched = model, []
    if hook != "local":
        net = DistributedDataParallel(model)
        chosen = default_hooks.allreduce_hook if hook == "none" else getattr(default_hooks, hook)

        def stamped(state, bucket):  # when backward hands each bucket over
            launched.append((bucket.index(), bucket.buffer().numel() * 4, time.perf_counter()))
            return chosen(state, bucket)
        net.register_comm_hook(None, stamped)
    opt = plugtorch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    rows = []
    for step in range(steps + 2):
        dist.barrier()
        launched.clear()
        t0 = time.perf_counter()
        loss = loss_fn(net(x), target)
        t1 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if step >= 2:  # warm-up
            rows.append({"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2, "step": t3 - t0,
                         "buckets": [(i, nbytes, t - t1) for i, nbytes, t in launched]})
    best = min(rows, key=lambda r: r["step"])  # the step least disturbed by other load
    med = {k: float(np.median([r[k] for r in rows])) for k in ("forward", "backward", "optimizer", "step")}
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, med)
    med = {k: max(m[k] for m in everyone) for k in med}
    return {**med, "buckets": best["buckets"], "params": sum(p.numel() for p in model.parameters()),
            "batch": batch}


def worker(args):
    import plugtorch.distributed as dist
    dist.init()
    if args.worker == "sweep":
        result = sweep()
    elif args.worker == "hooks":
        result = hooks()
    else:
        result = train(args.model, args.hook, args.steps)
    if dist.get_rank() == 0:
        print(json.dumps(result))


# -- the driver -----------------------------------------------------------------------------

def driver(args):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    results = {"load_average_start": os.getloadavg()[0], "links": {}}
    for rate in args.rates.split(","):
        cluster = None
        if rate != "memory":
            from plugtorch.distributed.netns import Cluster
            cluster = Cluster(hosts=2, rate=None if rate == "none" else rate).__enter__()
        try:
            def run(*worker_args):
                tail = [sys.executable, os.path.abspath(__file__), "--worker", *map(str, worker_args)]
                cmd = [shutil.which("mpiexec"), "-n", "2", *tail] if cluster is None else cluster.mpiexec(tail)
                before = cluster.tx_bytes() if cluster else [0, 0]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
                if out.returncode:
                    sys.exit(f"{' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
                wire = sum(cluster.tx_bytes()) - sum(before) if cluster else None
                return json.loads(out.stdout.strip().splitlines()[-1]), wire

            link = {"load_average": os.getloadavg()[0], "sweep": run("sweep")[0]}
            link["hooks"], _ = run("hooks")
            link["hook_bytes"] = {}
            for hook in HOOKS:  # the bytes on the wire, per training step of the 25M model
                _, few = run("train", "--model", "mlp25m", "--hook", hook, "--steps", 1)
                _, more = run("train", "--model", "mlp25m", "--hook", hook, "--steps", 3)
                link["hook_bytes"][hook] = None if few is None else (more - few) / 2
            link["train"] = {}
            for model in MODELS:
                link["train"][model] = {hook: run("train", "--model", model, "--hook", hook,
                                                  "--steps", args.steps)[0] for hook in ("local",) + HOOKS}
            results["links"][rate] = link
        finally:
            if cluster is not None:
                cluster.close()
        report(rate, results["links"][rate])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


def report(rate, link):
    print(f"\n== link: {rate} (2 {'ranks on one host' if rate == 'memory' else 'hosts, one rank each'}); "
          f"load average {link['load_average']:.2f}")
    print(f"{'size':>9} {'plugtorch ms':>13} {'mpi4py ms':>10} {'plugtorch busbw MB/s':>21} {'mpi4py busbw MB/s':>18}")
    for row in link["sweep"]:  # 2 ranks: busbw = algbw * 2(n-1)/n = algbw
        mb = row["bytes"] / 2**20
        print(f"{mb:8.3g}M {1e3 * row['plugtorch']:13.3f} {1e3 * row['mpi4py']:10.3f} "
              f"{mb / row['plugtorch']:21.0f} {mb / row['mpi4py']:18.0f}")
    print(f"{'25 MB bucket':>20} {'ms':>8} {'vs none':>8} {'wire MB/step (25M model)':>25}")
    for hook in HOOKS:
        wire = link["hook_bytes"][hook]
        print(f"{hook:>20} {1e3 * link['hooks'][hook]:8.1f} {link['hooks'][hook] / link['hooks']['none']:8.2f} "
              f"{'-' if wire is None else f'{wire / 2**20:.1f}':>25}")
    print(f"{'model':>8} {'hook':>20} {'step ms':>8} {'fwd':>6} {'bwd':>6} {'opt':>5} {'samples/s':>10} "
          f"{'efficiency':>11}")
    for model, runs in link["train"].items():
        for hook, r in runs.items():
            print(f"{model:>8} {hook:>20} {1e3 * r['step']:8.1f} {1e3 * r['forward']:6.1f} "
                  f"{1e3 * r['backward']:6.1f} {1e3 * r['optimizer']:5.1f} {2 * r['batch'] / r['step']:10.0f} "
                  f"{runs['local']['step'] / r['step']:11.0%}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("sweep", "hooks", "train"))
    parser.add_argument("--model", choices=tuple(MODELS), default="cnn")
    parser.add_argument("--hook", default="local", help="local (no DDP), none (DDP, default reduction) or a hook")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rates", default="memory,10gbit,1gbit",
                        help="links to measure: memory, none (unshaped veth), or a tc rate such as 1gbit")
    parser.add_argument("--out", help="write every measurement here as JSON")
    args = parser.parse_args()
    worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    main()
