"""``plugtorch train``'s MLP recipe (5 epochs, full MNIST) with a DDP communication hook.

Usage: train_with_hook.py HOOK DATA_DIR. Rank 0 prints the metrics as JSON, with the
bytes this rank all-reduced per step relative to float32 gradients.
"""
import json
import sys

import plugtorch.distributed as dist
from plugtorch.apps.train import TrainConfig, Trainer
from plugtorch.distributed.algorithms.ddp_comm_hooks import default_hooks

hook, data_dir = sys.argv[1], sys.argv[2]
trainer = Trainer(TrainConfig(model="mlp", data_dir=data_dir, download=False, quiet=True))
trainer.net.register_comm_hook(None, getattr(default_hooks, hook))
pg = dist.group.WORLD
before = pg.bytes_reduced
metrics = trainer.run()
steps = metrics["epochs"] * len(trainer.train_loader)
float32_bytes = 4 * sum(p.numel() for p in trainer.model.parameters())
# besides the gradients, a few float64 metric sums per epoch: a few bytes in a million
metrics["bytes_ratio"] = (pg.bytes_reduced - before) / (steps * float32_bytes)
if dist.get_rank() == 0:
    print(json.dumps({k: v for k, v in metrics.items() if k != "history"}))
