"""Reading and loading the full parameters of a fully_shard'ed model.

torch's FSDP2 parameters are DTensors, whose ``full_tensor()`` gathers them, and
``torch.distributed.checkpoint.state_dict`` offers full state dicts. plugtorch has no
DTensor: a sharded parameter is a plain ``Parameter`` holding this rank's rows, and
``module.state_dict()`` holds ``Shard``s of them (for distributed.checkpoint). These functions
give the full tensors, in the parameters' own shapes and names (collective: call them on every
rank).
"""
from __future__ import annotations

from ...core.grad_mode import no_grad
from ._fully_shard import FSDPModule


def _managed(module):
    """(state-dict key, FSDPParam, group) of every sharded parameter under ``module``."""
    out = []
    for prefix, m in module.named_modules():
        if isinstance(m, FSDPModule) and m._fsdp_state.group is not None:
            group = m._fsdp_state.group
            for fp in group.params:
                out.append((f"{prefix}.{fp.fqn}" if prefix else fp.fqn, fp, group))
    return out


def full_tensor(param):
    """The full value of a parameter ``fully_shard`` sharded (``param``: one of the module's
    parameters, i.e. a shard), gathered from every rank, as DTensor.full_tensor() is."""
    for owner in _owners_of(param):
        group = owner._fsdp_state.group
        for fp in group.params:
            if fp.sharded is param:
                was = group.unsharded
                group.finish_unshard()
                full = fp.unsharded.detach().clone()
                if not was:
                    group.reshard()
                return full
    raise ValueError("full_tensor: this tensor is not a parameter sharded by fully_shard (pass one of "
                     "module.parameters() of an FSDPModule, outside its forward and backward)")


def _owners_of(param):
    from ._fully_shard import _ALL_STATES
    return [s.module for s in list(_ALL_STATES) if s.group is not None
            and any(fp.sharded is param for fp in s.group.params)]


def full_state_dict(module, *, rank0_only: bool = False) -> dict:
    """``module``'s state dict with full parameters (torch's ``get_model_state_dict`` with
    ``StateDictOptions(full_state_dict=True)``); with ``rank0_only`` (torch's ``cpu_offload``
    habit of keeping it on rank 0), the other ranks get ``{}``. Collective."""
    states = [m._fsdp_state for m in module.modules() if isinstance(m, FSDPModule)]
    was = [s.group is None or s.group.unsharded for s in states]
    for s in states:  # post every all-gather first: they travel together
        if s.group is not None:
            s.group.start_unshard()
    for s in states:
        if s.group is not None:
            s.group.finish_unshard()
    sd = module.state_dict()  # the full tensors are the module's now; detached views keep them
    for s, w in zip(states, was):
        if s.group is not None and not w:
            s.group.reshard()
    if rank0_only and states and states[0].pg.rank() != 0:
        return {}
    return sd


def load_full_state_dict(module, state_dict: dict, strict: bool = True):
    """Load a full state dict (every rank passes the same one) into a fully_shard'ed module:
    each rank keeps its rows of each parameter. Returns load_state_dict's (missing, unexpected)."""
    managed = _managed(module)
    rest = dict(state_dict)
    missing = []
    with no_grad():
        for key, fp, group in managed:
            value = rest.pop(key, None)
            if value is None:
                missing.append(key)
                continue
            if tuple(value.shape) != fp.shape:
                raise RuntimeError(f"load_full_state_dict: size mismatch for {key}: copying a param with shape "
                                   f"{list(value.shape)}, the parameter in the model has shape {list(fp.shape)}")
            fp.sharded.copy_(fp.take_piece(value.detach()))
            if group.unsharded:
                fp.unsharded.copy_(value.reshape(fp.shape))
    result = module.load_state_dict(rest, strict=False)
    shard_keys = {k for k, _, _ in managed}
    missing += [k for k in result.missing_keys if k not in shard_keys]
    if strict and (missing or result.unexpected_keys):
        raise RuntimeError(f"load_full_state_dict: missing keys {missing}, unexpected keys "
                           f"{list(result.unexpected_keys)}")
    return missing, list(result.unexpected_keys)
