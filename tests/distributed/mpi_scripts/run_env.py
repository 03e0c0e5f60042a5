"""Writes, as argv[1]/rank-N.json, the torchrun variables this worker was given, its argv and
__name__ (files, not stdout: the launcher may interleave the ranks' long lines)."""
import json
import os
import sys

import plugtorch.distributed as dist

KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
        "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID")
with open(os.path.join(sys.argv[1], f"rank-{os.environ['RANK']}.json"), "w") as f:
    json.dump({"argv": sys.argv[2:], "main": __name__, "launched": dist.is_torchelastic_launched(),
               **{k: os.environ.get(k) for k in KEYS}}, f)
