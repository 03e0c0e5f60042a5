"""Per-rank memory and step time of a large minGPT under DDP and under FSDP (``fully_shard``).

    python benchmarks/fsdp_memory.py                      # 4 ranks: DDP vs FSDP, a table
    python benchmarks/fsdp_memory.py --cap-mb 1500        # + one process vs 4 FSDP ranks under a cap

The model is benchmarks/models.py's minGPT (``--d 768 --layers 12 --vocab 50304``: 162M
parameters, dropout off), trained with AdamW on a synthetic batch of ``--batch`` sequences of
``--block`` tokens per rank. FSDP wraps each block, the token embedding and the output head,
then the root. Memory is each rank's peak resident set *while training* (the kernel's peak
counter is reset after the model is built and wrapped, as building it whole on every rank is
an artefact of having no meta device; that build peak is shown too). Step time is the median
of ``--steps`` steps after one warm-up step.

``--cap-mb N`` limits each process's address space (``RLIMIT_AS``) to what it has mapped after
start-up plus N MiB, then trains one step with one plain process (no sharding) and with 4 FSDP
ranks: the cap is chosen so that the first runs out of memory and the second does not.
Kept out of the test suite: it needs several GB and minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def _status(field: str) -> int:
    """A /proc/self/status field in KiB (VmHWM: peak resident set, VmSize: address space)."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> None:
    pathlib.Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def worker(args) -> None:
    sys.path.insert(0, str(HERE))
    import models

    import plugtorch
    import plugtorch.distributed as dist
    from plugtorch.distributed.fsdp import fully_shard
    from plugtorch.nn.parallel import DistributedDataParallel

    dist.init()
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.cap_mb:
        cap = _status("VmSize") * 1024 + args.cap_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    result = {"mode": args.mode, "rank": rank, "world": world}
    phase = "building the model"
    try:
        model, x, y, loss_fn = models.gpt(plugtorch, batch=args.batch, block=args.block, vocab=args.vocab,
                                          d=args.d, heads=args.heads, layers=args.layers)
        model.eval()  # dropout off; the graph and memory are training's
        result["params"] = sum(p.numel() for p in model.parameters())
        if args.mode == "fsdp":
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model.tok)
            fully_shard(model.head)
            fully_shard(model)
            net = model
        elif args.mode == "ddp":
            net = DistributedDataParallel(model)
        else:
            net = model
        opt = plugtorch.optim.AdamW(net.parameters(), lr=1e-4)
        result["build_peak_mib"] = _status("VmHWM") / 1024
        _reset_peak()
        times = []
        for step in range(args.steps + 1):
            phase = f"training step {step}"
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            loss.item()
            times.append(time.perf_counter() - t0)
        result["train_peak_mib"] = _status("VmHWM") / 1024
        result["step_s"] = statistics.median(times[1:]) if len(times) > 1 else times[0]
        result["loss"] = loss.item()
    except MemoryError:
        result["error"] = f"MemoryError while {phase}"
    print("RESULT " + json.dumps(result), flush=True)
    if "error" in result and world > 1:
        dist.abort(3)  # the others would wait in their next collective


def launch(args, mode: str, ranks: int, extra: list[str]) -> list[dict]:
    cmd = [sys.executable, __file__, "--worker", "--mode", mode, *extra]
    if ranks:
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(ranks)] + cmd
    env = dict(os.environ)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    # ranks' lines may interleave; each result is one flat JSON object
    results = [json.loads(m) for m in re.findall(r"RESULT (\{[^{}]*\})", proc.stdout)]
    if not results:
        results = [{"mode": mode, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}]
    return results


def _row(label: str, results: list[dict]) -> str:
    if any("error" in r for r in results):
        return f"| {label} | {next(r['error'] for r in results if 'error' in r)} | | | |"
    peak = max(r["train_peak_mib"] for r in results)
    build = max(r["build_peak_mib"] for r in results)
    step = max(r["step_s"] for r in results)
    return f"| {label} | {peak:,.0f} | {build:,.0f} | {step:.2f} | {results[0]['loss']:.4f} |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=["ddp", "fsdp", "single"], default="fsdp")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--batch", type=int, default=1, help="sequences per rank")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--cap-mb", type=int, default=0)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    extra = [f"--{k}={getattr(args, k)}" for k in ("d", "layers", "heads", "vocab", "block", "batch", "steps")]
    print("| run | peak RSS while training, MiB/rank | peak while building | step, s | loss |")
    print("|---|---:|---:|---:|---:|")
    if args.cap_mb:
        capped = extra + [f"--cap-mb={args.cap_mb}", "--steps=1"]
        print(_row("1 process, no sharding, no cap", launch(args, "single", 0, extra[:-1] + ["--steps=1"])),
              flush=True)
        print(_row(f"1 process, no sharding, cap {args.cap_mb} MiB", launch(args, "single", 0, capped)), flush=True)
        print(_row(f"FSDP, {args.ranks} ranks, cap {args.cap_mb} MiB", launch(args, "fsdp", args.ranks, capped)),
              flush=True)
        return
    ddp = launch(args, "ddp", args.ranks, extra)
    print(_row(f"DDP, {args.ranks} ranks", ddp), flush=True)
    fsdp = launch(args, "fsdp", args.ranks, extra)
    print(_row(f"FSDP, {args.ranks} ranks", fsdp), flush=True)
    if not any("error" in r for r in ddp + fsdp):
        ratio = max(r["train_peak_mib"] for r in fsdp) / max(r["train_peak_mib"] for r in ddp)
        print(f"\nFSDP / DDP peak memory per rank while training: {ratio:.2f}; "
              f"{ddp[0]['params'] / 1e6:.0f}M parameters")


if __name__ == "__main__":
    main()
