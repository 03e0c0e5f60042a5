"""``fully_shard`` (torch's FSDP2) over plugtorch.distributed: the hooks and their order.

``fully_shard(module)`` shards the parameters the module owns (those not already owned by
a fully_shard'ed submodule; see ``_param_group``) and turns the module into an
:class:`FSDPModule`. Around each forward and backward of such a module:

- before forward: wait for its all-gather (or post it now), then post the next module's
  all-gather in last iteration's forward order (prefetch), so it travels while this one
  computes (the MPI plugin's progress thread moves posted collectives along);
- after forward: free the full parameters (``reshard_after_forward``; the root keeps them,
  as backward starts with it), and hook the outputs' gradients;
- when an output's gradient arrives (the module's backward is next): gather again and
  prefetch the module that runs backward after it (reverse forward order);
- when every parameter's gradient has accumulated: post the reduce-scatter (average) of the
  gradients, free them and the full parameters. When the last module of the backward has
  posted its reduction, the root waits for all and writes each shard's ``.grad``, so
  ``optimizer.step()`` (built on the sharded parameters) sees the averaged gradient.

The outermost FSDPModule that runs a forward is the root: it finds the others below it.
Every rank posts the same collectives in the same order because its hooks follow the
module order and the autograd graph's, which are the same on every rank.
"""
from __future__ import annotations

import weakref

from ... import distributed as dist
from ...core.grad_mode import is_grad_enabled
from ...core.tensor import Tensor
from ...nn.modules.module import Module
from ._param_group import FSDPParamGroup
from ._policies import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy

_STATE = "_fsdp_state"
_ALL_STATES: weakref.WeakSet = weakref.WeakSet()  # full_tensor's way from a shard to its module


class FSDPState:
    """What ``fully_shard`` keeps for one module; the root's also drives the iteration."""

    def __init__(self, module: Module, group: FSDPParamGroup | None, pg, reshard_after_forward) -> None:
        self.module = module
        self.group = group
        self.pg = pg
        self.reshard_after_forward = reshard_after_forward  # None: True, except for the root
        self.root: FSDPState | None = None
        self.states: list[FSDPState] = []  # the root's: every state below it, itself first
        self.order: list[FSDPState] = []  # the root's: this iteration's forward order
        self.last_order: list[FSDPState] = []
        self.forward_prefetch: list[FSDPState] | None = None  # set_modules_to_forward_prefetch
        self.backward_prefetch: list[FSDPState] | None = None
        self.pending: list[FSDPState] = []  # the root's: modules whose gradients are still to come
        self.reducing: list[FSDPState] = []  # the root's: reductions posted this backward
        self.backward_started = False
        if group is not None:
            group.on_grads_ready = self._grads_ready
        _ALL_STATES.add(self)

    @property
    def is_root(self) -> bool:
        return self.root is self

    def _reshards_after_forward(self) -> bool:
        if self.reshard_after_forward is None:
            return not self.is_root
        return bool(self.reshard_after_forward)

    # -- forward -------------------------------------------------------------------------
    def _lazy_init(self) -> None:
        """The first FSDPModule to run forward with no root around becomes the root."""
        if self.root is not None:
            return
        self.root = self
        self.states = [m._fsdp_state for m in self.module.modules() if isinstance(m, FSDPModule)]
        for s in self.states:
            if s.root is not None and s is not self:
                raise RuntimeError(
                    f"fully_shard: {type(s.module).__name__} already ran forward as a root before "
                    f"{type(self.module).__name__} was fully_shard'ed; apply fully_shard to submodules "
                    "first, then to the root, before the first forward")
            s.root = self

    def pre_forward(self, module, args, kwargs):
        self._lazy_init()
        root = self.root
        assert root is not None, "set by _lazy_init"
        if self.is_root:
            root._start_iteration()
        root.order.append(self)
        if self.group is not None:
            self.group.finish_unshard()
        for nxt in self._next(root.last_order, self.forward_prefetch, root.order):
            if nxt.group is not None:
                nxt.group.start_unshard()
        return None

    def post_forward(self, module, args, kwargs, output):
        root = self.root
        assert root is not None, "pre_forward ran"
        if self._reshards_after_forward() and self.group is not None:
            self.group.reshard()
        if is_grad_enabled() and self.group is not None and self.group.expected:
            if self not in root.pending:
                root.pending.append(self)
            for t in _tensors(output):
                if t.requires_grad:
                    t.register_hook(self._pre_backward)
        if self.is_root:
            root.last_order = list(root.order)
        return None

    def _start_iteration(self) -> None:
        missing = [name for s in self.pending if s.group is not None for name in s.group.missing_grads()]
        if missing and self.backward_started:
            self.pending = []
            raise RuntimeError(
                f"fully_shard: the previous backward produced no gradient for {missing} (rank "
                f"{self.pg.rank()}), so their modules' gradients were never reduced; every parameter of a "
                "fully_shard'ed module must take part in the loss (freeze the others with requires_grad_(False) "
                "or pass them as ignored_params)")
        self.pending = []
        self.order = []
        self.backward_started = False

    @staticmethod
    def _next(order: list[FSDPState], explicit: list[FSDPState] | None, done: list[FSDPState]):
        """The modules to prefetch after the last of ``done``: ``explicit`` if set, else the
        next one in ``order``."""
        if explicit is not None:
            return explicit
        me = done[-1]
        if me in order:
            i = order.index(me)
            return order[i + 1:i + 2]
        return []

    # -- backward ------------------------------------------------------------------------
    def _pre_backward(self, grad):
        root = self.root
        assert root is not None, "forward ran"
        root.backward_started = True
        if self.group is not None:
            self.group.finish_unshard()
            reverse = list(reversed(root.last_order))
            for nxt in self._next(reverse, self.backward_prefetch, [self]):
                if nxt.group is not None and nxt in root.pending:
                    nxt.group.start_unshard()
        return None

    def _grads_ready(self, group: FSDPParamGroup) -> None:
        root = self.root
        if root is None or self not in root.pending:  # a backward FSDP did not see forward
            group.finish_reduce()
            return
        root.pending.remove(self)
        if group.reduce is not None:
            root.reducing.append(self)
            # Each reduction in flight holds a module's full gradients: finish the older ones
            # while the newest travels (one overlaps the next module's backward, as torch's does).
            while len(root.reducing) > 1:
                older = root.reducing.pop(0).group
                assert older is not None, "only modules with parameters reduce"
                older.finish_reduce()
        if not root.pending:
            for s in root.reducing:
                assert s.group is not None, "only modules with parameters reduce"
                s.group.finish_reduce()
            root.reducing = []
            root.backward_started = False


def _tensors(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


class FSDPModule:
    """The methods a module gains from ``fully_shard`` (its class becomes ``FSDP<Class>``)."""

    _fsdp_state: FSDPState

    def unshard(self, async_op: bool = False):
        """Gather this module's full parameters now (they stay until :meth:`reshard`). With
        ``async_op=True`` the all-gather is posted and a handle with ``wait()`` returned."""
        group = self._fsdp_state.group
        if group is None:
            return None
        group.start_unshard()
        if async_op:
            return UnshardHandle(group)
        group.finish_unshard()
        return None

    def reshard(self) -> None:
        """Free this module's full parameters; the shards are its parameters again."""
        if self._fsdp_state.group is not None:
            self._fsdp_state.group.reshard()

    def _fsdp_states(self, recurse: bool):
        if not recurse:
            return [self._fsdp_state]
        return [m._fsdp_state for m in self.modules() if isinstance(m, FSDPModule)]  # type: ignore[attr-defined]

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """The module's state dict; while sharded, each of its parameters is a
        ``plugtorch.distributed.checkpoint.Shard``: this rank's rows, where they start and the
        whole shape, so ``distributed.checkpoint`` saves and loads it on any number of ranks
        (torch's FSDP2 gives DTensors there). ``fsdp.full_state_dict`` gives whole tensors."""
        sd = super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)  # type: ignore[misc]
        group = self._fsdp_state.group
        if group is None or group.unsharded:
            return sd
        from ..checkpoint.filesystem import Shard
        pg = None if group.pg is dist._group(None) else group.pg  # None (the world) pickles
        for fp in group.params:
            for name in fp.fqns:
                key = prefix + name
                if key in sd:
                    sd[key] = Shard(sd[key], (fp.first_row,) + (0,) * (len(fp.shape) - 1), fp.shape, pg)
        return sd

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Loads what :meth:`state_dict` gave (a Shard loads its piece into this rank's rows)."""
        from ..checkpoint.filesystem import Shard
        plain = {k: v.tensor if isinstance(v, Shard) else v for k, v in state_dict.items()}
        return super().load_state_dict(plain, strict=strict, assign=assign)  # type: ignore[misc]

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *, recurse: bool = True) -> None:
        """False: backward accumulates full gradients locally without reduce-scatter (gradient
        accumulation); the next backward with True reduces what has accumulated."""
        for s in self._fsdp_states(recurse):
            if s.group is not None:
                s.group.reduce_grads = bool(requires_gradient_sync)

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse: bool = True) -> None:
        if not isinstance(reshard_after_forward, bool):
            raise ValueError(f"set_reshard_after_forward: expects a bool, got {reshard_after_forward!r}")
        for s in self._fsdp_states(recurse):
            s.reshard_after_forward = reshard_after_forward

    def set_modules_to_forward_prefetch(self, modules: list) -> None:
        """After this module's all-gather, post those of ``modules`` (instead of the next one)."""
        self._fsdp_state.forward_prefetch = [_state_of(m, "set_modules_to_forward_prefetch") for m in modules]

    def set_modules_to_backward_prefetch(self, modules: list) -> None:
        """Before this module's backward, post the all-gathers of ``modules``."""
        self._fsdp_state.backward_prefetch = [_state_of(m, "set_modules_to_backward_prefetch") for m in modules]


class UnshardHandle:
    """``FSDPModule.unshard(async_op=True)``'s handle: ``wait()`` makes the parameters full."""

    def __init__(self, group: FSDPParamGroup) -> None:
        self._group = group

    def wait(self) -> None:
        self._group.finish_unshard()


def _state_of(module, fn: str) -> FSDPState:
    if not isinstance(module, FSDPModule):
        raise ValueError(f"{fn}: expects FSDPModules (modules fully_shard was applied to), got "
                         f"{type(module).__name__}")
    return module._fsdp_state


def _process_group(mesh):
    """The group to shard over: the world, or a 1-D ``DeviceMesh``'s group."""
    if mesh is None:
        return dist._group(None)
    from ..device_mesh import DeviceMesh
    if not isinstance(mesh, DeviceMesh):
        raise ValueError(f"fully_shard: mesh must be a plugtorch.distributed.DeviceMesh (or None for the whole "
                         f"world), got {type(mesh).__name__}")
    if mesh.ndim != 1:
        raise NotImplementedError(f"fully_shard: only a 1-D mesh is supported (plain FSDP), got a {mesh.ndim}-D "
                                  "mesh; HSDP's 2-D (replicate, shard) mesh is not; pass mesh[name] for one dim")
    if mesh.get_coordinate() is None:
        raise ValueError(f"fully_shard: this rank ({dist.get_rank()}) is not in the mesh {mesh}; every rank "
                         "that runs the module must be")
    return mesh.get_group()


_CLASSES: dict[type, type] = {}


def _fsdp_class(cls: type) -> type:
    """``FSDP<cls>``, a subclass of FSDPModule and ``cls``, made once per class (as torch's)."""
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
    return _CLASSES[cls]


def fully_shard(module, *, mesh=None, reshard_after_forward: bool | None = None, shard_placement_fn=None,
                mp_policy: MixedPrecisionPolicy | None = None, offload_policy: OffloadPolicy | None = None,
                ignored_params: set | None = None):
    """Shard ``module``'s parameters across the ranks of ``mesh`` (default: the whole world).

    Apply it to each block first, then to the root; build the optimizer afterwards, on
    ``module.parameters()`` (the shards). ``reshard_after_forward`` (default: True except for
    the root) frees the full parameters after forward and gathers them again for backward.
    Returns ``module``, now also an :class:`FSDPModule`.
    """
    if not isinstance(module, Module):
        raise TypeError(f"fully_shard: expects a plugtorch.nn.Module, got {type(module).__name__}")
    if isinstance(module, FSDPModule):
        raise ValueError(f"fully_shard: {type(module).__name__} is already fully_shard'ed")
    if reshard_after_forward is not None and not isinstance(reshard_after_forward, bool):
        raise NotImplementedError(f"fully_shard: reshard_after_forward={reshard_after_forward!r}: only True, "
                                  "False or None are supported (not resharding to a smaller group)")
    if shard_placement_fn is not None:
        raise NotImplementedError("fully_shard: shard_placement_fn is not supported; parameters are "
                                  "sharded along dim 0")
    (mp_policy or MixedPrecisionPolicy())._check(module)
    if isinstance(offload_policy, CPUOffloadPolicy):
        offload_policy._check(module)
    pg = _process_group(mesh)
    ignored = {id(p) for p in ignored_params or ()}
    owned: set[int] = set()
    for m in module.modules():
        if m is not module and isinstance(m, FSDPModule) and m._fsdp_state.group is not None:
            owned.update(id(fp.sharded) for fp in m._fsdp_state.group.params)
    named: dict[int, tuple[str, list, Tensor]] = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        for name, p in m._parameters.items():
            if p is None or id(p) in owned or id(p) in ignored:
                continue
            fqn = f"{prefix}.{name}" if prefix else name
            entry = named.setdefault(id(p), (fqn, [], p))
            entry[1].append((m, name, fqn))
    group = FSDPParamGroup(list(named.values()), pg) if named else None
    module.__class__ = _fsdp_class(type(module))
    state = FSDPState(module, group, pg, reshard_after_forward)
    object.__setattr__(module, _STATE, state)
    module.register_forward_pre_hook(state.pre_forward, prepend=True, with_kwargs=True)
    module.register_forward_hook(state.post_forward, with_kwargs=True)
    return module
