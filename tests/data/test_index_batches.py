"""DataLoader's index-tensor batches give the indices, and draw the random numbers, that
iterating the BatchSampler does (``sampler.index_tensor_batches``)."""
from __future__ import annotations

import itertools

import pytest

import plugtorch
from plugtorch.core.random import default_generator
from plugtorch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)
from plugtorch.utils.data.sampler import index_tensor_batches


def _samplers(n):
    """(name, a factory of a fresh sampler, the generator it draws from or None)."""
    def seeded():
        g = plugtorch.Generator().manual_seed(7)
        return RandomSampler(range(n), generator=g), g
    yield "sequential", lambda: (SequentialSampler(range(n)), None)
    yield "random, seeded generator", seeded
    yield "random, default generator", lambda: (RandomSampler(range(n)), default_generator)
    for replicas, rank, shuffle, drop in [(1, 0, True, False), (3, 1, True, False), (4, 3, False, False),
                                          (4, 2, True, True)]:
        yield (f"distributed {rank}/{replicas} shuffle={shuffle} drop_last={drop}",
               lambda r=replicas, k=rank, s=shuffle, d=drop: (DistributedSampler(range(n), r, k, shuffle=s, seed=3,
                                                                                drop_last=d), None))


CASES = [(n, name, make, size, drop) for n in (10, 11, 12) for name, make in _samplers(n)
         for size in (1, 3, 4, 12, 20) for drop in (False, True)]


def _state(g):
    """The generator's next numbers, which tell where it stands."""
    return None if g is None else plugtorch.rand(4, generator=g).tolist()


@pytest.mark.parametrize("n, name, make, size, drop", CASES,
                         ids=[f"n{c[0]}-{c[1]}-b{c[3]}-drop{c[4]}" for c in CASES])
def test_same_batches_and_draws_as_iterating(n, name, make, size, drop):
    plugtorch.manual_seed(11)
    sampler, g = make()
    expected = list(BatchSampler(sampler, size, drop))
    after_lists = _state(g)

    plugtorch.manual_seed(11)
    sampler, g = make()
    batches = index_tensor_batches(BatchSampler(sampler, size, drop))
    assert batches is not None
    got = [b.tolist() for b in batches]
    assert got == expected
    assert _state(g) == after_lists, "the generator must end where iterating the sampler leaves it"


@pytest.mark.parametrize("taken", [0, 1, 2, 3])
def test_stopping_early_leaves_the_generator_where_iterating_does(taken):
    # 10 samples in batches of 4: the trailing draw happens while the third, short batch is filled
    def run(tensors):
        g = plugtorch.Generator().manual_seed(5)
        bs = BatchSampler(RandomSampler(range(10), generator=g), 4, False)
        it = index_tensor_batches(bs) if tensors else iter(bs)
        got = [list(map(int, b)) for b in itertools.islice(it, taken)]
        return got, _state(g)
    assert run(True) == run(False)


def test_only_our_own_orders_are_sliced():
    class Reversed(SequentialSampler):
        def __iter__(self):
            return reversed(range(len(self.data_source)))

    class MyBatches(BatchSampler):
        pass

    assert index_tensor_batches(BatchSampler(Reversed(range(5)), 2, False)) is None
    assert index_tensor_batches(MyBatches(SequentialSampler(range(5)), 2, False)) is None
    assert index_tensor_batches(BatchSampler(RandomSampler(range(5), replacement=True), 2, False)) is None
    assert index_tensor_batches(BatchSampler(RandomSampler(range(5), num_samples=3), 2, False)) is None
    assert index_tensor_batches([[0, 1], [2]]) is None


def test_loader_gives_the_same_batches_either_way(monkeypatch):
    x = plugtorch.randn(23, 3, 2)
    y = plugtorch.arange(23)

    def epochs():
        g = plugtorch.Generator().manual_seed(1)
        loader = DataLoader(TensorDataset(x, y), batch_size=5, shuffle=True, generator=g)
        return [[(a.numpy().copy(), b.numpy().copy()) for a, b in loader] for _ in range(2)]

    fast = epochs()
    monkeypatch.setattr(TensorDataset, "_get_batch_takes_tensors", False)
    slow = epochs()
    assert len(fast) == len(slow) == 2
    for e_fast, e_slow in zip(fast, slow):
        assert len(e_fast) == len(e_slow) == 5
        for (xa, ya), (xb, yb) in zip(e_fast, e_slow):
            assert (xa == xb).all() and (ya == yb).all() and xa.dtype == xb.dtype and ya.dtype == yb.dtype
    assert not all((a[1] == b[1]).all() for a, b in zip(fast[0], fast[1])), "each epoch reshuffles"


def test_a_dataset_that_does_not_say_so_gets_lists():
    seen = []

    class Batched(Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return plugtorch.tensor(float(i))

        def get_batch(self, indices):
            seen.append(indices)
            return plugtorch.tensor([float(i) for i in indices])

    out = [b.tolist() for b in DataLoader(Batched(), batch_size=3)]
    assert out == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0]]
    assert all(type(i) is list for i in seen)


def test_per_sample_transforms_get_the_same_batches(data_root, monkeypatch):
    """MNIST with a transform builds its batch sample by sample, from an index tensor's ints."""
    from plugtorch.datasets import MNIST
    ds = MNIST(str(data_root), train=False, transform=lambda img: img * 2)

    def batches():
        g = plugtorch.Generator().manual_seed(3)
        loader = DataLoader(ds, batch_size=16, shuffle=True, generator=g)
        return [(x.numpy().copy(), y.numpy().copy()) for x, y in itertools.islice(loader, 3)]

    fast = batches()
    monkeypatch.setattr(MNIST, "_get_batch_takes_tensors", False)
    slow = batches()
    assert len(fast) == len(slow) == 3
    for (xa, ya), (xb, yb) in zip(fast, slow):
        assert xa.shape == (16, 1, 28, 28) and (xa == xb).all() and (ya == yb).all()
        assert xa.max() == 2.0  # the transform ran
