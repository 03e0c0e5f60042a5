"""BLAS threads per rank (rank 0 prints JSON: each rank's pool size, as the library reports it).

Usage: threads.py [SET_NUM_THREADS]. With SET_NUM_THREADS, the script calls
plugtorch.set_num_threads(N) before joining the world, as a user who chooses would.
"""
import json
import sys

import plugtorch
import plugtorch.distributed as dist

if len(sys.argv) > 1:
    plugtorch.set_num_threads(int(sys.argv[1]))
dist.init()
threads = [None] * dist.get_world_size()
dist.all_gather_object(threads, plugtorch.get_num_threads())
if dist.get_rank() == 0:
    print(json.dumps({"threads": threads}))
