"""DDP communication hooks under MPI: what each one computes, and the bytes it moves.

Run with 2+ ranks. The reference for every hook is the plain average of the ranks'
gradients; compressed hooks must match it to their format's precision, leave exactly
bfloat16/float16-representable averages, and put half the bytes on the wire.
"""
import numpy as np

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.distributed.algorithms.ddp_comm_hooks import default_hooks
from plugtorch.nn.parallel import DistributedDataParallel as DDP

dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
pg = dist.group.WORLD


def model():
    plugtorch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 5))


def grads(hook, steps=1):
    """Each parameter's .grad after DDP backward with ``hook``, and the bytes all-reduced."""
    net = model()
    ddp = DDP(net, bucket_cap_mb=0.01)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    before = pg.bytes_reduced
    for step in range(steps):
        g = np.random.default_rng(10 * rank + step)
        x = plugtorch.from_numpy(g.standard_normal((8, 32)).astype(np.float32))
        net.zero_grad()
        ddp(x).pow(2).sum().backward()
    return [p.grad.numpy().copy() for p in net.parameters()], pg.bytes_reduced - before


def local_grads():
    net = model()
    g = np.random.default_rng(10 * rank)
    net(plugtorch.from_numpy(g.standard_normal((8, 32)).astype(np.float32))).pow(2).sum().backward()
    return [p.grad.numpy().copy() for p in net.parameters()]


everyone = [None] * world
dist.all_gather_object(everyone, local_grads())
average = [sum(e[i] for e in everyone) / world for i in range(len(everyone[0]))]
magnitude = [sum(np.abs(e[i]) for e in everyone) / world for i in range(len(everyone[0]))]

plain, plain_bytes = grads(None)
for got, want in zip(plain, average):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
same, same_bytes = grads(default_hooks.allreduce_hook)
assert same_bytes == plain_bytes
for got, want in zip(same, average):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)

fp16, fp16_bytes = grads(default_hooks.fp16_compress_hook)
bf16, bf16_bytes = grads(default_hooks.bf16_compress_hook)
assert fp16_bytes * 2 == plain_bytes and bf16_bytes * 2 == plain_bytes, (plain_bytes, fp16_bytes, bf16_bytes)
for f, b, want, size in zip(fp16, bf16, average, magnitude):
    assert np.array_equal(f, f.astype(np.float16).astype(np.float32)), "fp16 averages are float16 values"
    assert not (b.view(np.uint32) & 0xFFFF).any(), "bf16 averages are bfloat16 values"
    # each share rounded once, each partial sum once: a few units in the last place of the shares
    scale = size + 2.0**-14
    assert np.all(np.abs(f - want) <= world * 2.0**-10 * scale), np.abs(f - want).max()
    assert np.all(np.abs(b - want) <= world * 2.0**-7 * scale), np.abs(b - want).max()
    assert not np.array_equal(b, want) and not np.array_equal(f, want), "compression must change something"

# a hook of the user's own: doubles the average; and a hook that returns no Future fails clearly
def doubled(state, bucket):
    assert state == "mine" and bucket.buffer().numel() == sum(g.numel() for g in bucket.gradients())
    fut = default_hooks.allreduce_hook(None, bucket)
    return fut.then(lambda f: f.value() * 2)


custom, _ = grads(lambda s, b: doubled("mine", b))
for got, want in zip(custom, average):
    np.testing.assert_allclose(got, 2 * want, rtol=1e-5, atol=1e-7)
ddp = DDP(model())
ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
try:
    ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
except RuntimeError as e:
    assert "only be called once" in str(e)
else:
    raise AssertionError("a second hook must be refused")

# bfloat16 on the wire sums like bfloat16: every partial sum rounded (checked in float32 here)
t = plugtorch.full((4,), 1.0 + 2.0**-8)  # halfway between two bfloat16 numbers: ties to even
dist.group.WORLD.allreduce(t, dist.ReduceOp.SUM, wire_dtype="bfloat16").wait()
assert t.tolist() == [float(world)] * 4, t.tolist()
print(f"comm hooks ok on rank {rank} of {world}")
