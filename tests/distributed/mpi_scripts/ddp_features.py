"""DistributedDataParallel's behaviours under MPI, checked on every rank (run with 2+ ranks)."""
import numpy as np

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.nn.parallel import DistributedDataParallel as DDP
from plugtorch.utils.data.distributed import DistributedSampler

dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
assert world >= 2


def data(r, n=6, features=8, seed=0):
    g = np.random.default_rng(seed * 100 + r)
    return plugtorch.from_numpy(g.standard_normal((n, features)).astype(np.float32))


def gathered(t):
    everyone = [None] * world
    dist.all_gather_object(everyone, t.detach().numpy())
    return everyone


def mlp(sizes=(8, 16, 16, 16, 4)):
    plugtorch.manual_seed(10 + rank)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


def reference_copy(model):
    ref = mlp()
    ref.load_state_dict(model.state_dict())
    return ref


# -- 1. a model that differs across ranks fails on every rank, naming the first mismatch
plugtorch.manual_seed(0)
try:
    DDP(nn.Sequential(nn.Linear(8, 4 + rank)))
except RuntimeError as e:
    msg = str(e)
    assert "rank 0 has 0.weight [4, 8] float32 where rank 1 has 0.weight [5, 8] float32" in msg, msg
else:
    raise AssertionError("a shape mismatch across ranks must raise")
try:
    DDP(nn.Sequential(*[nn.Linear(8, 8) for _ in range(1 + rank)]))
except RuntimeError as e:
    assert "the first unmatched one is 1.weight on rank 1" in str(e), str(e)
else:
    raise AssertionError("a parameter count mismatch across ranks must raise")

# -- 2. rank 0's parameters win; buckets in reverse order, posted while backward still runs
model = mlp()
order = []
first_weight = model[0].weight
first_weight.register_post_accumulate_grad_hook(lambda p: order.append(
    [b.work is not None for b in ddp.reducer.buckets]))
ddp = DDP(model, bucket_cap_mb=0.001)
for p in model.parameters():
    got = gathered(p)
    assert all(np.array_equal(got[0], g) for g in got)
buckets = ddp.reducer.buckets
assert len(buckets) >= 3, [b.names for b in buckets]
assert buckets[0].names[0] == "6.bias" and buckets[-1].names[-1] == "0.weight", [b.names for b in buckets]
ref = reference_copy(model)
ddp(data(rank)).pow(2).mean().backward()
assert order == [[True] * (len(buckets) - 1) + [False]], (
    f"earlier buckets must be posted before the last gradient arrives: {order}")
sum(ref(data(r)).pow(2).mean() for r in range(world)).div(world).backward()
for p, q in zip(model.parameters(), ref.parameters()):
    np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)

# -- 3. no_sync accumulates locally; the next synced backward averages the sum
model.zero_grad()
ref = reference_copy(model)
with ddp.no_sync():
    for i in range(2):
        ddp(data(rank, seed=i)).pow(2).mean().backward()
    mine = gathered(model[0].weight.grad)
    assert not np.allclose(mine[0], mine[1]), "no_sync() must not communicate"
ddp(data(rank, seed=2)).pow(2).mean().backward()
sum(ref(data(r, seed=i)).pow(2).mean() for r in range(world) for i in range(3)).div(world).backward()
for p, q in zip(model.parameters(), ref.parameters()):
    np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


# -- 4. find_unused_parameters: a head used on rank 1 only, a head used nowhere
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.a, self.b, self.never = nn.Linear(8, 8), nn.Linear(8, 2), nn.Linear(8, 2), nn.Linear(8, 2)

    def forward(self, x, use_b):
        h = self.body(x).tanh()
        return self.a(h) + self.b(h) if use_b else self.a(h)


plugtorch.manual_seed(3)
heads = TwoHeads()
ddp = DDP(heads, find_unused_parameters=True, bucket_cap_mb=0.0001)
for _step in range(2):  # the second step proves the first one finished its reduction
    heads.zero_grad()
    ddp(data(rank), use_b=rank == 1).sum().backward()
assert heads.never.weight.grad is None, "a parameter unused on every rank keeps grad None"
b_grads = gathered(heads.b.weight.grad)
assert np.allclose(b_grads[0], b_grads[1]) and np.abs(b_grads[0]).sum() > 0

# -- 5. without it, an unused parameter is reported at the next forward, not a hang
plugtorch.manual_seed(3)
ddp = DDP(TwoHeads())
ddp(data(rank), use_b=True).sum().backward()
try:
    ddp(data(rank), use_b=True)
except RuntimeError as e:
    assert "find_unused_parameters=True" in str(e) and "'never.weight'" in str(e), str(e)
else:
    raise AssertionError("an unfinished reduction must raise at the next forward")

# -- 6. buffers come from rank 0 at construction and at every forward
plugtorch.manual_seed(0)
bn_model = nn.Sequential(nn.Linear(8, 4), nn.BatchNorm1d(4))
ddp = DDP(bn_model)
ddp(data(rank, seed=5)).sum().backward()   # running stats now differ per rank
means = gathered(bn_model[1].running_mean)
assert not np.allclose(means[0], means[1])
bn_model.eval()
with plugtorch.no_grad():
    ddp(data(rank))
means = gathered(bn_model[1].running_mean)
assert all(np.array_equal(means[0], m) for m in means), "broadcast_buffers must take rank 0's"
with plugtorch.no_grad():  # only the first forward after training syncs buffers, so
    for _ in range(1 + rank):  # ranks may evaluate different numbers of batches
        ddp(data(rank))
dist.barrier()

# -- 7. DistributedSampler defaults to the group; shares are disjoint and cover the data
sampler = DistributedSampler(range(10 * world), shuffle=True, seed=3)
sampler.set_epoch(2)
shares = [None] * world
dist.all_gather_object(shares, list(sampler))
assert sorted(sum(shares, [])) == list(range(10 * world)) and len(sampler) == 10

# -- 8. a checkpoint of the wrapped module loads into a plain module
plain = mlp()
plain.load_state_dict(model.state_dict())
assert all(k.startswith("module.") for k in DDP(mlp()).state_dict())

print(f"ddp features ok on rank {rank} of {world}")
