"""Datasets: the map-style protocol, tensors as a dataset, subsets and random splits.

A dataset may also offer ``get_batch(indices)``: the batch that
``default_collate([ds[i] for i in indices])`` would build, computed by indexing
whole tensors at once. ``DataLoader`` uses it when it collates by default; it is
what makes batching MNIST one gather instead of 128 small copies and a stack.
``indices`` is a list of ints, or an int64 index tensor where the dataset's class sets
``_get_batch_takes_tensors``.
"""
from __future__ import annotations

import math
import warnings
from itertools import accumulate

import numpy

from ...core.dtypes import int64
from ...core.ops.creation import randperm, tensor
from ...core.random import default_generator
from ...core.tensor import Tensor
from .sampler import host_device


class Dataset:
    """A map from indices to samples: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


def _index_tensor(indices, like=None):
    """``indices`` as an int64 tensor on ``like``'s backend (the default backend without one)."""
    if isinstance(indices, Tensor):
        if like is not None and indices.dtype is int64 and indices._backend is like._backend:
            return indices  # (what .to() gives, without resolving the backend's name)
        return indices.to(dtype=int64, device=None if like is None else like.backend)
    device = None if like is None else like.backend
    # one NumPy conversion of the batch's ints (plugtorch.tensor on a list checks it element by element)
    return tensor(numpy.asarray(indices, dtype=numpy.int64), dtype=int64, device=device)


def _index_ints(indices) -> list:
    """``indices`` (a list, or an index tensor a DataLoader passed) as Python ints: a tensor's
    in one ``tolist()``, not a 0-d tensor and an ``int()`` each."""
    return indices.tolist() if isinstance(indices, Tensor) else [int(i) for i in indices]


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__``; a DataLoader batches it in order."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class TensorDataset(Dataset):
    """Samples are the ``index``-th rows of tensors that share their first dimension."""

    _get_batch_takes_tensors = True  # DataLoader may hand get_batch an index tensor, not a list

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].size(0)
        for i, t in enumerate(tensors):
            if t.size(0) != n:
                raise ValueError(f"Size mismatch between tensors: tensor 0 has {n} rows but tensor "
                                 f"{i} has {t.size(0)} (shape {list(t.shape)})")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)

    def get_batch(self, indices):
        idx = {}  # backend -> the indices there: the tensors may live on different backends
        for t in self.tensors:
            if t.backend not in idx:
                idx[t.backend] = _index_tensor(indices, like=t)
        # index_select, t[idx]'s values: a backend may gather rows faster than it indexes
        return [t.index_select(0, idx[t.backend]) for t in self.tensors]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, renumbered from 0."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)

    def __getattr__(self, name):
        # Offer the fast batch path exactly when the wrapped dataset does.
        inner = self.__dict__.get("dataset")
        if name == "get_batch" and callable(getattr(inner, "get_batch", None)):
            return self._get_batch
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _get_batch(self, indices):
        return self.dataset.get_batch([int(self.indices[int(i)]) for i in indices])


class ConcatDataset(Dataset):
    """The samples of several datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        for which, end in enumerate(self.cumulative_sizes):
            if idx < end:
                start = self.cumulative_sizes[which - 1] if which else 0
                return self.datasets[which][idx - start]
        raise IndexError(f"index {idx} is out of range for a dataset of length {len(self)}")


def random_split(dataset, lengths, generator=default_generator):
    """Split ``dataset`` into non-overlapping random subsets of the given lengths (or fractions)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty "
                              "dataset.", stacklevel=2)
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError(f"Sum of input lengths does not equal the length of the input dataset! "
                         f"(lengths {list(lengths)} sum to {sum(lengths)}, the dataset has {n})")
    indices = randperm(sum(lengths), generator=generator, device=host_device()).tolist()
    return [Subset(dataset, indices[end - length:end])
            for end, length in zip(accumulate(lengths), lengths)]
