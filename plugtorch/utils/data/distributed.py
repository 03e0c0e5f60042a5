"""``DistributedSampler``: each rank iterates over its own share of a dataset.

All ranks shuffle with the same seed (``seed + epoch``), pad (or drop) the index
list to a multiple of the world size, and take every ``num_replicas``-th index
starting at their rank, so the shares are disjoint and of equal length and
together cover the dataset once per epoch (torch.utils.data.DistributedSampler).
The shuffle is drawn on the host backend, so every rank draws the same order
whatever backend it computes on.
"""
from __future__ import annotations

import math

from ... import distributed as dist
from ...core.dtypes import int64
from ...core.ops.creation import arange, randperm
from ...core.ops.shape import cat
from ...core.random import Generator
from .sampler import Sampler, _slices, host_device


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler needs num_replicas and rank, or an initialised "
                                   "process group: call plugtorch.distributed.init() first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        return iter(self._order().tolist())

    def __len__(self) -> int:
        return self.num_samples

    def _order(self):
        """This rank's indices for the epoch, as one int64 tensor on the host backend: the
        shuffle (or 0..n-1), repeated to total_size (or cut to it, with drop_last), then every
        num_replicas-th from this rank on."""
        n = len(self.dataset)
        host = host_device()
        if self.shuffle:
            g = Generator()
            g.manual_seed(self.seed + self.epoch)
            order = randperm(n, generator=g, device=host)
        else:
            order = arange(n, dtype=int64, device=host)
        if self.total_size > n:  # padding: the list repeated, cut below
            order = cat([order] * (1 + math.ceil((self.total_size - n) / n)))
        return order[self.rank:self.total_size:self.num_replicas]

    def _index_batches(self, size: int, drop_last: bool):
        """BatchSampler's batches of ``__iter__``'s indices, sliced from ``_order()``."""
        yield from _slices(self._order(), size, drop_last)

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``__iter__`` use a new shuffle (the same one on every rank)."""
        self.epoch = epoch
