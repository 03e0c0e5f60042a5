"""fully_shard training equals one process training on the global batch.

Usage: fsdp_train.py MODEL:VARIANT[,VARIANT...] ... (one launch, several checks); MODEL is
``mlp`` or ``gpt`` (benchmarks/models.py's minGPT, 2 blocks, dropout off via eval() so every
world size draws the same numbers). VARIANT: ``default``; ``keep`` (reshard_after_forward=False); ``accumulate`` (two
micro-batches, the first under set_requires_gradient_sync(False)); ``wrapper``
(FullyShardedDataParallel with ModuleWrapPolicy); ``dcp`` (distributed.checkpoint round trip). Each rank trains the
FSDP model on its slice of the global batch; rank 1 trains an unsharded copy on the whole
batch; after 20 AdamW steps every full parameter must be within 1e-6 of the copy's.

For the minGPT, float32 alone moves some weights by ~6e-6 in 20 AdamW steps when one process
sums the same gradients in another order (AdamW divides tiny gradients by their own
magnitude), so there the 1e-6 check is against one process that sums the ranks' slices as the
ranks do, and the whole-batch run is held to 2e-5.
"""
import functools
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "benchmarks"))

import models

import plugtorch
import plugtorch.distributed as dist
import plugtorch.distributed.checkpoint as dcp
from plugtorch import nn
from plugtorch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from plugtorch.distributed.fsdp import (
    FSDPModule,
    full_state_dict,
    full_tensor,
    fully_shard,
    load_full_state_dict,
)
from plugtorch.distributed.fsdp import FullyShardedDataParallel as FSDP
from plugtorch.distributed.fsdp.wrap import ModuleWrapPolicy

which = ""  # the model of the checks running now
STEPS, BATCH = 20, 12  # 12 rows split evenly over 2, 3 and 4 ranks

dist.init()
world, rank = dist.get_world_size(), dist.get_rank()


def build():
    if which == "gpt":
        model, x, y, loss_fn = models.gpt(plugtorch, batch=BATCH, block=8, d=16, heads=2, layers=2, vocab=13)
        model.eval()  # dropout off: one process and N ranks must draw nothing random
        for blk in model.blocks:
            # The key part of this bias gets an exactly-zero gradient (softmax ignores a shift common
            # to all keys), so its computed gradient is rounding noise, which AdamW scales up to
            # lr-sized steps that differ between any two summation orders. Frozen, it also
            # tests a parameter that needs no gradient.
            blk.attn.qkv.bias.requires_grad_(False)
        return model, list(model.blocks), x, y, loss_fn
    plugtorch.manual_seed(0)
    # odd sizes: every world size > 1 pads some shard
    model = nn.Sequential(nn.Linear(7, 33), nn.Tanh(), nn.Linear(33, 17), nn.ReLU(), nn.Linear(17, 5))
    x = plugtorch.randn(BATCH, 7)
    y = plugtorch.randint(0, 5, (BATCH,))
    return model, [model[0], model[2]], x, y, nn.functional.cross_entropy


def local_backward(net, xl, yl, variant, fsdp=False):
    """One rank's backward: its slice at once, or (accumulate) in two halves, the first without
    gradient sync."""
    if variant != "accumulate":
        loss_fn(net(xl), yl).backward()
        return
    half = xl.shape[0] // 2
    if fsdp:
        net.set_requires_gradient_sync(False)
    (loss_fn(net(xl[:half]), yl[:half]) * (half / xl.shape[0])).backward()
    if fsdp:
        assert all(p.grad is None for p in net.parameters()), "no reduce-scatter while not syncing"
        net.set_requires_gradient_sync(True)
    (loss_fn(net(xl[half:]), yl[half:]) * ((xl.shape[0] - half) / xl.shape[0])).backward()


def adamw(net):
    return plugtorch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.1)


@functools.cache
def whole_batch():
    """The parameters one process reaches on the whole batch."""
    reference = build()[0]
    opt = adamw(reference)
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn(reference(x), y).backward()
        opt.step()
    return reference.state_dict()


@functools.cache
def summed_as_ranks(variant):
    """The parameters of one process that sums the ranks' gradients as they are summed across
    ranks (each slice's apart, then in rank order)."""
    by_slices = build()[0]
    opt = adamw(by_slices)
    for _ in range(STEPS):
        per_rank = []
        for sl in slices:
            opt.zero_grad()
            local_backward(by_slices, x[sl], y[sl], variant)
            per_rank.append([p.grad for p in by_slices.parameters()])
        with plugtorch.no_grad():
            for i, p in enumerate(by_slices.parameters()):
                if p.grad is not None:
                    total = per_rank[0][i]
                    for grads in per_rank[1:]:
                        total = total + grads[i]
                    p.grad = total / world
        opt.step()
    return by_slices.state_dict()


def sharded(reshard_after_forward=True):
    model, blocks, _, _, _ = build()
    for b in blocks:
        fully_shard(b, reshard_after_forward=reshard_after_forward)
    fully_shard(model)
    return model, blocks


def differ(a, b):
    return max((a[k] - b[k]).abs().max().item() for k in b)


def compare(full, variant):
    """The one-process runs (on ranks 0 and 1, sent to all), and how far ``full`` is from them."""
    mine = {}
    if rank == 0:
        mine["slices"] = summed_as_ranks("accumulate" if variant == "accumulate" else "default")
    if rank == min(1, world - 1):
        mine["whole"] = whole_batch()
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    ref = next(g["whole"] for g in gathered if "whole" in g)
    ref_slices = gathered[0]["slices"]
    assert full.keys() == ref.keys(), (sorted(full), sorted(ref))
    worst, same_sums = differ(full, ref), differ(full, ref_slices)
    strict = same_sums if which == "gpt" else worst
    assert strict <= 1e-6, f"{which}/{variant} on {world} ranks: parameters differ from one process by {strict}"
    assert worst <= 2e-5, f"{which}/{variant} on {world} ranks: parameters differ from one process by {worst}"
    return ref, ref_slices, worst, same_sums


def check_wrapper():
    """FullyShardedDataParallel with an auto-wrap policy trains as fully_shard does; its
    state_dict() is the full one under the model's own names."""
    inner, blocks, _, _, _ = build()
    kind = type(blocks[0])
    wrapped = sum(isinstance(m, kind) for m in inner.modules())
    model = FSDP(inner, auto_wrap_policy=ModuleWrapPolicy({kind}))
    assert sum(isinstance(m, FSDP) for m in model.modules()) == wrapped + 1, "one per block, one for the root"
    opt = adamw(model)
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn(model(x[slices[rank]]), y[slices[rank]]).backward()
        opt.step()
    _, _, worst, same_sums = compare(model.state_dict(), "default")
    print(f"{which}/wrapper: max |fsdp - single| = {worst:.2e}, summed as the ranks: {same_sums:.2e} "
          f"ok on rank {rank}")


def check_dcp():
    """distributed.checkpoint saves the sharded model and optimizer (the state dicts hold Shards),
    a fresh sharded model and optimizer load them and continue identically, and
    full_state_dict=True gives fsdp.full_state_dict's tensors."""
    model, _ = sharded()
    opt = adamw(model)

    def step(net, o):
        o.zero_grad()
        loss_fn(net(x[slices[rank]]), y[slices[rank]]).backward()
        o.step()

    for _ in range(3):
        step(model, opt)
    path = [tempfile.mkdtemp() if rank == 0 else None]
    dist.broadcast_object_list(path, src=0)
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path[0])
    mine = full_state_dict(model)
    assert differ(get_model_state_dict(model, options=StateDictOptions(full_state_dict=True)), mine) == 0.0

    fresh, _ = sharded()
    fresh_opt = adamw(fresh)
    model_sd, optim_sd = get_state_dict(fresh, fresh_opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path[0])
    set_state_dict(fresh, fresh_opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    assert differ(full_state_dict(fresh), mine) == 0.0
    step(model, opt)
    step(fresh, fresh_opt)  # AdamW's moments came along: the same step
    assert differ(full_state_dict(fresh), full_state_dict(model)) == 0.0
    dist.barrier()
    if rank == 0:
        shutil.rmtree(path[0])
    print(f"{which}/dcp: saved, loaded and continued ok on rank {rank}")


def check(variant):
    if variant == "wrapper":
        return check_wrapper()
    if variant == "dcp":
        return check_dcp()
    model, blocks = sharded(reshard_after_forward=variant != "keep")
    assert isinstance(model, FSDPModule) and isinstance(blocks[0], FSDPModule)
    # the optimizer sees this rank's rows of each parameter (torch's Shard(0) pieces)
    rows = [None] * world
    dist.all_gather_object(rows, {n: tuple(p.shape) for n, p in model.named_parameters()})
    for n, p in build()[0].named_parameters():
        assert sum(r[n][0] for r in rows) == p.shape[0] and all(r[n][1:] == tuple(p.shape[1:]) for r in rows), n

    # Prefetch: from the second iteration, block 0's forward runs while block 1's all-gather is
    # posted (this hook runs after fully_shard's, which posts it).
    seen_prefetch = []
    blocks[0].register_forward_pre_hook(
        lambda m, a: seen_prefetch.append(blocks[1]._fsdp_state.group.gather is not None))

    # ... and backward: when block 1's output gradient arrives (this tensor hook runs after
    # fully_shard's), block 0's all-gather is posted, block 0 being next in backward.
    seen_backward_prefetch = []

    def watch(module, args, output):
        if output.requires_grad:  # not in the no_grad forward at the end
            output.register_hook(
                lambda g: seen_backward_prefetch.append(blocks[0]._fsdp_state.group.gather is not None))
    blocks[1].register_forward_hook(watch)

    opt = adamw(model)
    for _ in range(STEPS):
        opt.zero_grad()
        local_backward(model, x[slices[rank]], y[slices[rank]], variant, fsdp=True)
        for p in model.parameters():
            if p.requires_grad:
                assert p.grad is not None and p.grad.shape == p.shape, "each shard gets its averaged gradient"
            else:
                assert p.grad is None, "a frozen parameter gets no gradient"
        opt.step()
    assert seen_prefetch[0] is False and all(seen_prefetch[1:]), seen_prefetch
    # with reshard_after_forward=False block 0 stays gathered: nothing to prefetch
    assert len(seen_backward_prefetch) >= STEPS and all(seen_backward_prefetch) == (variant != "keep"), \
        seen_backward_prefetch

    full = full_state_dict(model)
    ref, ref_slices, worst, same_sums = compare(full, variant)

    # The full values also come per parameter, and only to rank 0 when asked.
    name, shard = next(iter(model.named_parameters()))
    assert (full_tensor(shard) - ref_slices[name]).abs().max().item() <= 1e-6
    assert (full_state_dict(model, rank0_only=True) == {}) == (rank != 0)

    # unshard()/reshard() of the root: its own parameters are the full ones in between.
    name = model._fsdp_state.group.params[0].fqn
    shard = dict(model.named_parameters())[name]
    model.unshard()
    assert dict(model.named_parameters())[name].shape == ref[name].shape
    model.reshard()
    assert dict(model.named_parameters())[name] is shard

    # A full state dict loads back into the shards: a fresh sharded model computes as the FSDP one.
    fresh, _ = sharded()
    load_full_state_dict(fresh, {k: v.clone() for k, v in full.items()})
    with plugtorch.no_grad():
        diff = (fresh(x) - model(x)).abs().max().item()
    assert diff == 0.0, diff

    print(f"{which}/{variant}: max |fsdp - single| = {worst:.2e}, summed as the ranks: {same_sums:.2e} "
          f"ok on rank {rank}")


slices = [slice(r * BATCH // world, (r + 1) * BATCH // world) for r in range(world)]
for spec in sys.argv[1:]:
    which, _, variants = spec.partition(":")
    whole_batch.cache_clear()
    summed_as_ranks.cache_clear()
    _, _, x, y, loss_fn = build()
    for v in (variants or "default").split(","):
        check(v)
