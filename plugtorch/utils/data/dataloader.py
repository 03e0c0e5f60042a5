"""DataLoader: draw indices from a sampler, fetch the samples, collate them into batches."""
from __future__ import annotations

from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


class DataLoader:
    """Iterate over ``dataset`` in batches, in the main process.

    Like ``torch.utils.data.DataLoader``: ``shuffle=True`` draws a new permutation
    each epoch from ``generator`` (seed it for reproducible runs), ``sampler`` or
    ``batch_sampler`` replace the default index order, and ``collate_fn`` builds a
    batch from a list of samples. With the default collate, a dataset that offers
    ``get_batch(indices)`` (TensorDataset, MNIST, their Subsets) is batched by
    indexing whole tensors at once.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, generator=None, *, prefetch_factor=None,
                 persistent_workers=False):
        if num_workers != 0:
            raise ValueError(
                f"num_workers={num_workers}: plugtorch's DataLoader loads batches in the main "
                "process; pass num_workers=0 (batching a tensor dataset is a single indexing op, "
                "so worker processes would not speed it up)")
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
        self._auto_collation = (batch_size is not None if self._iterable
                                else batch_sampler is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
            self._fast_batch = self._auto_collation and callable(getattr(dataset, "get_batch", None))
        else:
            self._fast_batch = False
        self.collate_fn = collate_fn

    def __iter__(self):
        dataset, collate = self.dataset, self.collate_fn
        if self._iterable:
            yield from self._iter_stream()
            return
        if not self._auto_collation:
            for index in self.sampler:
                yield collate(dataset[index])
            return
        if self._fast_batch:
            for indices in self.batch_sampler:
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
