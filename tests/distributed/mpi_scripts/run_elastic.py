"""The ddp-tutorial-series multigpu_torchrun.py pattern: snapshot every epoch, resume from it.

argv: snapshot path, output .npz path, the epoch at which rank 1 dies (os._exit) on the first
attempt (-1: never). A restarted job resumes from the last snapshot; its final parameters
must equal those of a run that was never interrupted.
"""
import os
import sys

import numpy as np

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.nn.parallel import DistributedDataParallel as DDP

snapshot_path, out, die_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
EPOCHS, STEPS = 4, 3
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
plugtorch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = plugtorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
epochs_run = 0
if os.path.exists(snapshot_path):
    snap = plugtorch.load(snapshot_path)
    model.load_state_dict(snap["MODEL_STATE"])
    opt.load_state_dict(snap["OPTIMIZER_STATE"])
    epochs_run = snap["EPOCHS_RUN"]
ddp = DDP(model)
gen = np.random.default_rng(rank)
data = [(plugtorch.from_numpy(gen.standard_normal((5, 4)).astype(np.float32)),
         plugtorch.from_numpy(gen.standard_normal((5, 1)).astype(np.float32))) for _ in range(STEPS)]
for epoch in range(epochs_run, EPOCHS):
    for step, (x, y) in enumerate(data):
        if epoch == die_at and step == 1 and rank == 1 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
            os._exit(1)  # mid-epoch, mid-job: a crash, with no cleanup
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    if rank == 0:
        plugtorch.save({"MODEL_STATE": model.state_dict(), "OPTIMIZER_STATE": opt.state_dict(),
                        "EPOCHS_RUN": epoch + 1}, snapshot_path + ".tmp")
        os.replace(snapshot_path + ".tmp", snapshot_path)
    dist.barrier()  # nobody starts the next epoch before the snapshot of this one is whole
if rank == 0:
    np.savez(out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
print(f"training ok on rank {rank} restart {os.environ['TORCHELASTIC_RESTART_COUNT']}", flush=True)
dist.destroy_process_group()
