"""DataLoader, samplers, collation, datasets and random_split behave like torch.utils.data."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import plugtorch
from plugtorch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    default_collate,
    random_split,
)


def _dataset(n=10):
    x = plugtorch.arange(n * 3, dtype=plugtorch.float32).reshape(n, 3)
    return TensorDataset(x, plugtorch.arange(n))


class PairDataset(Dataset):
    """A plain map-style dataset without the fast batch path."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return plugtorch.full((2,), float(i)), i


def _flat_labels(loader):
    return [int(v) for _, y in loader for v in y.tolist()]


def test_sequential_batches_and_last_partial_batch():
    batches = list(DataLoader(_dataset(10), batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].shape == (4, 3) and batches[0][0].dtype is plugtorch.float32
    assert len(DataLoader(_dataset(10), batch_size=4)) == 3


def test_drop_last_drops_the_short_batch():
    loader = DataLoader(_dataset(10), batch_size=4, drop_last=True)
    assert len(loader) == 2
    assert [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_shuffle_with_seeded_generator_is_reproducible_and_reshuffles_each_epoch():
    def epochs(seed):
        loader = DataLoader(_dataset(50), batch_size=8, shuffle=True,
                            generator=plugtorch.Generator().manual_seed(seed))
        return [_flat_labels(loader) for _ in range(3)]

    a, b, c = epochs(7), epochs(7), epochs(8)
    assert a == b
    assert a != c
    assert a[0] != a[1]
    for epoch in a:
        assert sorted(epoch) == list(range(50))


def test_generator_state_resumes_the_shuffle_mid_run():
    gen = plugtorch.Generator().manual_seed(3)
    loader = DataLoader(_dataset(20), batch_size=5, shuffle=True, generator=gen)
    _flat_labels(loader)
    state = gen.get_state()
    expected = _flat_labels(loader)
    gen2 = plugtorch.Generator()
    gen2.set_state(state)
    resumed = DataLoader(_dataset(20), batch_size=5, shuffle=True, generator=gen2)
    assert _flat_labels(resumed) == expected


def test_shuffle_without_generator_follows_manual_seed():
    plugtorch.manual_seed(11)
    a = _flat_labels(DataLoader(_dataset(30), batch_size=7, shuffle=True))
    plugtorch.manual_seed(11)
    b = _flat_labels(DataLoader(_dataset(30), batch_size=7, shuffle=True))
    assert a == b and sorted(a) == list(range(30))


def test_fast_batch_path_equals_generic_collate():
    ds = _dataset(12)
    gen_args = dict(batch_size=5, shuffle=True)
    fast = list(DataLoader(ds, generator=plugtorch.Generator().manual_seed(1), **gen_args))
    slow = list(DataLoader(ds, generator=plugtorch.Generator().manual_seed(1),
                           collate_fn=default_collate, **gen_args))
    assert len(fast) == len(slow) == 3
    for (fx, fy), (sx, sy) in zip(fast, slow):
        assert isinstance(fx, plugtorch.Tensor) and fx.dtype is sx.dtype and fy.dtype is sy.dtype
        np.testing.assert_array_equal(fx.numpy(), sx.numpy())
        np.testing.assert_array_equal(fy.numpy(), sy.numpy())


def test_generic_dataset_is_collated_into_tensors():
    x, y = next(iter(DataLoader(PairDataset(5), batch_size=3)))
    assert x.tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    assert y.tolist() == [0, 1, 2] and y.dtype is plugtorch.int64


def test_subset_and_random_split_keep_the_fast_path_and_partition():
    ds = _dataset(10)
    parts = random_split(ds, [0.7, 0.3], generator=plugtorch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [7, 3]
    seen = sorted(_flat_labels(DataLoader(parts[0], batch_size=4))
                  + _flat_labels(DataLoader(parts[1], batch_size=4)))
    assert seen == list(range(10))
    sub = Subset(ds, [9, 2, 4])
    assert callable(getattr(sub, "get_batch", None))
    assert _flat_labels(DataLoader(sub, batch_size=2)) == [9, 2, 4]
    assert sub[0][1].item() == 9
    assert not hasattr(Subset(PairDataset(3), [0]), "get_batch")
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [3, 3])


def test_random_split_by_lengths_is_seeded():
    a = random_split(range(10), [5, 5], generator=plugtorch.Generator().manual_seed(4))
    b = random_split(range(10), [5, 5], generator=plugtorch.Generator().manual_seed(4))
    assert a[0].indices == b[0].indices and a[1].indices == b[1].indices
    assert sorted(a[0].indices + a[1].indices) == list(range(10))


def test_collate_of_dicts_tuples_numbers_strings_and_namedtuples():
    batch = default_collate([{"x": plugtorch.ones(2), "y": 1, "w": 0.5, "name": "a"},
                             {"x": plugtorch.zeros(2), "y": 2, "w": 1.5, "name": "b"}])
    assert batch["x"].shape == (2, 2)
    assert batch["y"].dtype is plugtorch.int64 and batch["y"].tolist() == [1, 2]
    assert batch["w"].dtype is plugtorch.float64 and batch["name"] == ["a", "b"]
    pairs = default_collate([(np.float32(1.0), np.array([1, 2])), (np.float32(2.0), np.array([3, 4]))])
    assert isinstance(pairs, list) and pairs[1].tolist() == [[1, 2], [3, 4]]
    Point = namedtuple("Point", "x y")
    pt = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(pt, Point) and pt.x.tolist() == [1, 3]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object()])


def test_batch_sampler_and_sampler_arguments():
    ds = _dataset(6)
    bs = BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False)
    assert list(bs) == [[0, 1, 2, 3], [4, 5]] and len(bs) == 2
    loader = DataLoader(ds, batch_sampler=[[5, 0], [3]])
    assert [b[1].tolist() for b in loader] == [[5, 0], [3]]
    loader = DataLoader(ds, sampler=[4, 1, 2], batch_size=2)
    assert [b[1].tolist() for b in loader] == [[4, 1], [2]]
    sub = list(SubsetRandomSampler([1, 3, 5], generator=plugtorch.Generator().manual_seed(0)))
    assert sorted(sub) == [1, 3, 5]
    with_repl = list(RandomSampler(ds, replacement=True, num_samples=20,
                                   generator=plugtorch.Generator().manual_seed(0)))
    assert len(with_repl) == 20 and set(with_repl) <= set(range(6))


def test_batch_size_none_yields_single_samples():
    items = list(DataLoader(PairDataset(3), batch_size=None))
    assert [i for _, i in items] == [0, 1, 2]


def test_argument_errors_match_torch():
    ds = _dataset(4)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, num_workers=-1)  # worker processes: tests/data/test_workers.py
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(plugtorch.zeros(3), plugtorch.zeros(4))


def test_concat_dataset_indexes_across_parts():
    ds = ConcatDataset([_dataset(3), _dataset(2)])
    assert len(ds) == 5
    assert [ds[i][1].item() for i in range(5)] == [0, 1, 2, 0, 1]
    assert ds[-1][1].item() == 1


class Countdown(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n, 0, -1):
            yield {"value": float(i), "index": i}


def test_iterable_dataset_is_batched_in_stream_order():
    batches = list(DataLoader(Countdown(5), batch_size=2))
    assert [b["index"].tolist() for b in batches] == [[5, 4], [3, 2], [1]]
    assert batches[0]["value"].dtype is plugtorch.float64
    assert [b["index"].tolist() for b in DataLoader(Countdown(5), batch_size=2, drop_last=True)] \
        == [[5, 4], [3, 2]]
    assert [s["index"] for s in DataLoader(Countdown(2), batch_size=None)] == [2, 1]
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Countdown(3), shuffle=True)
    with pytest.raises(TypeError):
        len(DataLoader(Countdown(3)))
