"""torch.distributed.checkpoint (DCP) for plugtorch: every rank saves and loads its part.

``save(state_dict, checkpoint_id=dir)`` writes a nested state dict of tensors, :class:`Shard`
pieces (a tensor split across ranks, e.g. along dim 0 as ZeRO/FSDP keep it) and plain values:
each piece of a split tensor is written by the rank holding it, and a tensor or value that
several ranks hold (replicated) by the lowest of them. ``load(state_dict, checkpoint_id=dir)``
fills ``state_dict`` in place: tensors are copied into, Shards get their box of the saved
tensor, other values are replaced. A checkpoint saved on N ranks loads on any number of
ranks, each reading only the bytes of the pieces it needs. Top-level values with
``state_dict``/``load_state_dict`` (a model, an optimizer) are saved and loaded through them.
The file format and its crash safety are described in :mod:`.filesystem`; the helpers that
give models and optimizers keys that do not depend on the world size are in :mod:`.state_dict`.
"""
from __future__ import annotations

import math
import secrets
import warnings
from typing import Any

from ... import distributed as dist
from ...core.grad_mode import no_grad
from ...core.tensor import Tensor
from .filesystem import FileSystemReader, FileSystemWriter, Metadata, Shard, check_storable, tensor_from

__all__ = ["FileSystemReader", "FileSystemWriter", "Metadata", "Shard", "load", "save"]


def _is_stateful(v) -> bool:
    return callable(getattr(v, "state_dict", None)) and callable(getattr(v, "load_state_dict", None))


def _flatten(obj, prefix: str, out: dict, where: dict) -> None:
    """``key -> leaf`` for every tensor, Shard or plain value, and ``key -> (container, index)``."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for k, v in items:
        key = f"{prefix}{k}"
        if isinstance(v, (dict, list)) and len(v) > 0:
            _flatten(v, key + ".", out, where)
            continue
        if key in out:
            raise ValueError(f"plugtorch.distributed.checkpoint: two entries of the state dict are both named "
                             f"{key!r} once their paths are joined with '.'; rename one")
        out[key], where[key] = v, (obj, k)


def _setup(storage, checkpoint_id, cls):
    if storage is not None:
        storage.reset(checkpoint_id)
        return storage
    if not checkpoint_id:
        raise RuntimeError("`checkpoint_id` must be specified if storage_reader/storage_writer is None.")
    return cls(checkpoint_id)


def _group(process_group, fn: str):
    if not dist.is_initialized():
        warnings.warn("torch.distributed is disabled, unavailable or uninitialized, assuming the intent is "
                      f"to {fn} in a single process.", stacklevel=3)
        return None
    pg = dist._groups.resolve(process_group, fn)
    return pg if pg is not None and pg.size() > 1 else None


def _all_gather(pg, obj) -> list:
    if pg is None:
        return [obj]
    out = [None] * pg.size()
    dist.all_gather_object(out, obj, group=pg)
    return out


def save(state_dict: dict[str, Any], *, checkpoint_id=None, storage_writer=None, planner=None,
         process_group=None, no_dist: bool = False, use_collectives: bool = True) -> Metadata:
    """Save ``state_dict`` into the directory ``checkpoint_id`` (or ``storage_writer``'s),
    every rank of ``process_group`` together (collective). Returns the metadata written.

    ``planner`` must be None (plugtorch has one plan: see the module docstring). The save is
    atomic: if any rank dies before it completes, the directory still holds the previous
    checkpoint, loadable as before.
    """
    if planner is not None:
        raise ValueError("plugtorch.distributed.checkpoint.save: custom planners are not supported; pass planner=None")
    writer = _setup(storage_writer, checkpoint_id, FileSystemWriter)
    pg = None if no_dist else _group(process_group, "save")
    rank = 0 if pg is None else pg.rank()
    flat: dict[str, Any] = {}
    _flatten({k: v.state_dict() if _is_stateful(v) else v for k, v in state_dict.items()}, "", flat, {})
    kinds = {}
    for key, v in flat.items():
        if isinstance(v, Shard):
            kinds[key] = ("shard", v.tensor.dtype.name, v.global_shape)
        elif isinstance(v, Tensor):
            kinds[key] = ("tensor", v.dtype.name, tuple(v.shape))
        else:
            check_storable(key, v)
            kinds[key] = ("object", None, None)
    writer.prepare()
    token = secrets.token_hex(8) if rank == 0 else None
    everyone = _all_gather(pg, (token, kinds))
    token = everyone[0][0]
    owner: dict[str, int] = {}
    for r, (_, theirs) in enumerate(everyone):
        for key, kind in theirs.items():
            first = everyone[owner[key]][1][key] if key in owner else None
            if first is not None and (first[0] == "shard") != (kind[0] == "shard"):
                raise ValueError(f"plugtorch.distributed.checkpoint.save: {key!r} is a Shard on rank {owner[key]} "
                                 f"but not on rank {r}; a split tensor is a Shard on every rank that holds a piece")
            owner.setdefault(key, r)
    pieces, objects = [], {}
    for key, v in flat.items():
        if isinstance(v, Shard):
            if v.tensor.numel() > 0:
                pieces.append((key, v.tensor, v.offsets, v.global_shape, v.tensor.dtype.name))
        elif owner[key] == rank:
            if isinstance(v, Tensor):
                pieces.append((key, v, (0,) * v.dim(), tuple(v.shape), v.dtype.name))
            else:
                objects[key] = v
    chunks = writer.write_data(rank, token, pieces)
    gathered = _all_gather(pg, (chunks, objects))
    metadata = Metadata({}, {}, token)
    for key, kind in sorted(((k, kd) for _, ks in everyone for k, kd in ks.items())):
        if kind[0] != "object":
            metadata.tensors.setdefault(key, {"dtype": kind[1], "shape": list(kind[2]), "chunks": []})
    for chunks_r, objects_r in gathered:
        metadata.objects.update(objects_r)
        for c in chunks_r:
            metadata.tensors[c.pop("key")]["chunks"].append(c)
    for key, entry in metadata.tensors.items():
        _check_cover(key, entry)
    if rank == 0:
        writer.commit(metadata)
        writer.clean(token)
    if pg is not None:
        dist.barrier(group=pg)  # no rank returns before the checkpoint is committed
    return metadata


def _check_cover(key: str, entry: dict) -> None:
    """The pieces of a split tensor must tile it exactly (checked on every rank alike)."""
    shape = entry["shape"]
    boxes = entry["chunks"]
    for c in boxes:
        if c["shape"] != shape or c["dtype"] != entry["dtype"]:
            raise ValueError(f"plugtorch.distributed.checkpoint.save: the pieces of {key!r} disagree: one says "
                             f"{c['dtype']}{c['shape']}, another {entry['dtype']}{shape}")
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if all(max(x, y) < min(x + s, y + t) for x, s, y, t in
                   zip(a["offsets"], a["sizes"], b["offsets"], b["sizes"])):
                raise ValueError(f"plugtorch.distributed.checkpoint.save: two pieces of {key!r} overlap (at "
                                 f"offsets {a['offsets']} and {b['offsets']})")
    total = sum(math.prod(c["sizes"]) for c in boxes)
    if total != math.prod(shape):
        raise ValueError(f"plugtorch.distributed.checkpoint.save: the pieces of {key!r} hold {total} of its "
                         f"{math.prod(shape)} elements (shape {shape}); every element must be on some rank")
    for c in boxes:
        c.pop("shape")
        c.pop("dtype")


def load(state_dict: dict[str, Any], *, checkpoint_id=None, storage_reader=None, planner=None,
         process_group=None, no_dist: bool = False) -> None:
    """Fill ``state_dict`` in place from the checkpoint ``checkpoint_id`` (or ``storage_reader``'s),
    saved on any number of ranks; every key of ``state_dict`` must be in it."""
    if planner is not None:
        raise ValueError("plugtorch.distributed.checkpoint.load: custom planners are not supported; pass planner=None")
    reader = _setup(storage_reader, checkpoint_id, FileSystemReader)
    if not no_dist:
        _group(process_group, "load")
    metadata = reader.read_metadata()
    stateful = {k: v.state_dict() for k, v in state_dict.items() if _is_stateful(v)}
    flat: dict[str, Any] = {}
    where: dict[str, tuple] = {}
    view = {k: stateful.get(k, v) for k, v in state_dict.items()}
    _flatten(view, "", flat, where)
    with no_grad():
        for key, v in flat.items():
            if isinstance(v, (Tensor, Shard)):
                _load_tensor(reader, metadata, key, v)
            elif key in metadata.objects:
                container, index = where[key]
                container[index] = metadata.objects[key]
            else:
                raise RuntimeError(f"Missing key in checkpoint state_dict: {key}.")
    for k, v in view.items():
        if k in stateful:
            state_dict[k].load_state_dict(v)
        else:
            state_dict[k] = v  # a top-level value replaced in the view


def _load_tensor(reader, metadata: Metadata, key: str, v) -> None:
    entry = metadata.tensors.get(key)
    if entry is None:
        raise RuntimeError(f"Missing key in checkpoint state_dict: {key}.")
    t = v.tensor if isinstance(v, Shard) else v
    shape = v.global_shape if isinstance(v, Shard) else tuple(t.shape)
    if list(shape) != entry["shape"]:
        raise RuntimeError(f"Size mismatch between saved {entry['shape']} and current: {list(shape)} for {key}")
    offsets = v.offsets if isinstance(v, Shard) else (0,) * t.dim()
    if t.numel() == 0:
        return
    t.copy_(tensor_from(reader.read_box(key, entry, tuple(offsets), tuple(t.shape))).to(device=t.device))
