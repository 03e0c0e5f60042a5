"""``DistributedDataParallel``: the same model on every rank, gradients averaged.

At construction every rank checks that it holds the same parameters (names,
shapes, dtypes) as rank 0 — failing on every rank with the first mismatch rather
than hanging — then takes rank 0's parameters and buffers. Each forward
after a training step broadcasts rank 0's buffers (``broadcast_buffers``) and arms the
:class:`~.reducer.Reducer`, which all-reduces gradient buckets during backward.
"""
from __future__ import annotations

import contextlib

from ... import distributed as dist
from ...core.grad_mode import is_grad_enabled, no_grad
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
    """Broadcast ``tensors`` from ``src`` with one collective per (dtype, device)."""
    from ...core.ops.shape import cat
    groups: dict = {}
    for t in tensors:
        groups.setdefault((t.dtype, t.device), []).append(t)
    with no_grad():
        for group in groups.values():
            flat = cat([t.detach().reshape(-1) for t in group])
            dist.broadcast(flat, src, group=pg)
            off = 0
            for t in group:
                n = t.numel()
                t.copy_(flat[off:off + n].view(t.shape))
                off += n


class DistributedDataParallel(Module):
    """torch.nn.parallel.DistributedDataParallel over plugtorch.distributed (MPI or one process).

    ``device_ids``, ``output_device``, ``dim`` and ``check_reduction`` are accepted for
    torch compatibility and ignored. ``gradient_as_bucket_view`` (``.grad`` living inside
    the buckets) and ``static_graph`` are not supported.
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
        pg = self.process_group
        # As torch does, buffers are synced only after a training (grad-enabled) forward, so
        # evaluation with a different number of batches per rank issues no collectives
        # after its first batch.
        if self.broadcast_buffers and self.require_forward_param_sync and pg.size() > 1:
            buffers = list(self.module.buffers())
            if buffers:
                _broadcast_coalesced(buffers, pg)
        output = self.module(*inputs, **kwargs)
        sync = is_grad_enabled() and self.require_backward_grad_sync
        object.__setattr__(self, "require_forward_param_sync", sync)
        if sync:
            self.reducer.prepare(output)
        return output

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
