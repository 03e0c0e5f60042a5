"""The files of a distributed checkpoint: a directory of per-rank data files and one ``.metadata``.

Layout of ``checkpoint_id/``:

* ``__{rank}_{token}.distcp`` — the raw bytes (C order, native byte order) of every tensor
  piece rank ``rank`` wrote in the save named ``token``, back to back;
* ``.metadata`` — JSON: ``{"format": "plugtorch.dcp", "version": 1, "token": ..., "tensors":
  {key: {"dtype", "shape", "chunks": [{"offsets", "sizes", "file", "start", "nbytes"}]}},
  "objects": {key: value}}``. Keys are the state dict's paths joined with ``.``; each chunk
  is a box of the global tensor (its ``offsets`` and ``sizes`` per dimension) stored at
  ``file[start:start + nbytes]``; non-tensor values are JSON (tuples as ``{"__tuple__": [...]}``).

``.metadata`` is the commit point: it is written (``atomic_write``: temporary file, fsync,
rename) only after every rank has fsynced its data file, and names that save's token, so a
save that dies part-way leaves the previous ``.metadata`` and the files it names untouched.
The next successful save removes data files of other tokens.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.ops.creation import from_numpy
from ...core.tensor import Tensor
from ...utils.atomic import atomic_write

FORMAT, VERSION, METADATA = "plugtorch.dcp", 1, ".metadata"


@dataclass
class Shard:
    """One rank's piece of a tensor split across ranks, for :func:`save`/:func:`load`.

    ``tensor``: the local piece; ``offsets``: where it starts in the global tensor, one int
    per dimension (an int means along dim 0, the rest at 0); ``global_shape``: the whole
    tensor's shape; ``process_group``: the ranks it is split over (``full_state_dict`` gathers
    over it; None: the default group). Saving writes each rank's piece from that rank;
    loading fills ``tensor`` with its box of the saved tensor, whatever split it was saved with.
    """

    tensor: Tensor
    offsets: Any
    global_shape: Any
    process_group: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.global_shape = tuple(int(s) for s in self.global_shape)
        ndim = len(self.global_shape)
        if isinstance(self.offsets, int):
            self.offsets = (self.offsets,) + (0,) * (ndim - 1)
        self.offsets = tuple(int(o) for o in self.offsets)
        sizes = tuple(self.tensor.shape)
        if len(self.offsets) != ndim or len(sizes) != ndim or any(
                o < 0 or o + s > g for o, s, g in zip(self.offsets, sizes, self.global_shape)):
            raise ValueError(f"Shard: a piece of shape {list(sizes)} at offsets {list(self.offsets)} does not fit "
                             f"in a tensor of shape {list(self.global_shape)}")


@dataclass
class Metadata:
    """What ``.metadata`` holds (see the module docstring); ``save`` returns it."""

    tensors: dict[str, dict]
    objects: dict[str, Any]
    token: str = ""

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "token": self.token, "tensors": self.tensors,
                "objects": {k: _encode(v) for k, v in self.objects.items()}}


def _encode(v):
    if isinstance(v, tuple):
        return {"__tuple__": [_encode(x) for x in v]}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            return {"__items__": [[_encode(k), _encode(x)] for k, x in v.items()]}
        return {k: _encode(x) for k, x in v.items()}
    return v


def _decode(v):
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(_decode(x) for x in v["__tuple__"])
        if "__items__" in v:
            return {_decode(k) if not isinstance(k, list) else tuple(k): _decode(x) for k, x in v["__items__"]}
        return {k: _decode(x) for k, x in v.items()}
    return v


def check_storable(key: str, value) -> None:
    """Non-tensor values are stored as JSON: plain Python values only."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            check_storable(key, v)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            check_storable(key, k)
            check_storable(key, v)
        return
    raise TypeError(f"plugtorch.distributed.checkpoint.save: {key!r} holds a {type(value).__name__}; a "
                    "checkpoint stores tensors, Shards and plain values (None, bool, int, float, str and "
                    "lists, tuples and dicts of them). Convert it, or save it with plugtorch.save.")


class FileSystemWriter:
    """Writes a checkpoint into the directory ``path`` (torch's FileSystemWriter).

    ``sync_files``: fsync every data file before the commit (default True; the atomicity of a
    save across a crash relies on it). ``overwrite=False``: refuse a directory that already
    holds a checkpoint. ``single_file_per_rank``, ``thread_count``, ``per_thread_copy_ahead``
    and ``cache_staged_state_dict`` are accepted for torch compatibility (one file per rank,
    written by one thread).
    """

    def __init__(self, path, single_file_per_rank: bool = True, sync_files: bool = True, thread_count: int = 1,
                 per_thread_copy_ahead: int = 10_000_000, cache_staged_state_dict: bool = False,
                 overwrite: bool = True) -> None:
        self.path = os.fspath(path)
        self.sync_files, self.overwrite = sync_files, overwrite

    def reset(self, checkpoint_id=None) -> None:
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)

    def prepare(self) -> None:
        """Create the directory (every rank; they may not share a view of it at once)."""
        if not self.overwrite and os.path.exists(os.path.join(self.path, METADATA)):
            raise RuntimeError(f"plugtorch.distributed.checkpoint.save: {self.path} already holds a checkpoint "
                               "and the writer was made with overwrite=False")
        os.makedirs(self.path, exist_ok=True)

    def write_data(self, rank: int, token: str, pieces: list[tuple[str, Tensor, tuple, tuple, str]]) -> list[dict]:
        """Write this rank's ``(key, tensor, offsets, global_shape, dtype)`` pieces; return their chunks."""
        name = f"__{rank}_{token}.distcp"
        chunks, start = [], 0
        with open(os.path.join(self.path, name), "wb") as f:
            for key, t, offsets, shape, dtype in pieces:
                data = np.ascontiguousarray(t.detach().cpu().numpy()).tobytes()
                f.write(data)
                chunks.append({"key": key, "dtype": dtype, "shape": list(shape), "offsets": list(offsets),
                               "sizes": list(t.shape), "file": name, "start": start, "nbytes": len(data)})
                start += len(data)
            f.flush()
            if self.sync_files:
                os.fsync(f.fileno())
        return chunks

    def commit(self, metadata: Metadata) -> None:
        """Rank 0, once every rank's data is on disk: the atomic switch to this save."""
        with atomic_write(os.path.join(self.path, METADATA), "w") as f:
            json.dump(metadata.to_json(), f)

    def clean(self, token: str) -> None:
        """Remove data files of other saves (earlier ones, or saves that died before their commit)."""
        for name in os.listdir(self.path):
            stale_data = name.endswith(".distcp") and not name.endswith(f"_{token}.distcp")
            if stale_data or (name.startswith(f".{METADATA}.") and name.endswith(".tmp")):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.path, name))


class FileSystemReader:
    """Reads a checkpoint from the directory ``path``; each rank reads only the byte ranges of
    the pieces it loads (``bytes_read`` counts them)."""

    def __init__(self, path) -> None:
        self.path = os.fspath(path)
        self.bytes_read = 0

    def reset(self, checkpoint_id=None) -> None:
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self.bytes_read = 0

    def read_metadata(self) -> Metadata:
        where = os.path.join(self.path, METADATA)
        try:
            with open(where) as f:
                raw = json.load(f)
        except FileNotFoundError:
            raise FileNotFoundError(f"plugtorch.distributed.checkpoint.load: {where} does not exist; "
                                    f"{self.path} holds no committed checkpoint") from None
        if raw.get("format") != FORMAT or raw.get("version") != VERSION:
            raise ValueError(f"{where} is not a plugtorch distributed checkpoint of version {VERSION} "
                             f"(format {raw.get('format')!r}, version {raw.get('version')!r})")
        return Metadata(raw["tensors"], {k: _decode(v) for k, v in raw["objects"].items()}, raw["token"])

    def read_box(self, key: str, entry: dict, offsets: tuple, sizes: tuple) -> np.ndarray:
        """The box ``offsets``/``sizes`` of saved tensor ``key``, from the chunks that overlap it."""
        dt = np.dtype(entry["dtype"])
        out = np.empty(sizes, dtype=dt)
        covered = 0
        for c in entry["chunks"]:
            lo = [max(a, b) for a, b in zip(offsets, c["offsets"])]
            hi = [min(a + s, b + t) for a, s, b, t in zip(offsets, sizes, c["offsets"], c["sizes"])]
            if any(h <= lo_ for lo_, h in zip(lo, hi)):
                continue
            piece = self._read_rows(c, dt, lo, hi)
            if len(sizes) == 0:
                out[...] = piece
                covered = 1
                continue
            src = tuple(slice(lo_ - co, h - co) for lo_, h, co in zip(lo[1:], hi[1:], c["offsets"][1:]))
            dst = tuple(slice(lo_ - o, h - o) for lo_, h, o in zip(lo, hi, offsets))
            out[dst] = piece[(slice(None),) + src]
            covered += math.prod(h - lo_ for lo_, h in zip(lo, hi))
        if covered != math.prod(sizes):
            raise RuntimeError(f"plugtorch.distributed.checkpoint.load: the checkpoint's pieces of {key} do not "
                               f"cover offsets {list(offsets)} sizes {list(sizes)}")
        return out

    def _read_rows(self, chunk: dict, dt: np.dtype, lo: list, hi: list) -> np.ndarray:
        """Only the rows (dim 0) of ``chunk`` that the box needs: one contiguous byte range."""
        sizes = chunk["sizes"]
        if len(sizes) == 0:
            r0, r1, row = 0, 1, dt.itemsize
        else:
            row = dt.itemsize * math.prod(sizes[1:])
            r0, r1 = lo[0] - chunk["offsets"][0], hi[0] - chunk["offsets"][0]
        with open(os.path.join(self.path, chunk["file"]), "rb") as f:
            f.seek(chunk["start"] + r0 * row)
            data = f.read((r1 - r0) * row)
        self.bytes_read += len(data)
        if len(data) != (r1 - r0) * row:
            raise RuntimeError(f"plugtorch.distributed.checkpoint.load: {chunk['file']} in {self.path} is "
                               f"truncated ({chunk['key']})")
        arr = np.frombuffer(data, dtype=dt)
        return arr.reshape(()) if len(sizes) == 0 else arr.reshape([r1 - r0] + list(sizes[1:]))


def tensor_from(arr: np.ndarray) -> Tensor:
    return from_numpy(np.array(arr, copy=True))
