"""torch.distributed.checkpoint.state_dict: model and optimizer state dicts keyed by parameter
names (FQNs), the same on every world size, for :func:`~plugtorch.distributed.checkpoint.save`.

A ``DistributedDataParallel`` wrapper's ``module.`` prefix is dropped. Optimizer state is keyed
by the parameter's FQN, and ``param_groups[i]["params"]`` lists FQNs, so the dict loads into an
optimizer built over another rank count. A :class:`~plugtorch.distributed.optim.ZeroRedundancyOptimizer`
gives only the state of the parameters this rank owns (``save`` writes each from its owner) and
loads only those. A model whose ``state_dict()`` holds :class:`~.filesystem.Shard` values (a
parameter split across ranks) gets its optimizer state tensors of the local piece's shape
described by the same Shard layout; ``full_state_dict=True`` gathers every Shard into the whole
tensor on every rank of its group.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ... import distributed as dist
from ...core.grad_mode import no_grad
from ...core.ops.creation import zeros, zeros_like
from ...core.tensor import Tensor
from ...optim.optimizer import Optimizer, _cast_like
from .filesystem import Shard

__all__ = ["StateDictOptions", "get_model_state_dict", "get_optimizer_state_dict", "get_state_dict",
           "set_model_state_dict", "set_optimizer_state_dict", "set_state_dict"]


@dataclass
class StateDictOptions:
    """torch's options. ``full_state_dict``: gather Shards into whole tensors. ``cpu_offload``:
    copy tensors to the CPU (with ``full_state_dict``, only rank 0 keeps them; the others get an
    empty dict, as in torch). ``ignore_frozen_params``: leave out parameters that do not require
    grad. ``strict``: ``set_model_state_dict`` refuses missing or unexpected keys.
    ``keep_submodule_prefixes``: with ``submodules``, keep the FQN prefix.
    ``broadcast_from_rank0`` and ``flatten_optimizer_state_dict`` are not supported."""

    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _options(options: StateDictOptions | None, fn: str) -> StateDictOptions:
    opts = options if options is not None else StateDictOptions()
    for name in ("broadcast_from_rank0", "flatten_optimizer_state_dict"):
        if getattr(opts, name):
            raise NotImplementedError(f"{fn}: StateDictOptions({name}=True) is not supported by plugtorch; "
                                      "leave it False (load on every rank with plugtorch.distributed.checkpoint.load)")
    return opts


def _unwrap(model):
    from ...nn.parallel.distributed import DistributedDataParallel
    while isinstance(model, DistributedDataParallel):
        model = model.module
    return model


def _gather(shard: Shard) -> Tensor:
    """The whole tensor a Shard is a piece of, assembled on every rank of its group."""
    pieces: list = [(shard.offsets, shard.tensor.detach().cpu())]
    pg = shard.process_group
    if dist.is_initialized() and dist.get_world_size(pg) > 1:
        pieces = [None] * dist.get_world_size(pg)
        dist.all_gather_object(pieces, (shard.offsets, shard.tensor.detach().cpu()), group=pg)
    out = zeros(shard.global_shape, dtype=shard.tensor.dtype)
    with no_grad():
        for offsets, t in pieces:
            out[tuple(slice(o, o + s) for o, s in zip(offsets, t.shape))].copy_(t)
    return out.to(device=shard.tensor.device)


def _finish(value, opts: StateDictOptions):
    if isinstance(value, dict):
        return {k: _finish(v, opts) for k, v in value.items()}
    if opts.full_state_dict and isinstance(value, Shard):
        value = _gather(value)
    if opts.cpu_offload:
        if isinstance(value, Tensor):
            return value.detach().cpu()
        if isinstance(value, Shard):
            return Shard(value.tensor.detach().cpu(), value.offsets, value.global_shape, value.process_group)
    return value


def _rank0_only(opts: StateDictOptions) -> bool:
    return opts.full_state_dict and opts.cpu_offload and dist.is_initialized() and dist.get_rank() != 0


def get_model_state_dict(model, *, submodules=None, options: StateDictOptions | None = None) -> dict[str, Any]:
    """``model``'s state dict by FQN (without a DDP wrapper's ``module.``)."""
    opts = _options(options, "get_model_state_dict")
    inner = _unwrap(model)
    sd = dict(inner.state_dict())
    if opts.ignore_frozen_params:
        for name, p in inner.named_parameters():
            if not p.requires_grad:
                sd.pop(name, None)
    if submodules:
        prefixes = [n + "." if n else "" for n, m in inner.named_modules() if m in submodules]
        sd = {(k if opts.keep_submodule_prefixes else k[len(p):]): v
              for k, v in sd.items() for p in prefixes if k.startswith(p)}
    sd = _finish(sd, opts)
    return {} if _rank0_only(opts) else sd


def _optimizers(optimizers) -> list:
    return [optimizers] if isinstance(optimizers, Optimizer) else list(optimizers)


def _local(opt):
    """The optimizer that holds the state: a ZeroRedundancyOptimizer's own partition's."""
    from ..optim import ZeroRedundancyOptimizer
    return opt.optim if isinstance(opt, ZeroRedundancyOptimizer) else opt


def _init_optim_state(optim) -> None:
    """Give a fresh optimizer its state (a zero-gradient step at lr 0), so there are tensors to
    load into, as torch does."""
    if optim.state or any(p.grad is not None for g in optim.param_groups for p in g["params"]):
        return
    params = [p for g in optim.param_groups for p in g["params"] if p.requires_grad]
    if not params:
        return
    for p in params:
        p.grad = zeros_like(p)
    lrs = [g.get("lr") for g in optim.param_groups]
    for g in optim.param_groups:
        if "lr" in g:
            g["lr"] = 0.0
    optim.step()
    for g, lr in zip(optim.param_groups, lrs):
        if lr is not None:
            g["lr"] = lr
    optim.zero_grad(set_to_none=True)


def get_optimizer_state_dict(model, optimizers: Optimizer | Iterable[Optimizer], *, submodules=None,
                             options: StateDictOptions | None = None) -> dict[str, Any]:
    """``{"state": {fqn: {...}}, "param_groups": [{..., "params": [fqn, ...]}]}`` of ``optimizers``."""
    opts = _options(options, "get_optimizer_state_dict")
    inner = _unwrap(model)
    fqn = {id(p): n for n, p in inner.named_parameters()}
    shards = {k: v for k, v in inner.state_dict().items() if isinstance(v, Shard)}
    state: dict[str, Any] = {}
    groups: list[dict] = []
    for opt in _optimizers(optimizers):
        local = _local(opt)
        _init_optim_state(local)
        for p, s in local.state.items():
            name = fqn.get(id(p))
            if name is None:
                raise ValueError("get_optimizer_state_dict: the optimizer holds a parameter that is not a "
                                 "parameter of the model; pass the model the optimizer was built on")
            piece = shards.get(name)
            state[name] = {k: Shard(v, piece.offsets, (piece.global_shape), piece.process_group)
                           if piece is not None and isinstance(v, Tensor) and v.dim() > 0
                           and tuple(v.shape) == tuple(piece.tensor.shape) else v for k, v in s.items()}
        for g in opt.param_groups:
            packed = {k: v for k, v in g.items() if k not in ("params", "param_names")}
            packed["params"] = [fqn[id(p)] for p in g["params"]]
            groups.append(packed)
    out = _finish({"state": state}, opts)
    out["param_groups"] = groups
    return {} if _rank0_only(opts) else out


def get_state_dict(model, optimizers, *, submodules=None, options: StateDictOptions | None = None):
    """``(get_model_state_dict(...), get_optimizer_state_dict(...))``."""
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


def set_model_state_dict(model, model_state_dict: dict[str, Any], *, options: StateDictOptions | None = None):
    """Load an FQN-keyed state dict into ``model`` (its ``load_state_dict``, so the result is
    ``(missing_keys, unexpected_keys)``)."""
    opts = _options(options, "set_model_state_dict")
    return _unwrap(model).load_state_dict(model_state_dict, strict=opts.strict)


def set_optimizer_state_dict(model, optimizers: Optimizer | Iterable[Optimizer], optim_state_dict: dict[str, Any],
                             *, options: StateDictOptions | None = None) -> None:
    """Load what :func:`get_optimizer_state_dict` gave (on this or another world size)."""
    _options(options, "set_optimizer_state_dict")
    from ..optim import ZeroRedundancyOptimizer
    fqn = {id(p): n for n, p in _unwrap(model).named_parameters()}
    saved = optim_state_dict["state"]
    by_param = {name: g for g in optim_state_dict["param_groups"] for name in g["params"]}
    for opt in _optimizers(optimizers):
        local = _local(opt)
        for g in local.param_groups:
            for p in g["params"]:
                s = saved.get(fqn[id(p)])
                if s is not None:
                    local.state[p] = {k: _cast_like(p, k, _value(v)) for k, v in s.items()}
        for g in opt.param_groups:
            names = [fqn[id(p)] for p in g["params"]]
            match = next((by_param[n] for n in names if n in by_param), None)
            if match is None:
                raise ValueError(f"set_optimizer_state_dict: no saved parameter group holds {names[:3]}; the "
                                 "state dict was saved for another model or optimizer")
            g.update({k: v for k, v in match.items() if k not in ("params", "param_names")})
        if isinstance(opt, ZeroRedundancyOptimizer):
            opt._sync_param_groups(opt.param_groups, opt.optim.param_groups)


def _value(v):
    if isinstance(v, Shard):
        v = v.tensor
    return v.detach().clone() if isinstance(v, Tensor) else v


def set_state_dict(model, optimizers, *, model_state_dict: dict[str, Any], optim_state_dict: dict[str, Any],
                   options: StateDictOptions | None = None):
    """``set_model_state_dict`` then ``set_optimizer_state_dict``; returns the model's incompatible keys."""
    keys = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return keys
