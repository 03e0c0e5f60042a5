"""Prints, as one JSON line per rank, the torchrun variables this worker was given."""
import json
import os
import sys

import plugtorch.distributed as dist

KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
        "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID")
print(json.dumps({"argv": sys.argv[1:], "main": __name__, "launched": dist.is_torchelastic_launched(),
                  **{k: os.environ.get(k) for k in KEYS}}), flush=True)
