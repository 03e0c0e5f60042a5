"""``DistributedDataParallel``: the same model on every rank, gradients averaged.

At construction every rank checks that it holds the same parameters (names,
shapes, dtypes) as rank 0 — failing on every rank with the first mismatch rather
than hanging — then takes rank 0's parameters and buffers. Each forward
after a training step broadcasts rank 0's buffers (``broadcast_buffers``) and arms the
:class:`~.reducer.Reducer`, which reduces gradient buckets during backward through
the communication hook (``register_comm_hook``; an all-reduce by default).

``join()`` trains on uneven inputs: a rank out of batches shadows the others'
collectives (:class:`_DDPJoinHook`) until all are out, then every rank takes the
model of the last one to finish.
"""
from __future__ import annotations

import contextlib

from ... import distributed as dist
from ...compiler import not_capturable
from ...core.grad_mode import is_grad_enabled, no_grad
from ...core.ops.creation import tensor, zeros
from ...distributed.algorithms.join import Join, Joinable, JoinHook, _JoinConfig
from ..modules.module import Module
from .reducer import Reducer


def _signature(name, t) -> tuple:
    return (name, tuple(t.shape), t.dtype.name)


def _first_mismatch(rank0: list, other: list, rank: int) -> str | None:
    """The first difference between rank 0's tensor signatures and rank ``rank``'s, in words."""
    for a, b in zip(rank0, other):
        if a != b:
            return (f"rank 0 has {a[0]} {list(a[1])} {a[2]} where rank {rank} has "
                    f"{b[0]} {list(b[1])} {b[2]}")
    if len(rank0) != len(other):
        longer, who = (rank0, 0) if len(rank0) > len(other) else (other, rank)
        return (f"rank 0 has {len(rank0)} parameters and buffers and rank {rank} has {len(other)}; "
                f"the first unmatched one is {longer[min(len(rank0), len(other))][0]} on rank {who}")
    return None


def _broadcast_coalesced(tensors, pg, src: int = 0) -> None:
    """Broadcast ``tensors`` from ``pg``'s rank ``src`` (a group rank, so a subgroup's first
    rank is 0 whatever its global rank) with one collective per (dtype, device)."""
    from ...core.ops.shape import cat
    groups: dict = {}
    for t in tensors:
        groups.setdefault((t.dtype, t.device), []).append(t)
    with no_grad():
        for group in groups.values():
            flat = cat([t.detach().reshape(-1) for t in group])
            dist.broadcast(flat, group=pg, group_src=src)
            off = 0
            for t in group:
                n = t.numel()
                t.copy_(flat[off:off + n].view(t.shape))
                off += n


class _DDPJoinHook(JoinHook):
    """A joined rank's side of one DDP iteration, collective for collective (see ``forward``)."""

    def __init__(self, ddp, divide_by_initial_world_size: bool):
        self.ddp = ddp
        object.__setattr__(ddp, "_divide_by_initial_world_size", divide_by_initial_world_size)

    def main_hook(self) -> None:
        ddp = self.ddp
        if ddp._will_sync_buffers():
            _broadcast_coalesced(list(ddp.module.buffers()), ddp.process_group, ddp._find_common_rank(False))
        flag = zeros(1, device=ddp.join_device)
        # async, then waited: sleeps where ranks share cores while the training ranks compute
        # their forward (see Join._num_nonjoined)
        dist.all_reduce(flag, group=ddp.process_group, async_op=True).wait()
        should_sync = flag.item() != 0
        object.__setattr__(ddp, "require_forward_param_sync", should_sync)
        if should_sync:
            ddp.reducer.shadow_backward()

    def post_hook(self, is_last_joiner: bool) -> None:
        ddp = self.ddp
        src = ddp._find_common_rank(is_last_joiner)
        _broadcast_coalesced(list(ddp.module.parameters()) + list(ddp.module.buffers()), ddp.process_group, src)


class DistributedDataParallel(Module, Joinable):
    """torch.nn.parallel.DistributedDataParallel over plugtorch.distributed (MPI or one process).

    ``device_ids``, ``output_device``, ``dim`` and ``check_reduction`` are accepted for
    torch compatibility and ignored. ``gradient_as_bucket_view`` (``.grad`` living inside
    the buckets) and ``static_graph`` are not supported. With one process there is nothing
    to reduce: the module runs as it is and a communication hook is never called.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if gradient_as_bucket_view or static_graph:
            raise ValueError("DistributedDataParallel: gradient_as_bucket_view and static_graph are "
                             "not supported by plugtorch; leave them False")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps a plugtorch.nn.Module, got {type(module).__name__}")
        pg = process_group if process_group is not None else dist._group(None)
        self.module = module
        object.__setattr__(self, "process_group", pg)
        object.__setattr__(self, "broadcast_buffers", broadcast_buffers)
        object.__setattr__(self, "find_unused_parameters", find_unused_parameters)
        object.__setattr__(self, "require_backward_grad_sync", True)
        object.__setattr__(self, "require_forward_param_sync", True)
        object.__setattr__(self, "_join_config", _JoinConfig.construct_disabled_join_config())
        object.__setattr__(self, "_divide_by_initial_world_size", True)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any "
                               "parameter that requires a gradient.")
        if init_sync and pg.size() > 1:
            self._verify_same_model()
            _broadcast_coalesced(list(module.parameters()) + list(module.buffers()), pg)
        cap_mb = 25 if bucket_cap_mb is None else bucket_cap_mb
        object.__setattr__(self, "reducer", Reducer(named, pg, int(cap_mb * 1024 * 1024),
                                                    find_unused_parameters))

    def _verify_same_model(self) -> None:
        pg = self.process_group
        mine = [_signature(n, p) for n, p in self.module.named_parameters()]
        mine += [_signature(n, b) for n, b in self.module.named_buffers()]
        everyone = pg.allgather_object(mine)
        for r, theirs in enumerate(everyone):
            problem = _first_mismatch(everyone[0], theirs, r)
            if problem is not None:
                raise RuntimeError(
                    "DistributedDataParallel: the model differs across ranks, so gradients cannot be "
                    f"averaged: {problem}. Build the same model on every rank.")

    def forward(self, *inputs, **kwargs):
        # Under join() every collective here has its twin in _DDPJoinHook.main_hook, in order:
        # notify (ones / zeros), buffers (common rank, broadcast), backward-sync flag, then
        # in backward the used-parameter mask and the buckets.
        pg = self.process_group
        if pg.size() > 1:  # its collectives go to MPI, not through the dispatcher
            not_capturable("DistributedDataParallel communicates through its process group (MPI), which a "
                           "replay of the captured kernels would skip")
        sync = is_grad_enabled() and self.require_backward_grad_sync
        joining = self._join_config.enable and pg.size() > 1
        if joining:
            work = Join.notify_join_context(self)
            if work is not None and sync and not self._divide_by_initial_world_size:
                self.reducer.set_divisor_work(work)
        # As torch does, buffers are synced only after a training (grad-enabled) forward, so
        # evaluation with a different number of batches per rank issues no collectives
        # after its first batch.
        if self._will_sync_buffers():
            src = self._find_common_rank(True) if joining else 0
            _broadcast_coalesced(list(self.module.buffers()), pg, src)
        if joining:
            dist.all_reduce(tensor([1.0 if sync else 0.0], device=self.join_device), group=pg, async_op=True)
        output = self.module(*inputs, **kwargs)
        object.__setattr__(self, "require_forward_param_sync", sync)
        if sync:
            self.reducer.prepare(output)
        return output

    def _will_sync_buffers(self) -> bool:
        return (self.broadcast_buffers and self.require_forward_param_sync and self.process_group.size() > 1
                and any(True for _ in self.module.buffers()))

    def _find_common_rank(self, candidate: bool) -> int:
        """The highest rank for which ``candidate`` holds (collective)."""
        rank = tensor([float(self.process_group.rank()) if candidate else -1.0], device=self.join_device)
        dist.all_reduce(rank, op=dist.ReduceOp.MAX, group=self.process_group)
        return int(rank.item())

    # -- uneven inputs ------------------------------------------------------------------
    def join(self, divide_by_initial_world_size: bool = True, enable: bool = True,
             throw_on_early_termination: bool = False):
        """A context manager for training loops whose ranks have different numbers of batches.

        A rank that leaves the loop early shadows the others' collectives until every rank has
        left; then all ranks take the model of the last to leave. ``divide_by_initial_world_size``:
        gradients are divided by the launched world size (every sample weighs the same) or, if
        False, by the number of ranks still training. ``throw_on_early_termination``: instead,
        every rank raises ``RuntimeError`` once one runs out (for loops with other collectives).
        """
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs) -> JoinHook:
        return _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        return next(self.module.parameters()).device

    @property
    def join_process_group(self):
        return self.process_group

    # -- communication hooks -------------------------------------------------------------
    def register_comm_hook(self, state, hook) -> None:
        """Reduce each gradient bucket with ``hook(state, bucket) -> Future`` instead of the
        default all-reduce (torch's DDP communication hooks; see
        ``plugtorch.distributed.algorithms.ddp_comm_hooks.default_hooks``). The Future's value
        is the bucket *averaged* across ranks, a tensor of ``bucket.buffer()``'s size."""
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable as hook(state, bucket), got {hook!r}")
        if self.reducer.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        self.reducer.comm_hook = (state, hook)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of backward passes inside accumulate locally; the first backward after
        the block averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        object.__setattr__(self, "require_backward_grad_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "require_backward_grad_sync", old)
