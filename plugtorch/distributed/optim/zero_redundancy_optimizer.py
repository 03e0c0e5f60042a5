"""``ZeroRedundancyOptimizer``: optimizer state sharded across data-parallel ranks (ZeRO stage 1).

Each rank owns a partition of the parameters (torch's greedy partition: within each group,
largest first, each to the rank with the fewest elements so far), keeps the wrapped
optimizer's state only for those, steps only those, and then every rank broadcasts the
parameters it updated. Gradients must already be averaged (``DistributedDataParallel``),
so every rank ends the step with the same parameters as one process would.
"""
from __future__ import annotations

import copy
import logging
from itertools import chain
from typing import Any

from ... import distributed as dist
from ...core.grad_mode import no_grad
from ...core.ops.creation import empty, zeros
from ...core.tensor import Tensor
from ...optim.optimizer import Optimizer, _cast_like, _copy_state
from ..algorithms.join import Join, Joinable, JoinHook

logger = logging.getLogger(__name__)


class _ZeROJoinHook(JoinHook):
    """A joined rank still steps its partition and broadcasts it, so the others' step completes."""

    def __init__(self, zero: ZeroRedundancyOptimizer):
        self.zero = zero

    def main_hook(self) -> None:
        self.zero.step()


class ZeroRedundancyOptimizer(Optimizer, Joinable):
    """torch.distributed.optim.ZeroRedundancyOptimizer.

    ``optimizer_class`` (e.g. ``plugtorch.optim.AdamW``) is built on this rank's partition
    with ``**defaults``. ``parameters_as_bucket_view=True`` makes each rank's parameters
    views into one flat tensor per rank, so a step broadcasts one tensor per rank instead
    of one per parameter. ``overlap_with_ddp=True`` (stepping inside DDP's communication
    hook) is not supported and raises. ``consolidate_state_dict(to)`` then ``state_dict()``
    on rank ``to`` give the whole optimizer's state, in the wrapped optimizer's format.
    """

    def __init__(self, params, optimizer_class: type, process_group=None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False, **defaults: Any):
        if overlap_with_ddp:
            raise NotImplementedError(
                "ZeroRedundancyOptimizer(overlap_with_ddp=True) is not supported by plugtorch (it steps "
                "inside DDP's communication hook); pass overlap_with_ddp=False and call step() after "
                "backward")
        params = self._verify_and_init_params(params)
        self.initialized = False
        Optimizer.__init__(self, params, defaults)
        Joinable.__init__(self)
        self._clear_cache()
        self._default_device = self._all_params[0].device
        self.process_group: Any = process_group if process_group is not None else dist._group(None)
        self.world_size: int = dist.get_world_size(self.process_group)
        self.rank: int = dist.get_rank(self.process_group)
        self.global_rank: int = dist.get_global_rank(self.process_group, self.rank)
        self._overlap_with_ddp = False
        self._optim_defaults = defaults
        self._optim_constructor = optimizer_class
        self.optim: Any = optimizer_class(self._partition_parameters()[self.rank], **defaults)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._buckets: list[Tensor] = []
        self._build_param_buckets()
        self._all_state_dicts: list[dict[str, Any]] = []
        self.initialized = True

    # -- partition ----------------------------------------------------------------------
    def _clear_cache(self) -> None:
        self._partition_parameters_cache: list[list[dict]] = []
        self._param_to_rank_cache: dict[Tensor, int] = {}

    def _partition_parameters(self) -> list[list[dict]]:
        """For each rank, its share of every parameter group (groups copied, ``params`` replaced)."""
        if not self._partition_parameters_cache:
            parts: list[list[dict]] = [[] for _ in range(self.world_size)]
            sizes = [0] * self.world_size
            for group in self.param_groups:
                per_rank: list[list[Tensor]] = [[] for _ in range(self.world_size)]
                # stable sort, largest first: the same partition on every rank
                for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                    r = sizes.index(min(sizes))
                    per_rank[r].append(p)
                    sizes[r] += p.numel()
                for r, owned in enumerate(per_rank):
                    g = copy.copy(group)
                    g["params"] = owned
                    g.pop("param_names", None)
                    parts[r].append(g)
            self._partition_parameters_cache = parts
        return self._partition_parameters_cache

    @property
    def _param_to_rank(self) -> dict[Tensor, int]:
        if not self._param_to_rank_cache:
            for r, groups in enumerate(self._partition_parameters()):
                for g in groups:
                    for p in g["params"]:
                        self._param_to_rank_cache[p] = r
        return self._param_to_rank_cache

    @property
    def _index_to_param(self) -> list[Tensor]:
        return list(chain.from_iterable(g["params"] for g in self.param_groups))

    def _verify_and_init_params(self, params: Any) -> list:
        if isinstance(params, Tensor):
            raise TypeError("`params` argument should be an iterable of Tensors, but got "
                            f"{type(params).__module__}.{type(params).__name__}")
        try:
            all_params = list(params)
        except TypeError as e:
            raise TypeError("`params` argument should be an iterable of Tensors or dicts, but got "
                            f"{type(params).__name__}") from e
        if len(all_params) == 0:
            raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
        if all(isinstance(p, Tensor) for p in all_params):
            self._all_params = all_params
        elif all(isinstance(p, dict) for p in all_params):
            self._all_params = []
            for group in all_params:
                if "params" not in group:
                    raise ValueError("Each parameter group passed-in via `params` must have a 'params' key "
                                     "mapping to the parameters in the group")
                self._all_params.extend(group["params"])
        else:
            raise TypeError("`params` argument should be an iterable of Tensors or dicts")
        return all_params

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group on every rank (all ranks must call it, with the same group). Earlier
        groups keep their owners; the new group's parameters are spread over the ranks."""
        super().add_param_group(param_group)
        if self.initialized:
            self._clear_cache()
            mine = self._partition_parameters()[self.rank]
            if len(mine) == len(self.optim.param_groups) + 1:
                self.optim.add_param_group(mine[-1])
            if self.parameters_as_bucket_view:
                self._build_param_buckets()

    # -- step -----------------------------------------------------------------------------
    def step(self, closure=None, **kwargs: Any):
        """Step this rank's partition with the wrapped optimizer, then broadcast every
        partition from its owner. Options changed in ``param_groups`` (a learning-rate
        scheduler's ``lr``) reach the wrapped optimizer first."""
        Join.notify_join_context(self)
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        loss = self.optim.step(**kwargs) if closure is None else self.optim.step(closure=closure, **kwargs)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        self._sync_params()
        return loss

    def _sync_params(self) -> None:
        handles = []
        with no_grad():
            for r in range(self.world_size):
                src = dist.get_global_rank(self.process_group, r)
                if self.parameters_as_bucket_view:
                    tensors = [self._buckets[r]]
                else:
                    tensors = [p for g in self._partition_parameters()[r] for p in g["params"]]
                handles += [dist.broadcast(t.detach(), src=src, group=self.process_group, async_op=True)
                            for t in tensors]
            for h in handles:
                h.wait()

    def _build_param_buckets(self) -> None:
        """With ``parameters_as_bucket_view``: one flat tensor per rank, its parameters views into it."""
        if not self.parameters_as_bucket_view:
            return
        self._buckets = []
        with no_grad():
            for groups in self._partition_parameters():
                owned = [p for g in groups for p in g["params"]]
                dtypes = {p.dtype for p in owned}
                if len(dtypes) > 1:
                    raise ValueError("ZeroRedundancyOptimizer(parameters_as_bucket_view=True) needs every "
                                     f"parameter of one dtype; got {sorted(str(d) for d in dtypes)}")
                n = sum(p.numel() for p in owned)
                if n == 0:
                    self._buckets.append(zeros(1, device=self._default_device))
                    continue
                bucket = empty(n, dtype=owned[0].dtype, device=owned[0].device)
                off = 0
                for p in owned:
                    bucket[off:off + p.numel()].copy_(p.detach().reshape(-1))
                    p.data = bucket[off:off + p.numel()].view(p.shape)
                    off += p.numel()
                self._buckets.append(bucket)

    @staticmethod
    def _sync_param_groups(src: list[dict], dst: list[dict]) -> None:
        for s, d in zip(src, dst):
            for k, v in s.items():
                if k not in ("params", "param_names"):
                    d[k] = v

    # -- state dict -----------------------------------------------------------------------
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Collect every rank's optimizer state on group rank ``to`` (call it on all ranks)."""
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        self._all_state_dicts = []
        for r in range(self.world_size):
            src = dist.get_global_rank(self.process_group, r)
            box = [self.optim.state_dict() if r == self.rank else None]
            if r != to:  # rank ``to`` keeps its own dict without a message
                dist.broadcast_object_list(box, src=src, group=self.process_group)
            if self.rank == to:
                self._all_state_dicts.append(_copy_state(box[0]))

    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer's state as of the last ``consolidate_state_dict`` to this rank."""
        if not self._all_state_dicts:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please call "
                               f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you "
                               "meant to save the global state.")
        state_dict = super().state_dict()
        index = {id(p): i for i, p in enumerate(self._index_to_param)}
        for r, local in enumerate(self._all_state_dicts):
            for local_group, group in zip(local["param_groups"], self._partition_parameters()[r]):
                for i, p in zip(local_group["params"], group["params"]):
                    if i in local["state"]:
                        state_dict["state"][index[id(p)]] = local["state"][i]
        state_dict["state"] = dict(sorted(state_dict["state"].items()))
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a whole optimizer's state (from ``state_dict()``, any world size): each rank
        keeps the state of the parameters it owns."""
        params = self._index_to_param
        mine = {}
        for index, value in state_dict["state"].items():
            index = int(index)
            if not 0 <= index < len(params):
                raise ValueError(f"ZeroRedundancyOptimizer.load_state_dict: state for parameter {index}, but "
                                 f"the optimizer has {len(params)} parameters")
            p = params[index]
            if self._param_to_rank[p] == self.rank:
                mine[index] = value
                self.optim.state[p] = {k: _cast_like(p, k, v) for k, v in _copy_state(value).items()}
        super().load_state_dict({"state": mine, "param_groups": state_dict["param_groups"]})
        self._sync_param_groups(state_dict["param_groups"], self.param_groups)
        self._sync_param_groups(self.param_groups, self.optim.param_groups)

    # -- join -----------------------------------------------------------------------------
    def join_hook(self, **kwargs: Any) -> JoinHook:
        return _ZeROJoinHook(self)

    @property
    def join_device(self):
        return self._default_device

    @property
    def join_process_group(self):
        return self.process_group
