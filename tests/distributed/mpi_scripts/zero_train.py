"""ZeroRedundancyOptimizer + DDP against one process's AdamW on the same global batch.

Every rank also trains a plain AdamW reference on the whole batch (cheap at this size), so
each rank checks itself: parameters after 20 steps, the sharding of optimizer state, the
consolidated state dict, load_state_dict into a fresh optimizer, and add_param_group.
The 20-step comparison runs with and without parameters_as_bucket_view.
"""
import copy

import numpy as np

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.distributed.algorithms.join import Join
from plugtorch.distributed.optim import ZeroRedundancyOptimizer
from plugtorch.nn.parallel import DistributedDataParallel

dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
X = plugtorch.from_numpy(rng.standard_normal((24, 6)))
Y = plugtorch.from_numpy(rng.standard_normal((24, 3)))
local = slice(rank * 24 // world, (rank + 1) * 24 // world)

HP = dict(lr=0.02, betas=(0.8, 0.99), weight_decay=0.1)


def setup(bucket):
    plugtorch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 7), nn.Tanh(), nn.Linear(7, 3)).double()
    ref = copy.deepcopy(model)
    zero = ZeroRedundancyOptimizer(model.parameters(), plugtorch.optim.AdamW, parameters_as_bucket_view=bucket,
                                   **HP)
    return model, DistributedDataParallel(model), zero, ref, plugtorch.optim.AdamW(ref.parameters(), **HP)


def train(steps, *pairs):
    for _ in range(steps):
        for net, opt, part in pairs:
            opt.zero_grad()
            nn.functional.mse_loss(net(X[part]), Y[part]).backward()
            opt.step()


def assert_same(a, b, what, tol=1e-6):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        err = float((p.detach() - q.detach()).abs().max())
        assert err < tol, f"{what}: {name} differs by {err} on rank {rank} of {world}"


model, ddp, zero, ref, ref_opt = setup(bucket=True)
train(20, (ddp, zero, local), (ref, ref_opt, slice(None)))
assert_same(model, ref, "after 20 steps with parameters_as_bucket_view")
model, ddp, zero, ref, ref_opt = setup(bucket=False)
train(20, (ddp, zero, local), (ref, ref_opt, slice(None)))
assert_same(model, ref, "after 20 steps")

# each rank holds state only for its partition, and the partitions cover every parameter once
params = list(model.parameters())
index = {id(p): i for i, p in enumerate(params)}
owned = sorted(index[id(p)] for p in zero.optim.state)
everyone = [None] * world
dist.all_gather_object(everyone, owned)
assert sorted(i for o in everyone for i in o) == list(range(len(params))), everyone
sizes = [sum(params[i].numel() for i in o) for o in everyone]
assert max(sizes) - min(sizes) <= max(p.numel() for p in params), sizes  # greedy balance

# consolidated state dict == the reference's; other ranks cannot read it
to = world - 1
zero.consolidate_state_dict(to=to)
if rank == to:
    sd, want = zero.state_dict(), ref_opt.state_dict()
    assert sorted(sd["state"]) == sorted(want["state"]) == list(range(len(params)))
    for i, s in want["state"].items():
        for k, v in s.items():
            got = sd["state"][i][k]
            err = float((plugtorch.as_tensor(got) - plugtorch.as_tensor(v)).abs().max())
            assert err < 1e-6, (i, k, err)
    assert sd["param_groups"][0]["lr"] == HP["lr"] and sd["param_groups"][0]["params"] == list(range(len(params)))
else:
    try:
        zero.state_dict()
        raise AssertionError("state_dict() on a rank it was not consolidated to did not raise")
    except RuntimeError as e:
        assert f"consolidate_state_dict(to={rank})" in str(e), e
    sd = None
box = [sd]
dist.broadcast_object_list(box, src=to)

# a fresh model and optimizer loaded from it continue exactly as the reference does
model2 = copy.deepcopy(model)
ddp2 = DistributedDataParallel(model2)
zero2 = ZeroRedundancyOptimizer(model2.parameters(), plugtorch.optim.AdamW, lr=1.0)
zero2.load_state_dict(box[0])
assert zero2.param_groups[0]["lr"] == HP["lr"] and zero2.optim.param_groups[0]["lr"] == HP["lr"]
index2 = {id(p): i for i, p in enumerate(model2.parameters())}
assert sorted(index2[id(p)] for p in zero2.optim.state) == owned
train(5, (ddp2, zero2, local), (ref, ref_opt, slice(None)))
assert_same(model2, ref, "after loading the consolidated state and 5 more steps")

# a group added later (all ranks) trains as the reference's added group does
plugtorch.manual_seed(1)
net = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).double()
ref_net = copy.deepcopy(net)
ref_net_opt = plugtorch.optim.AdamW(ref_net[0].parameters(), lr=0.05)
ddp3 = DistributedDataParallel(net)
zero3 = ZeroRedundancyOptimizer(net[0].parameters(), plugtorch.optim.AdamW, lr=0.05)
train(3, (ddp3, zero3, local), (ref_net, ref_net_opt, slice(None)))
zero3.add_param_group({"params": list(net[2].parameters()), "lr": 0.01})
ref_net_opt.add_param_group({"params": list(ref_net[2].parameters()), "lr": 0.01})
train(4, (ddp3, zero3, local), (ref_net, ref_net_opt, slice(None)))
assert_same(net, ref_net, "after add_param_group")
assert [g["lr"] for g in zero3.param_groups] == [0.05, 0.01]
# uneven inputs: under Join a rank out of batches still steps (and broadcasts) its partition
model, ddp, zero, ref, ref_opt = setup(bucket=False)
with Join([ddp, zero]):
    train(2 + rank, (ddp, zero, local))
final = [None] * world
dist.all_gather_object(final, [p.tolist() for p in model.parameters()])
assert all(f == final[0] for f in final), "ranks disagree after training under Join"
assert final[0] != [p.tolist() for p in ref.parameters()], "nothing was trained"
print(f"zero ok on rank {rank}", flush=True)
