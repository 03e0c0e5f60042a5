"""A rank dies around a checkpoint of a 2-rank ``plugtorch train`` run.

Usage: checkpoint_crash.py MODE CHECKPOINT DATA_DIR
  after   rank 1 is killed (SIGKILL) right after the epoch-2 checkpoint is written
  during  rank 0 is killed while writing the epoch-2 checkpoint (its bytes written,
          not yet renamed into place)
Before each checkpoint rank 0 prints a digest of the parameters it saves, so the
test can check the file against what was written.
"""
import hashlib
import os
import signal
import sys

import plugtorch.utils.atomic
from plugtorch.apps.train import TrainConfig, Trainer

mode, path, data_dir = sys.argv[1:4]


def digest(state) -> str:
    h = hashlib.sha256()
    for name, t in sorted(state.items()):
        h.update(name.encode() + t.numpy().tobytes())
    return h.hexdigest()


class Crashing(Trainer):
    def save_checkpoint(self, epochs_done: int) -> None:
        if self.world.is_main:
            print(f"epoch {epochs_done} digest {digest(self.model.state_dict())}", flush=True)
            if mode == "during" and epochs_done == 2:
                def die(fd):
                    os.kill(os.getpid(), signal.SIGKILL)
                plugtorch.utils.atomic.os.fsync = die  # the bytes are written; the rename never comes
        super().save_checkpoint(epochs_done)
        self.world.barrier()  # every rank knows the checkpoint is on disk
        if mode == "after" and epochs_done == 2 and self.world.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)


cfg = TrainConfig(model="mlp", epochs=3, batch_size=64, optimizer="sgd", lr=0.05, lr_schedule="constant",
                  limit_train=512, limit_test=100, checkpoint=path, data_dir=data_dir, download=False, quiet=True)
Crashing(cfg).run()
print("the run outlived the crash", flush=True)
