"""The bytes each DDP communication hook puts on this host's network link.

Usage: wire_bytes.py STEPS. Run with one rank per network-namespace host: each rank reads
its link's transmit counter (the host's one interface besides lo) around STEPS steps of a
1M-parameter model with each hook, and rank 0 prints, as JSON, the bytes all hosts sent.
"""
import json
import os
import sys

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.distributed.algorithms.ddp_comm_hooks import default_hooks
from plugtorch.nn.parallel import DistributedDataParallel

steps = int(sys.argv[1])
dist.init()
link = next(name for name in os.listdir("/sys/class/net") if name != "lo")


def sent() -> int:
    with open(f"/sys/class/net/{link}/statistics/tx_bytes") as f:
        return int(f.read())


result = {}
for hook in ("none", "fp16_compress_hook", "bf16_compress_hook"):
    plugtorch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(1000, 1000), nn.ReLU(), nn.Linear(1000, 10)))
    if hook != "none":
        model.register_comm_hook(None, getattr(default_hooks, hook))
    x = plugtorch.randn(8, 1000)
    dist.barrier()
    before = sent()
    for _ in range(steps):
        model.zero_grad()
        model(x).pow(2).mean().backward()
    dist.barrier()
    mine = sent() - before
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    result[hook] = sum(everyone)
if dist.get_rank() == 0:
    print(json.dumps(result))
