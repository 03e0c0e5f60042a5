"""train_data.prepared: ``plugtorch train`` normalises an in-memory MNIST once instead of per
batch, and what the model sees does not change by a bit."""
from __future__ import annotations

import io

import numpy as np
import pytest

import plugtorch
from plugtorch.apps import train_data
from plugtorch.apps.train import TrainConfig, Trainer, train
from plugtorch.datasets import MNIST
from plugtorch.utils.data import Subset, TensorDataset

MEAN, STD = MNIST.mean, MNIST.std
TINY = dict(limit_train=300, limit_test=100, batch_size=64, download=False, quiet=True, epochs=1)


@pytest.fixture
def mnist(data_root):
    return MNIST(data_root, train=True), MNIST(data_root, train=False)


@pytest.mark.parametrize("rows", [None, [5, 0, 59999, 17, 5]], ids=["whole set", "subset"])
def test_prepared_batches_are_the_per_batch_values_bit_for_bit(mnist, rows):
    train_set, test_set = mnist
    if rows is not None:
        train_set = Subset(train_set, rows)
    got_train, got_test, normalized = train_data.prepared(train_set, test_set, MEAN, STD)
    assert normalized and isinstance(got_train, TensorDataset) and isinstance(got_test, TensorDataset)
    assert len(got_train) == len(train_set) and len(got_test) == len(test_set)
    picks = [3, 0, len(train_set) - 1, 1]
    want = train_set.dataset.get_batch([rows[i] for i in picks]) if rows else train_set.get_batch(picks)
    got = got_train.get_batch(picks)
    assert got[0].dtype is plugtorch.float32 and got[0].shape == want[0].shape
    np.testing.assert_array_equal(got[0].numpy(), train_data.normalize(want[0], MEAN, STD).numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def test_sets_over_the_limit_or_with_transforms_stay_as_given(mnist, monkeypatch):
    train_set, test_set = mnist
    monkeypatch.setattr(train_data, "LIMIT_BYTES", 4 * 784 * (len(train_set) + len(test_set)) - 1)
    assert train_data.prepared(train_set, test_set, MEAN, STD) == (train_set, test_set, False)
    monkeypatch.undo()
    assert train_data.prepared(train_set, test_set, MEAN, STD, ranks=4)[2] is False  # 4 x 219 MiB
    assert train_data.prepared(Subset(train_set, range(100)), test_set, MEAN, STD, ranks=4)[2] is True
    transformed = MNIST(train_set.root, train=False, transform=lambda x: x)
    assert train_data.prepared(train_set, transformed, MEAN, STD) == (train_set, transformed, False)


def test_training_reaches_the_same_numbers_either_way(data_root, monkeypatch):
    prepared = train(TrainConfig(data_dir=str(data_root), **TINY), out=io.StringIO())
    monkeypatch.setattr(train_data, "LIMIT_BYTES", 0)  # every batch normalised on its own
    per_batch = train(TrainConfig(data_dir=str(data_root), **TINY), out=io.StringIO())
    for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy"):
        assert prepared["history"][-1][key] == per_batch["history"][-1][key], key


def test_the_trainer_normalises_once_or_per_batch(data_root, monkeypatch):
    cfg = dict(data_dir=str(data_root), **TINY)
    assert Trainer(TrainConfig(**cfg), out=io.StringIO())._normalized
    monkeypatch.setattr(train_data, "LIMIT_BYTES", 0)
    assert not Trainer(TrainConfig(**cfg), out=io.StringIO())._normalized
