"""DataLoader: draw indices from a sampler, fetch the samples, collate them into batches."""
from __future__ import annotations

import multiprocessing
import warnings

from ...core.ops.creation import randint
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler, host_device, index_tensor_batches


class DataLoader:
    """Iterate over ``dataset`` in batches, in the main process or ``num_workers`` processes.

    Like ``torch.utils.data.DataLoader``: ``shuffle=True`` draws a new permutation
    each epoch from ``generator`` (seed it for reproducible runs), ``sampler`` or
    ``batch_sampler`` replace the default index order, and ``collate_fn`` builds a
    batch from a list of samples. With the default collate, a dataset that offers
    ``get_batch(indices)`` (TensorDataset, MNIST, their Subsets) is batched by
    indexing whole tensors at once.

    ``num_workers > 0`` builds batches in worker processes (see ``workers.py``): worth
    it when a sample costs real work (per-image transforms, decoding files), not for
    a tensor dataset, whose batch is one indexing op. ``pin_memory`` is accepted and has
    no effect: no backend offers page-locked host memory.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            if num_workers == 0:
                raise ValueError("multiprocessing_context can only be used with multi-process "
                                 f"loading (num_workers > 0), but got num_workers={num_workers}")
            if isinstance(multiprocessing_context, str):
                methods = multiprocessing.get_all_start_methods()
                if multiprocessing_context not in methods:
                    raise ValueError("multiprocessing_context option should specify a valid start "
                                     f"method in {methods!r}, but got "
                                     f"multiprocessing_context={multiprocessing_context!r}")
                multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle, "
                             "sampler and batch_sampler options (the dataset decides the order), "
                             f"got shuffle={shuffle}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if not self._iterable:  # a stream has no indices: it is batched as it comes
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        self._workers = None  # the persistent workers' iterator, kept across epochs
        self._auto_collation = (batch_size is not None if self._iterable
                                else batch_sampler is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
            self._fast_batch = self._auto_collation and callable(getattr(dataset, "get_batch", None))
        else:
            self._fast_batch = False
        self.collate_fn = collate_fn

    def __iter__(self):
        # Every epoch draws the workers' base seed first, with or without workers to seed, and
        # the sampler draws its order after it: a sampler sharing the generator (shuffle=True,
        # or the default generator) then sees the same stream whatever num_workers is, and
        # leaves the generator where it would without workers. torch draws it per iterator.
        self._warn_pin_memory()
        base_seed = _draw_seed(self.generator)
        if self.num_workers == 0:
            return self._batches()
        from .workers import MultiProcessIter
        if self._workers is not None:
            # Persistent workers keep the seeds they started with, as torch's do; the seed is
            # drawn all the same so that the order does not depend on persistent_workers
            # (torch's persistent iterator skips the draw, and so shuffles its later epochs
            # differently from a fresh iterator's).
            self._workers._reset()
            return self._workers
        it = MultiProcessIter(self, base_seed)
        if self.persistent_workers:
            self._workers = it
        return it

    def _warn_pin_memory(self) -> None:
        """torch's warnings at each new iterator: pinning asked for where nothing pins (CPU-only
        scripts pass pin_memory=True for the GPU they lack), and the deprecated pin_memory_device."""
        from ... import accelerator
        if self.pin_memory and self.pin_memory_device:
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                          f"ignore pin_memory_device='{self.pin_memory_device}'.", stacklevel=3)
        if self.pin_memory and not accelerator.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)

    def _batches(self):
        dataset, collate = self.dataset, self.collate_fn
        if self._iterable:
            yield from self._iter_stream()
            return
        if not self._auto_collation:
            for index in self.sampler:
                yield collate(dataset[index])
            return
        if self._fast_batch:
            batches = None
            if getattr(dataset, "_get_batch_takes_tensors", False):
                batches = index_tensor_batches(self.batch_sampler)
            for indices in self.batch_sampler if batches is None else batches:
                yield dataset.get_batch(indices)
            return
        getitems = getattr(dataset, "__getitems__", None)
        for indices in self.batch_sampler:
            samples = getitems(indices) if callable(getitems) else [dataset[i] for i in indices]
            yield collate(samples)

    def _iter_stream(self):
        if not self._auto_collation:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # a TypeError for streams without a length, as in torch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self._auto_collation:
            return len(self.batch_sampler)
        return len(self.sampler)


def _draw_seed(generator) -> int:
    """The workers' base seed, drawn once per epoch from ``generator`` or the default generator
    (as torch's), so ``manual_seed`` makes a run with workers reproducible."""
    return int(randint(0, 2 ** 62, (), generator=generator, device=host_device()).item())
