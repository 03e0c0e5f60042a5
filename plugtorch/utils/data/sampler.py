"""Samplers: the order in which a DataLoader visits indices, and how it groups them.

Random orders are drawn on the host backend (``host_device()``), as torch's samplers
draw on the CPU, whatever the default backend is: the indices are wanted as Python
ints, so drawing them on a device would cost a device sync per epoch, and the
sequence for a seed would depend on the backend in use.
"""
from __future__ import annotations

import itertools

from ...core.device import current_backend
from ...core.dtypes import int64
from ...core.ops.creation import arange, randint, randperm
from ...core.plugins import get_registry
from ...core.random import Generator


def host_device() -> str:
    """The backend random orders are drawn on: the one answering to ``"cpu"``, else the
    first available host-memory backend, else the default backend."""
    reg = get_registry()
    cpu = reg.backends.get(reg.resolve_name("cpu"))
    if cpu is not None and cpu.available and cpu.host_memory:
        return cpu.name
    for b in reg.backends.values():
        if b.available and b.host_memory:
            return b.name
    return current_backend()


class Sampler:
    """An iterable over dataset indices (or over lists of them, for a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)

    def _index_batches(self, size: int, drop_last: bool):
        """BatchSampler's batches of ``__iter__``'s indices, sliced from one host tensor."""
        yield from _slices(arange(len(self.data_source), dtype=int64, device=host_device()), size, drop_last)


def _fresh_generator(generator, device):
    """``generator`` itself, or a new one seeded from the default generator (as torch does)."""
    if generator is not None:
        return generator
    seed = int(randint(0, 2 ** 62, (), device=device).item())
    return Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A random permutation each pass (or ``num_samples`` draws with replacement).

    With a seeded ``generator`` the sequence of epochs is reproducible, and the
    generator's state (``get_state()``) is what a checkpoint saves to resume it.
    """

    def __init__(self, data_source, replacement: bool = False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        host = host_device()
        gen = _fresh_generator(self.generator, host)
        if self.replacement:
            yield from randint(0, n, (self.num_samples,), generator=gen, device=host).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=gen, device=host).tolist()
        yield from randperm(n, generator=gen, device=host).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples

    def _index_batches(self, size: int, drop_last: bool):
        """BatchSampler's batches of ``__iter__``'s indices, sliced from its permutation, with
        its draws from the generator at the same points; None with replacement or num_samples."""
        if self.replacement or self._num_samples is not None:
            return None
        return self._permutation_batches(size, drop_last)

    def _permutation_batches(self, size: int, drop_last: bool):
        host = host_device()
        n = len(self.data_source)
        gen = _fresh_generator(self.generator, host)
        order = randperm(n, generator=gen, device=host)
        full = n // size
        yield from _slices(order[:full * size], size, True)
        # __iter__'s last permutation, cut to no samples, is drawn when it runs out: while the
        # last, short batch is filled, or when the batch after the last full one is asked for
        randperm(n, generator=gen, device=host)
        if full * size < n and not drop_last:
            yield order[full * size:]


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order each pass, drawn from ``generator`` (by default
    the default generator itself, as torch's is)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator, device=host_device()).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Group the indices of ``sampler`` into lists of ``batch_size`` (the last may be short)."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        indices, size = iter(self.sampler), self.batch_size
        while True:  # islice fills each batch in C: this runs once per sample of every epoch
            batch = list(itertools.islice(indices, size))
            if len(batch) < size and (not batch or self.drop_last):
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def _slices(order, size: int, drop_last: bool):
    n = order.shape[0]
    stop = n - n % size if drop_last else n
    for start in range(0, stop, size):
        yield order[start:start + size]


def index_tensor_batches(batch_sampler):
    """``batch_sampler``'s batches as int64 index tensors on the host backend, or None.

    Iterating a BatchSampler hands out a Python int per sample: 25-30 us of a 128-row batch
    whose gather from a tensor dataset takes 45. Where it is a plain BatchSampler over a
    sampler whose own class defines ``_index_batches`` (SequentialSampler, RandomSampler,
    DistributedSampler), the same batches come as slices of one tensor, with the same draws
    from the generators. A subclass may change the order, so it gets None unless it defines
    ``_index_batches`` too."""
    if type(batch_sampler) is not BatchSampler:
        return None
    s = batch_sampler.sampler
    if "_index_batches" not in vars(type(s)):
        return None
    return s._index_batches(batch_sampler.batch_size, batch_sampler.drop_last)
