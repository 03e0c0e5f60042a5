"""The gradient reducer behind DistributedDataParallel: buckets, readiness, overlap.

Parameters are grouped into buckets of about ``bucket_cap_mb`` in *reverse*
registration order (roughly the order backward produces their gradients), one
dtype and backend per bucket. A post-accumulate-grad hook on each parameter
copies its gradient into its bucket's flat buffer; when the bucket's last
gradient arrives the bucket is handed to the communication hook at once (by
default an all-reduce SUM), so communication overlaps with the rest of backward.
Buckets are launched strictly in bucket order, so every rank posts the same
collectives in the same order even when its gradients become ready in another
order. When the last bucket has been launched (the end of backward), the reducer
waits for all of them and writes the average into ``.grad``, so
``optimizer.step()`` sees it: sum / world size by default, sum / ranks still
training under ``join(divide_by_initial_world_size=False)``, or whatever a
registered communication hook returned.

Everything here uses public tensor operations; how the flat buffers reach the
wire is the process group's business.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ... import distributed as dist
from ...core.grad_mode import no_grad
from ...core.ops.creation import tensor, zeros
from ...distributed.grad_bucket import GradBucket

if TYPE_CHECKING:
    from ...core.tensor import Tensor
    from ...distributed.process_group import ProcessGroup, Work
    from ...futures import Future

# A small first bucket starts communication early in backward (as torch does).
FIRST_BUCKET_BYTES = 1024 * 1024


class Bucket:
    """A flat buffer holding the gradients of ``params``, and each one's view of it."""

    __slots__ = ("params", "names", "flat", "views", "ready", "pending", "future")
    params: list[Tensor]
    names: list[str]
    flat: Tensor | None  # None (and views too) where not allocated: one process averages nothing
    views: list[Tensor] | None
    ready: list[bool]
    pending: int
    future: Future | None  # the reduction in flight, once launched

    def __init__(self, params: list[Tensor], names: list[str], allocate: bool = True) -> None:
        self.params = params
        self.names = names
        self.flat = self.views = None
        if allocate:
            p0 = params[0]
            self.flat = zeros(sum(p.numel() for p in params), dtype=p0.dtype, device=p0.device)
            self.views = _views(self.flat, params)
        self.reset()

    def reset(self) -> None:
        self.ready = [False] * len(self.params)
        self.pending = len(self.params)
        self.future = None

    @property
    def work(self) -> Future | None:
        """The bucket's reduction in flight this iteration (None before it is launched)."""
        return self.future


def _views(flat: Tensor, params: Sequence[Tensor]) -> list[Tensor]:
    views, off = [], 0
    for p in params:
        views.append(flat[off:off + p.numel()].view(p.shape))
        off += p.numel()
    return views


def assign_buckets(named_params: Sequence[tuple[str, Tensor]], cap_bytes: int,
                   first_bytes: int = FIRST_BUCKET_BYTES) -> list[list[tuple[str, Tensor]]]:
    """Lists of (name, param), reverse registration order, grouped by dtype and backend."""
    open_buckets: dict = {}
    sizes: dict = {}
    done = []
    limit = min(first_bytes, cap_bytes)
    for name, p in reversed(named_params):
        key = (p.dtype, p.device)
        bucket = open_buckets.setdefault(key, [])
        bucket.append((name, p))
        sizes[key] = sizes.get(key, 0) + p.numel() * p.element_size()
        if sizes[key] >= limit:
            done.append(open_buckets.pop(key))
            sizes[key] = 0
            limit = cap_bytes
    done.extend(b for b in open_buckets.values() if b)
    return done


class Reducer:
    """Averages gradients across ranks during backward; see the module docstring."""

    def __init__(self, named_params: Sequence[tuple[str, Tensor]], process_group: ProcessGroup,
                 bucket_cap_bytes: int, find_unused: bool) -> None:
        self.pg = process_group
        self.find_unused = find_unused
        # One process has nothing to average: the buckets are planned but never filled.
        self.active = process_group.size() > 1
        self.buckets = [Bucket([p for _, p in b], [n for n, _ in b], allocate=self.active)
                        for b in assign_buckets(named_params, bucket_cap_bytes)]
        self.where = {}  # id(param) -> (bucket index, index in bucket)
        self.hooks = []
        for bi, bucket in enumerate(self.buckets):
            for i, p in enumerate(bucket.params):
                self.where[id(p)] = (bi, i)
                if self.active:
                    self.hooks.append(p.register_post_accumulate_grad_hook(self._grad_ready))
        self.comm_hook: tuple[Any, Callable[..., Future]] | None = None  # (state, hook) from DDP.register_comm_hook
        self.armed = False      # a synchronised backward is expected
        self.any_ready = False  # some gradient of this iteration has arrived
        self.next_bucket = 0
        self.used: tuple[Tensor, Work] | None = None  # (mask, work) of globally used parameters (find_unused)
        self.divisor_work: Work | None = None  # join(divide_by_initial_world_size=False): ranks still training

    # -- per iteration -------------------------------------------------------------
    def prepare(self, outputs: Any) -> None:
        """Called after forward: expect one gradient per parameter (or, with
        find_unused_parameters, per parameter the outputs depend on)."""
        if not self.active:
            return
        if self.armed and self.any_ready:
            self._unfinished_error()
        if self.used is not None:  # a forward whose backward never came: retire its mask
            self.used[1].wait()
            self.used = None
        self.armed, self.any_ready, self.next_bucket = True, False, 0
        for bucket in self.buckets:
            bucket.reset()
        if not self.find_unused:
            return
        reached = _reachable_leaves(outputs)
        used = []
        for bucket in self.buckets:
            for i, p in enumerate(bucket.params):
                used.append(1.0 if id(p) in reached else 0.0)
                if not used[-1]:
                    self._mark_ready(bucket, i, p)
        mask = tensor(used)
        self.used = (mask, dist.all_reduce(mask, op=dist.ReduceOp.MAX, group=self.pg, async_op=True))

    def set_divisor_work(self, work: Work) -> None:
        """Divide this iteration's sums by the value ``work`` all-reduces (ranks still training)."""
        self.divisor_work = work

    def _grad_ready(self, p: Tensor) -> None:
        if not self.armed:
            return  # no_sync(), or a backward not preceded by a DDP forward
        bi, i = self.where[id(p)]
        bucket = self.buckets[bi]
        if bucket.ready[i]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter '{bucket.names[i]}' received a gradient twice in one "
                "iteration (a second backward through the same forward?). Call forward again for each "
                "backward, or accumulate gradients under no_sync()."
            )
        self.any_ready = True
        self._mark_ready(bucket, i, p)
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            b = self.buckets[self.next_bucket]
            b.future = self._launch(self.next_bucket, b.flat, b.views, b.params)
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets):
            self._finalize()
        elif self.next_bucket:
            # Where the process group has no progress thread, asking whether a posted bucket is
            # done (MPI_Test) moves it along while backward is still computing.
            launched = self.buckets[self.next_bucket - 1].future
            assert launched is not None, "launched above"
            launched.done()

    def _launch(self, index: int, flat, views, params):
        """Hand one bucket to the communication hook (default: all-reduce SUM); its Future."""
        if self.comm_hook is None:
            return dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.pg, async_op=True).get_future()
        state, hook = self.comm_hook
        future = hook(state, GradBucket(index, flat, views, params, index == len(self.buckets) - 1))
        if not hasattr(future, "wait") or not hasattr(future, "then"):
            raise RuntimeError(f"DistributedDataParallel: the communication hook {getattr(hook, '__name__', hook)} "
                               f"must return a plugtorch.futures.Future, got {type(future).__name__}")
        return future

    def _mark_ready(self, bucket, i, p) -> None:
        with no_grad():
            if p.grad is None:
                bucket.views[i].zero_()
            else:
                bucket.views[i].copy_(p.grad)
        bucket.ready[i] = True
        bucket.pending -= 1

    def _finalize(self) -> None:
        self.armed = False
        used = None
        if self.used is not None:
            mask, work = self.used
            work.wait()
            used = mask.tolist()
            self.used = None
        scale = 1.0 / self.pg.size()
        if self.divisor_work is not None:
            self.divisor_work.wait()
            scale = 1.0 / self.divisor_work.result()[0].item()
            self.divisor_work = None
        k = 0
        with no_grad():
            for bucket in self.buckets:
                # every bucket was launched (this runs after the last), each allocated (active)
                assert bucket.future is not None and bucket.flat is not None and bucket.views is not None
                result = bucket.future.wait()
                if self.comm_hook is None:
                    result = result[0]
                elif result.numel() != bucket.flat.numel():
                    raise RuntimeError(f"DistributedDataParallel: the communication hook returned a tensor of "
                                       f"{result.numel()} elements for bucket {self.buckets.index(bucket)} of "
                                       f"{bucket.flat.numel()}; return the reduced bucket")
                views = bucket.views if result is bucket.flat else _views(result, bucket.params)
                for view, p in zip(views, bucket.params):
                    if used is None or used[k]:
                        # the hook returned the average; the default sum becomes it in this pass
                        p.grad = view * scale if self.comm_hook is None else view.clone()
                    k += 1

    # -- a joined rank's side of an iteration (DistributedDataParallel.join) ----------
    def shadow_backward(self) -> None:
        """Post the collectives of one synchronised backward, contributing zeros."""
        if not self.active:
            return
        if self.find_unused:
            mask = zeros(sum(len(b.params) for b in self.buckets))
            dist.all_reduce(mask, op=dist.ReduceOp.MAX, group=self.pg)
        futures = []
        for index, b in enumerate(self.buckets):
            assert b.flat is not None, "allocated: the reducer is active"
            flat = zeros(b.flat.numel(), dtype=b.flat.dtype, device=b.flat.device)
            futures.append(self._launch(index, flat, _views(flat, b.params), b.params))
        for f in futures:
            f.wait()

    def _unfinished_error(self):
        missing = [name for b in self.buckets for name, ready in zip(b.names, b.ready) if not ready]
        self.armed = False
        raise RuntimeError(
            "DistributedDataParallel: expected to have finished reduction in the prior iteration "
            "before starting a new one. This module has parameters that were not used in producing "
            f"the loss on rank {self.pg.rank()}; these received no gradient: {missing}. Pass "
            "find_unused_parameters=True to DistributedDataParallel, and make sure every output of "
            "forward takes part in the loss."
        )


def _reachable_leaves(outputs) -> set:
    """ids of the leaf tensors the autograd graph of ``outputs`` reaches."""
    stack = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
    leaves = {id(t) for t in _tensors(outputs) if t.grad_fn is None and t.requires_grad}
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            leaves.add(id(variable))
        stack.extend(n for n, _ in node.next_functions)
    return leaves


def _tensors(obj):
    from ...core.tensor import Tensor
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)
