"""``FullyShardedDataParallel``: torch's FSDP1 wrapper, built on ``fully_shard``.

The wrapper applies ``fully_shard`` to the modules ``auto_wrap_policy`` picks (each wrapped in
a ``FullyShardedDataParallel`` of its own, as torch's nested instances are), then to the
module, and keeps it as ``_fsdp_wrapped_module``. Parameters are the row pieces under their
own names (torch's ``use_orig_params=True`` layout, not ``FlatParameter``s). ``state_dict()``
is torch's default ``FULL_STATE_DICT``: full tensors on every rank under names without the
wrapper's ``_fsdp_wrapped_module.`` (collective), and ``load_state_dict`` takes that form.
"""
from __future__ import annotations

import contextlib
import enum
import math
from collections.abc import Callable, Iterable

from ... import distributed as dist
from ...core.grad_mode import no_grad
from ...core.ops.creation import tensor
from ...nn.modules.module import Module
from ._fully_shard import FSDPModule, fully_shard
from ._state_dict import full_state_dict, load_full_state_dict

WRAPPED = "_fsdp_wrapped_module"


class ShardingStrategy(enum.Enum):
    FULL_SHARD = 1
    SHARD_GRAD_OP = 2
    NO_SHARD = 3
    HYBRID_SHARD = 4
    _HYBRID_SHARD_ZERO2 = 5


class BackwardPrefetch(enum.Enum):
    BACKWARD_PRE = 1
    BACKWARD_POST = 2


class ModuleWrapPolicy:
    """torch's ``ModuleWrapPolicy``: wrap every submodule of one of ``module_classes``."""

    def __init__(self, module_classes: Iterable[type]) -> None:
        self._module_classes = tuple(module_classes)

    def __call__(self, module: Module, recurse: bool, nonwrapped_numel: int) -> bool:
        return recurse or isinstance(module, self._module_classes)


def _wrap_children(module: Module, policy: Callable, kwargs: dict) -> None:
    """Post-order, as torch's ``_recursive_wrap``: children first, then the child itself."""
    for name, child in list(module._modules.items()):
        if child is None or isinstance(child, FullyShardedDataParallel):
            continue
        _wrap_children(child, policy, kwargs)
        numel = sum(p.numel() for p in child.parameters())
        if policy(module=child, recurse=False, nonwrapped_numel=numel):
            module._modules[name] = FullyShardedDataParallel(child, **kwargs)


def _clean(key: str) -> str:
    return key.replace(WRAPPED + ".", "")


class FullyShardedDataParallel(Module):
    """torch.distributed.fsdp.FullyShardedDataParallel over ``fully_shard``; see the module
    docstring. ``SHARD_GRAD_OP`` keeps parameters gathered from forward to backward;
    ``NO_SHARD`` and the hybrid strategies are refused (use DDP, or a 1-D mesh)."""

    def __init__(self, module, process_group=None, sharding_strategy=None, cpu_offload=None,
                 auto_wrap_policy=None, backward_prefetch=BackwardPrefetch.BACKWARD_PRE, mixed_precision=None,
                 ignored_modules=None, param_init_fn=None, device_id=None, sync_module_states=False,
                 forward_prefetch=False, limit_all_gathers=True, use_orig_params=False, ignored_states=None,
                 device_mesh=None):
        super().__init__()
        strategy = sharding_strategy or ShardingStrategy.FULL_SHARD
        if strategy not in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP):
            raise NotImplementedError(f"FullyShardedDataParallel: sharding_strategy={strategy} is not supported; "
                                      "use FULL_SHARD or SHARD_GRAD_OP (for NO_SHARD, DistributedDataParallel)")
        for name, value in (("mixed_precision", mixed_precision), ("ignored_modules", ignored_modules),
                            ("ignored_states", ignored_states), ("param_init_fn", param_init_fn),
                            ("cpu_offload", cpu_offload)):
            if value is not None:
                raise NotImplementedError(f"FullyShardedDataParallel: {name} is not supported; leave it None")
        if process_group is not None and device_mesh is not None:
            raise ValueError("Cannot pass both process_group and device_mesh at the same time. "
                             "Please just pass only one of them.")
        if process_group is not None and process_group is not dist._group(None):
            raise NotImplementedError("FullyShardedDataParallel: a process_group other than the world is not "
                                      "supported; pass device_mesh= (a 1-D DeviceMesh) instead")
        if not isinstance(module, Module):
            raise TypeError(f"FullyShardedDataParallel wraps a plugtorch.nn.Module, got {type(module).__name__}")
        pg = device_mesh.get_group() if device_mesh is not None else dist._group(None)
        if sync_module_states and pg.size() > 1:  # the group's first rank's values everywhere
            with no_grad():
                for t in list(module.parameters()) + list(module.buffers()):
                    dist.broadcast(t, group=pg, group_src=0)
        if auto_wrap_policy is not None:
            if isinstance(auto_wrap_policy, (set, list, tuple)):
                raise TypeError("auto_wrap_policy: pass ModuleWrapPolicy(classes) or a callable "
                                "policy(module, recurse, nonwrapped_numel)")
            _wrap_children(module, auto_wrap_policy, dict(sharding_strategy=strategy, device_mesh=device_mesh))
        fully_shard(module, mesh=device_mesh, reshard_after_forward=strategy is ShardingStrategy.FULL_SHARD)
        self._modules[WRAPPED] = module
        object.__setattr__(self, "process_group", pg)

    @property
    def module(self) -> Module:
        inner = self._modules[WRAPPED]
        assert inner is not None, "set in __init__"
        return inner

    def __getattr__(self, name: str):
        """Attributes the wrapper lacks are the wrapped module's (as torch's FSDP forwards them)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            inner = self.__dict__["_modules"].get(WRAPPED)
            if inner is None:  # still in __init__
                raise
            return getattr(inner, name)

    def __getitem__(self, key):
        return self.module[key]  # type: ignore[index]  # a Sequential's, say, as torch forwards it

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate full gradients locally; the first one after the
        block reduce-scatters what has accumulated."""
        self.module.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            self.module.set_requires_gradient_sync(True)

    # -- full state dicts ----------------------------------------------------------------
    def state_dict(self, *args, **kwargs):  # type: ignore[override]
        """The full state dict, on every rank (collective); keys without ``_fsdp_wrapped_module``."""
        if args or kwargs:  # a parent's state_dict walking into this one: the tensors it holds now
            return super().state_dict(*args, **kwargs)
        return {_clean(k): v for k, v in full_state_dict(self.module).items()}

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):  # type: ignore[override]
        names = {_clean(k): k for k in self.module.state_dict()}
        unexpected = [k for k in state_dict if k not in names]
        inner = {names[k]: v for k, v in state_dict.items() if k in names}
        missing, _ = load_full_state_dict(self.module, inner, strict=False)
        missing = [_clean(k) for k in missing]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for FullyShardedDataParallel: missing keys "
                               f"{missing}, unexpected keys {unexpected}")
        from ...nn.modules.state_dict import _IncompatibleKeys
        return _IncompatibleKeys(missing, unexpected)

    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module, recurse: bool = True, writeback: bool = True, rank0_only: bool = False,
                           offload_to_cpu: bool = False, with_grads: bool = False):
        """Inside, every sharded module under ``module`` holds its full parameters; with
        ``writeback`` changes to them are kept (each rank keeps its block) on exit."""
        groups = [m._fsdp_state.group for m in module.modules()
                  if isinstance(m, FSDPModule) and m._fsdp_state.group is not None]
        if not recurse:  # the outermost only (modules() walks it first)
            groups = groups[:1]
        for g in groups:
            g.start_unshard()
        for g in groups:
            g.finish_unshard()
        try:
            yield
        finally:
            with no_grad():
                for g in groups:
                    if writeback:
                        for fp in g.params:
                            fp.sharded.copy_(fp.take_piece(fp.unsharded.detach()))
                    g.reshard()

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0):
        """Scale the shards' gradients so the whole model's gradient norm is at most ``max_norm``;
        returns that norm (a 0-d tensor; collective: the ranks' partial norms are combined)."""
        norm_type = float(norm_type)
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        with no_grad():
            if math.isinf(norm_type):
                local = max((g.abs().amax().item() for g in grads), default=0.0)
                total = tensor([local])
                dist.all_reduce(total, op=dist.ReduceOp.MAX, group=self.process_group)
                total = total[0]
            else:
                local = sum(((g.abs() ** norm_type).sum().item() for g in grads), 0.0)
                total = tensor([local], dtype=grads[0].dtype if grads else None)
                dist.all_reduce(total, group=self.process_group)  # padding is zero: it adds nothing
                total = total[0] ** (1.0 / norm_type)
            coef = min(max_norm / (total.item() + 1e-6), 1.0)
            for g in grads:
                g.mul_(coef)
        return total
