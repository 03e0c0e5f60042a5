"""Rank 1 stalls before an all_reduce on the first attempt only: the watchdog aborts that job,
and the launcher's restart must then complete."""
import os
import time

import plugtorch
import plugtorch.distributed as dist

dist.init_process_group("gloo", init_method="env://", timeout=2)
if dist.get_rank() == 1 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    time.sleep(30)
t = plugtorch.ones(2)
dist.all_reduce(t)
assert t.tolist() == [2.0, 2.0], t
print(f"all_reduce ok on rank {dist.get_rank()}", flush=True)
