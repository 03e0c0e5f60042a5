"""Under PLUGTORCH_DISTRIBUTED_DEBUG=1, collectives that differ across ranks raise a clear
error on every rank instead of hanging or mixing data; matching ones run normally."""
import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.distributed.debug import CollectiveMismatchError
from plugtorch.nn.parallel import DistributedDataParallel

dist.init()
rank = dist.get_rank()

try:  # same collective, different shapes
    dist.all_reduce(plugtorch.ones(3 + rank))
except CollectiveMismatchError as e:
    assert "all_reduce(float32[3], op=SUM)" in str(e) and "all_reduce(float32[4], op=SUM)" in str(e), e
else:
    raise AssertionError("mismatched shapes were not detected")

try:  # different order
    t = plugtorch.ones(2)
    if rank == 0:
        dist.all_reduce(t)
        dist.broadcast(t, 0)
    else:
        dist.broadcast(t, 0)
        dist.all_reduce(t)
except CollectiveMismatchError as e:
    assert "broadcast(float32[2], src=0)" in str(e) and "all_reduce(float32[2], op=SUM)" in str(e), e
else:
    raise AssertionError("collectives called in a different order were not detected")

# matching collectives, DDP included, still work in debug mode
model = DistributedDataParallel(nn.Linear(4, 2), bucket_cap_mb=0.00001)
model(plugtorch.ones(3, 4) * rank).sum().backward()
assert abs(model.module.bias.grad.tolist()[0] - 3.0) < 1e-6
print(f"debug mode ok on rank {rank}")
