"""plugtorch.distributed.checkpoint on any number of ranks: tensors split along dim 0 as
ZeRO/FSDP keep them (Shard, uneven, some ranks empty), replicated tensors, a tensor only one
rank holds, and plain values.

Usage: dcp_shards.py MODE DIR
  save           save version 1 then version 2 into DIR (the second replaces the first)
  load VERSION   load DIR on this world size (1 process too) and check it is VERSION, reading
                 only this rank's byte ranges
  crash-data     save version 1, then start version 2 and kill rank 1 once its data is on disk
  crash-commit   save version 1, then start version 2 and kill rank 0 while it writes .metadata
"""
import os
import signal
import sys
import warnings

import numpy as np

import plugtorch
import plugtorch.distributed as dist
import plugtorch.distributed.checkpoint as dcp

mode, path = sys.argv[1], sys.argv[2]
warnings.filterwarnings("ignore", "torch.distributed is disabled")
if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
    dist.init()
rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
ROWS, INTS = 10, 5  # 5 over 4 ranks: 2, 2, 1, 0 (an empty piece)


def rows_of(n, r, w):
    """torch.chunk's split along dim 0 (what FSDP uses): ceil(n / w) rows each, the tail shorter or empty."""
    step = -(-n // w)
    return min(r * step, n), min((r + 1) * step, n)


def whole(version):
    return {"big": np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3) * version,
            "ints": np.arange(INTS, dtype=np.int64) + 100 * version,
            "rep": np.full((2, 2), 0.5 * version, dtype=np.float64),
            "solo": np.array([version, -version], dtype=np.float32)}


def state(version, empty=False):
    w = whole(version)
    make = (lambda a: plugtorch.zeros(*a.shape, dtype=plugtorch.from_numpy(a).dtype)) if empty else \
        (lambda a: plugtorch.from_numpy(a.copy()))
    a, b = rows_of(ROWS, rank, world)
    c, d = rows_of(INTS, rank, world)
    sd = {"model": {"big": dcp.Shard(make(w["big"][a:b]), a, (ROWS, 3)), "rep": make(w["rep"]),
                    "scalar": plugtorch.tensor(0.0 if empty else float(version))},
          "optim": {"ints": dcp.Shard(make(w["ints"][c:d]), (c,), (INTS,)),
                    "param_groups": [{"lr": None if empty else 0.1 * version,
                                      "betas": None if empty else (0.9, 0.99)}]},
          "step": None if empty else version}
    if rank == world - 1 or empty:
        sd["solo"] = make(w["solo"])
    return sd, (b - a) * 3 * 4 + (d - c) * 8 + 4 * 8 + 4 + 2 * 4


def save(version):
    sd, _ = state(version)
    return dcp.save(sd, checkpoint_id=path)


if mode == "save":
    save(1)
    md = save(2)
    files = sorted(f for f in os.listdir(path) if f.endswith(".distcp"))
    assert files == sorted(f"__{r}_{md.token}.distcp" for r in range(world)), files
elif mode == "load":
    version = int(sys.argv[3])
    sd, expected_bytes = state(version, empty=True)
    reader = dcp.FileSystemReader(path)
    dcp.load(sd, storage_reader=reader)
    want, _ = state(version)
    for key in ("big", "rep", "scalar"):
        got, ref = sd["model"][key], want["model"][key]
        got, ref = (got.tensor, ref.tensor) if isinstance(got, dcp.Shard) else (got, ref)
        assert got.tolist() == ref.tolist(), (key, got.tolist(), ref.tolist())
    assert sd["optim"]["ints"].tensor.tolist() == want["optim"]["ints"].tensor.tolist()
    assert sd["optim"]["ints"].tensor.dtype is plugtorch.int64
    assert sd["optim"]["param_groups"] == want["optim"]["param_groups"] and sd["step"] == version
    assert sd["solo"].tolist() == whole(version)["solo"].tolist()
    assert reader.bytes_read == expected_bytes, (reader.bytes_read, expected_bytes)
elif mode.startswith("crash"):
    save(1)
    def die(*args):
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "crash-data" and rank == 1:
        write = dcp.FileSystemWriter.write_data
        def write_then_die(self, *args):
            write(self, *args)
            die()
        dcp.FileSystemWriter.write_data = write_then_die
    if mode == "crash-commit" and rank == 0:
        commit = dcp.FileSystemWriter.commit
        def commit_and_die(self, md):
            os.fsync = die  # the temporary .metadata is written; its rename never comes
            commit(self, md)
        dcp.FileSystemWriter.commit = commit_and_die
    save(2)
    raise AssertionError("the save outlived the crash")
print(f"dcp {mode} ok on rank {rank}", flush=True)
