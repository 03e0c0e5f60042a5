"""A ZeroRedundancyOptimizer + DDP run checkpointed with plugtorch.distributed.checkpoint and
resumed on another number of ranks: the optimizer state each rank owns is written by it, and
read back by whichever rank owns that parameter in the new partition.

Usage: dcp_zero.py save DIR   (5 steps, then save)
       dcp_zero.py resume DIR (load, 5 more steps, compare with one process's 10 AdamW steps)
"""
import copy
import sys

import numpy as np

import plugtorch
import plugtorch.distributed as dist
import plugtorch.distributed.checkpoint as dcp
from plugtorch import nn
from plugtorch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from plugtorch.distributed.optim import ZeroRedundancyOptimizer
from plugtorch.nn.parallel import DistributedDataParallel

mode, path = sys.argv[1:3]
dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
X, Y = plugtorch.from_numpy(rng.standard_normal((24, 6))), plugtorch.from_numpy(rng.standard_normal((24, 3)))
local = slice(rank * 24 // world, (rank + 1) * 24 // world)
HP = dict(lr=0.02, weight_decay=0.1)

plugtorch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 7), nn.Tanh(), nn.Linear(7, 3)).double()
ref = copy.deepcopy(model)
ref_opt = plugtorch.optim.AdamW(ref.parameters(), **HP)
ddp = DistributedDataParallel(model)
zero = ZeroRedundancyOptimizer(model.parameters(), plugtorch.optim.AdamW, **HP)


def train(steps, net, opt, part):
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(net(X[part]), Y[part]).backward()
        opt.step()


if mode == "save":
    train(5, ddp, zero, local)
    msd, osd = get_state_dict(ddp, zero)
    assert set(msd) == {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}, list(msd)
    assert len(osd["state"]) == len(zero.optim.state) < 6  # this rank's partition only
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
else:
    msd, osd = get_state_dict(ddp, zero)  # the new partition's keys, with tensors to load into
    dcp.load({"model": msd, "optim": osd}, checkpoint_id=path)
    set_state_dict(ddp, zero, model_state_dict=msd, optim_state_dict=osd)
    train(5, ddp, zero, local)
    train(10, ref, ref_opt, slice(None))
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        err = float((p - q).abs().max())
        assert err < 1e-6, f"{name} differs by {err} from one process after resuming on {world} ranks"
print(f"dcp zero {mode} ok on rank {rank}", flush=True)
