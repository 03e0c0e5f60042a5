"""A 2x2 DeviceMesh ("dp", "tp") on 4 ranks: groups, coordinates, slicing, an all_reduce along
each dimension, and DDP on each "dp" group (ranks {0, 2} and {1, 3}: the second group's first
global rank is 1) training an independent model against one process on that group's batch.
MESH_DEVICE=cuda puts the tensors on the CuPy backend.
"""
import copy
import os

import numpy as np

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.distributed.device_mesh import DeviceMesh, init_device_mesh
from plugtorch.nn.parallel import DistributedDataParallel

device = os.environ.get("MESH_DEVICE", "cpu")
mesh = init_device_mesh(device, (2, 2), mesh_dim_names=("dp", "tp"))
rank = dist.get_rank()
assert dist.get_world_size() == 4, "run on 4 ranks"
row, col = divmod(rank, 2)
assert mesh.get_coordinate() == (row, col), mesh.get_coordinate()
assert mesh.shape == (2, 2) and mesh.ndim == 2 and mesh.size() == 4 and mesh.size(1) == 2
assert mesh.mesh.tolist() == [[0, 1], [2, 3]] and mesh.get_rank() == rank
assert mesh.get_local_rank("dp") == row and mesh.get_local_rank(1) == col
assert dist.get_process_group_ranks(mesh.get_group("dp")) == [col, col + 2]
assert dist.get_process_group_ranks(mesh.get_group("tp")) == [2 * row, 2 * row + 1]
assert repr(mesh) == "DeviceMesh((dp=2, tp=2), 'cpu', stride=(2, 1))".replace("cpu", device), repr(mesh)

# an all_reduce along each dimension sums exactly that dimension's ranks
for dim, peers in (("dp", [col, col + 2]), ("tp", [2 * row, 2 * row + 1])):
    t = plugtorch.full((3,), 10.0 ** rank, device=device)
    dist.all_reduce(t, group=mesh.get_group(dim))
    assert t.tolist() == [float(sum(10 ** r for r in peers))] * 3, (dim, t.tolist())

# slicing: the line through this rank, reusing the parent's group
dp = mesh["dp"]
assert dp.mesh.tolist() == [col, col + 2] and dp.mesh_dim_names == ("dp",) and dp.get_group() is mesh.get_group("dp")
assert dp.get_local_rank() == row and dp.get_coordinate() == (row,)
swapped = mesh["tp", "dp"]
assert swapped.mesh.tolist() == [[0, 2], [1, 3]] and swapped.get_group("tp") is mesh.get_group("tp")
assert mesh["dp", "tp"] is mesh
for bad, exc in ((lambda: mesh["pp"], KeyError), (lambda: mesh["dp", "dp"], RuntimeError),
                 (lambda: mesh.get_group(), RuntimeError)):
    try:
        bad()
        raise AssertionError("no error")
    except exc:
        pass

# a mesh over a subset of the world: ranks left out have no coordinate
sub = DeviceMesh(device, [[3, 1]], mesh_dim_names=("a", "b"))
assert sub.get_coordinate() == ({3: (0, 0), 1: (0, 1)}.get(rank))
if rank in (1, 3):
    assert dist.get_process_group_ranks(sub.get_group("b")) == [3, 1] and sub.get_local_rank("b") == (rank == 1)

# DDP on each dp group: models start from the group's first global rank (0 or 1), different per group
plugtorch.manual_seed(100 + rank)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).double()
start = [None] * 4
dist.all_gather_object(start, [p.tolist() for p in model.parameters()])
ddp = DistributedDataParallel(model, process_group=mesh.get_group("dp"))
first = col  # the dp group's first global rank
assert [p.tolist() for p in model.parameters()] == start[first], "DDP did not take the group's first rank's model"
ref = copy.deepcopy(model)
rng = np.random.default_rng(col)  # each group trains on its own data
X, Y = plugtorch.from_numpy(rng.standard_normal((8, 4))), plugtorch.from_numpy(rng.standard_normal((8, 2)))
opt = plugtorch.optim.SGD(model.parameters(), lr=0.1)
ref_opt = plugtorch.optim.SGD(ref.parameters(), lr=0.1)
for _ in range(5):
    for net, o, part in ((ddp, opt, slice(4 * row, 4 * row + 4)), (ref, ref_opt, slice(None))):
        o.zero_grad()
        nn.functional.mse_loss(net(X[part]), Y[part]).backward()
        o.step()
for p, q in zip(model.parameters(), ref.parameters()):
    assert float((p - q).abs().max()) < 1e-12, "DDP on a subgroup differs from one process"
final = [None] * 4
dist.all_gather_object(final, [p.tolist() for p in model.parameters()])
assert final[col] == final[col + 2] and final[0] != final[1], "groups must train independently"
print(f"mesh ok on rank {rank}", flush=True)
