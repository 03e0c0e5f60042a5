"""Uneven inputs under DistributedDataParallel.join(), checked on every rank.

Rank r has 3 + 3r batches. Each rank also computes, without DDP, what one process
would do: at step k the ranks that still have a batch contribute their gradient,
divided by the launched world size (or by the ranks still training), and the model
all ranks end with is that one. Any hang is caught by the harness's timeout.
"""
import numpy as np

import plugtorch
import plugtorch.distributed as dist
import plugtorch.optim
from plugtorch import nn
from plugtorch.distributed.algorithms.ddp_comm_hooks import default_hooks
from plugtorch.nn.parallel import DistributedDataParallel as DDP

dist.init(timeout=60)
rank, world = dist.get_rank(), dist.get_world_size()
batches = [3 + 3 * r for r in range(world)]
loss_fn = nn.CrossEntropyLoss()


def data(r, k):
    g = np.random.default_rng(1000 * r + k)
    return (plugtorch.from_numpy(g.standard_normal((5, 6)).astype(np.float32)),
            plugtorch.from_numpy(g.integers(0, 3, 5)))


def mlp():
    plugtorch.manual_seed(7)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def reference(divide_by_initial):
    model = mlp()
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for k in range(max(batches)):
        active = [r for r in range(world) if k < batches[r]]
        opt.zero_grad()
        total = sum(loss_fn(model(data(r, k)[0]), data(r, k)[1]) for r in active)
        (total / (world if divide_by_initial else len(active))).backward()
        opt.step()
    return params(model)


def train(ddp, opt, **join_kwargs):
    steps = 0
    with ddp.join(**join_kwargs):
        for k in range(batches[rank]):
            x, y = data(rank, k)
            opt.zero_grad()
            loss_fn(ddp(x), y).backward()
            opt.step()
            steps += 1
    return steps


def same_everywhere(values):
    everyone = [None] * world
    dist.all_gather_object(everyone, values)
    return all(all(np.array_equal(a, b) for a, b in zip(everyone[0], v)) for v in everyone)


# -- 1. averaging over the launched world size (torch's default), and over the ranks still training
for divide_by_initial in (True, False):
    model = mlp()
    ddp = DDP(model, bucket_cap_mb=0.0002)  # several buckets
    assert len(ddp.reducer.buckets) > 1
    opt = plugtorch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    assert train(ddp, opt, divide_by_initial_world_size=divide_by_initial) == batches[rank]
    want = reference(divide_by_initial)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(params(model), want))
    assert worst < 1e-5, f"divide_by_initial_world_size={divide_by_initial}: max |diff| {worst:g} on rank {rank}"
    assert same_everywhere(params(model))
    # outside the block the model trains unshadowed again (every rank, same number of steps)
    x, y = data(rank, 99)
    loss_fn(ddp(x), y).backward()

# -- 2. throw_on_early_termination: every rank raises once the first runs out
model = mlp()
ddp = DDP(model)
opt = plugtorch.optim.SGD(ddp.parameters(), lr=0.1)
steps = 0
try:
    with ddp.join(throw_on_early_termination=True):
        for k in range(batches[rank]):
            x, y = data(rank, k)
            loss_fn(ddp(x), y).backward()
            steps += 1
except RuntimeError as e:
    expected = "exhausted all inputs" if rank == 0 else "Detected at least one rank that exhausted inputs"
    assert expected in str(e), str(e)
else:
    raise AssertionError("throw_on_early_termination=True must raise on every rank")
assert steps == batches[0], (rank, steps)

# -- 3. a compression hook, unused parameters, buffers and evaluation inside the block
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.norm = nn.Linear(6, 16), nn.BatchNorm1d(16)
        self.head, self.spare = nn.Linear(16, 3), nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.norm(self.body(x)).relu())


plugtorch.manual_seed(3)
net = Net()
ddp = DDP(net, find_unused_parameters=True, bucket_cap_mb=0.0005)
ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
opt = plugtorch.optim.SGD(ddp.parameters(), lr=0.05)
with ddp.join():
    for k in range(batches[rank]):
        x, y = data(rank, k)
        opt.zero_grad()
        loss_fn(ddp(x), y).backward()
        opt.step()
        with plugtorch.no_grad():  # an evaluation forward: no backward for the joined to shadow
            ddp(x)
assert net.spare.weight.grad is None
assert same_everywhere(params(net) + [b.numpy().copy() for b in net.buffers()])

print(f"join ok on rank {rank} of {world}")
