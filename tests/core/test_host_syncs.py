"""No hidden host syncs: training steps on a device-memory backend read nothing back unasked.

The backend under test is NumPy declaring ``host_memory=False`` (as a GPU backend
does); ``plugtorch.testing.count_transfers`` counts its ``to_host`` calls. Checks that
read values (label ranges, embedding indices) run there only in debug mode.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn, optim
from plugtorch.testing import count_transfers
from plugtorch.utils.data import (
    DataLoader,
    DistributedSampler,
    RandomSampler,
    SubsetRandomSampler,
    TensorDataset,
    random_split,
)

from .plugin_helpers import numpy_clone_backend, plugin

DEV = "devmem"


@pytest.fixture
def dev() -> str:
    plugtorch.register_plugin(plugin(lambda r: r.add_backend(numpy_clone_backend(DEV, host_memory=False)),
                                     name="tests.devmem"))
    assert not plugtorch.get_backend(DEV).host_memory
    return DEV


@pytest.fixture
def no_debug():
    with plugtorch.debug_mode(False):  # whatever PLUGTORCH_DEBUG the run was started with
        yield


def on(device, array):
    return plugtorch.tensor(np.asarray(array), device=device)


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _assert_steps_do_not_sync(model, opts, x, y, device):
    for opt in opts:
        for _ in range(2):  # the first step creates the optimizer state, the second uses it
            with count_transfers(trace=True) as counts:
                _step(model, opt, x, y)
            assert counts.total("to_host") == 0, counts.report("to_host")
    with count_transfers(trace=True) as counts:
        loss = _step(model, opts[0], x, y)
        value = loss.item()
    assert dict(counts.to_host) == {device: 1}, counts.report("to_host")
    assert np.isfinite(value)


# -- the counter -----------------------------------------------------------------------------

def test_counter_counts_each_direction_per_backend(dev):
    with count_transfers() as counts:
        t = on(dev, [1.0, 2.0, 3.0])
        c = plugtorch.tensor([4.0])
        assert t.sum().item() == 6.0
        t.tolist()
        c.numpy()
        t.to("cpu")  # a move goes through host memory: to_host here, from_host there
    assert counts.from_host == {dev: 1, "numpy": 2}
    assert counts.to_host == {dev: 3, "numpy": 1}
    assert counts.to_host["nowhere"] == 0
    assert counts.total("to_host") == 4 and counts.total("from_host") == 3


def test_counter_restores_the_primitives_also_after_an_exception(dev):
    b = plugtorch.get_backend(dev)
    before = {k: b.primitives[k] for k in ("to_host", "from_host")}
    with pytest.raises(RuntimeError, match="inside the block"), count_transfers():
        assert b.primitives["to_host"] is not before["to_host"]
        raise RuntimeError("inside the block")
    assert {k: b.primitives[k] for k in before} == before
    with count_transfers() as counts:
        pass
    on(dev, [1.0]).item()  # after the block: not counted
    assert counts.total("to_host") == 0 and counts.total("from_host") == 0


def test_nested_blocks_each_count_their_own_span(dev):
    t = on(dev, [1.0])
    with count_transfers() as outer:
        t.item()
        with count_transfers() as inner:
            t.item()
        t.item()
    assert outer.to_host[dev] == 3 and inner.to_host[dev] == 1
    t.item()  # both blocks closed: the primitive is the backend's own again
    assert outer.to_host[dev] == 3 and inner.to_host[dev] == 1


def test_counter_sees_calls_from_other_threads_and_reports_where(dev):
    t = on(dev, [1.0])
    seen = []
    with count_transfers(trace=True, on_transfer=lambda d, b: seen.append((d, b))) as counts:
        workers = [threading.Thread(target=lambda: [t.item() for _ in range(50)]) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert counts.to_host[dev] == 200 and len(seen) == 200
    assert "t.item()" in counts.report(frames=3)


# -- training steps --------------------------------------------------------------------------

def test_mlp_adam_step_makes_no_host_sync(dev, no_debug):
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to(dev)
    x = on(dev, rng.standard_normal((8, 20)).astype(np.float32))
    y = on(dev, rng.integers(0, 5, 8))
    _assert_steps_do_not_sync(model, [optim.Adam(model.parameters(), lr=1e-3)], x, y, dev)
    assert all(p.backend == dev for p in model.parameters())


def test_cnn_step_with_sgd_momentum_and_adam_makes_no_host_sync(dev, no_debug):
    from plugtorch.apps.train import CNN
    rng = np.random.default_rng(1)
    model = CNN().to(dev)
    model.train()  # dropout draws its mask on the device
    x = on(dev, rng.standard_normal((4, 1, 28, 28)).astype(np.float32))
    y = on(dev, rng.integers(0, 10, 4))
    opts = [optim.SGD(model.parameters(), lr=0.01, momentum=0.9), optim.Adam(model.parameters())]
    _assert_steps_do_not_sync(model, opts, x, y, dev)


def test_gradient_clipping_makes_no_host_sync(dev, no_debug):
    model = nn.Linear(6, 3, device=dev)
    F.cross_entropy(model(on(dev, np.ones((2, 6), np.float32))), on(dev, [0, 2])).backward()
    with count_transfers(trace=True) as counts:
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        nn.utils.clip_grad_norm_(model.parameters(), 0.1, norm_type="inf")
        nn.utils.clip_grad_value_(model.parameters(), 0.01)
    assert counts.total("to_host") == 0, counts.report("to_host")


class _Bag(nn.Module):
    """Embedding -> mean over the sequence -> Linear."""

    def __init__(self, device):
        super().__init__()
        self.emb = nn.Embedding(50, 16, padding_idx=0, device=device)
        self.fc = nn.Linear(16, 3, device=device)

    def forward(self, tokens):
        return self.fc(self.emb(tokens).mean(1))


def test_embedding_step_makes_no_host_sync(dev, no_debug):
    rng = np.random.default_rng(2)
    model = _Bag(dev)
    tokens = rng.integers(0, 50, (6, 7))
    tokens[:, -2:] = 0  # padded
    x, y = on(dev, tokens), on(dev, rng.integers(0, 3, 6))
    _assert_steps_do_not_sync(model, [optim.Adam(model.parameters())], x, y, dev)
    assert not model.emb.weight[0].detach().numpy().any()  # the padding row never moved


# -- value checks: always on host memory, in debug mode on a device --------------------------

def _cross_entropy_with_bad_label(device):
    logits = on(device, np.zeros((3, 4), np.float32))
    return F.cross_entropy(logits, on(device, [0, -1, 2]))


def _embedding_with_bad_index(device):
    return F.embedding(on(device, [[1, -1]]), on(device, np.ones((5, 2), np.float32)))


@pytest.mark.parametrize("call, message", [
    (_cross_entropy_with_bad_label, "Target -1 is out of bounds"),
    (_embedding_with_bad_index, r"index out of range: got indices in \[-1, 1\] for an embedding table of 5"),
], ids=["label", "embedding"])
def test_value_checks_run_on_host_memory_always_and_on_a_device_in_debug_mode(dev, no_debug, call,
                                                                             message):
    with pytest.raises(IndexError, match=message):
        call("numpy")
    with count_transfers() as counts:
        call(dev)  # unchecked: the kernel's behaviour (NumPy wraps -1 around, as CuPy does)
    assert counts.to_host[dev] == 0
    with plugtorch.debug_mode():
        assert plugtorch.is_debug()
        with pytest.raises(IndexError, match=message):
            call(dev)
    assert not plugtorch.is_debug()


def test_embedding_index_past_the_table_names_the_table_size():
    with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\]"):
        F.embedding(plugtorch.tensor([0, 5]), plugtorch.ones(5, 2))


def test_one_hot_checks_values_only_where_they_are_free(dev, no_debug):
    labels = on(dev, [0, 3, 1])
    with count_transfers() as counts:
        out = F.one_hot(labels, 4)
    assert counts.to_host[dev] == 0 and out.backend == dev
    with plugtorch.debug_mode(), pytest.raises(RuntimeError, match=r"smaller than num_classes \(3\)"):
        F.one_hot(labels, 3)


@pytest.mark.parametrize("value, expected", [("1", "True"), ("0", "False"), ("", "False")])
def test_plugtorch_debug_in_the_environment_turns_debug_mode_on_at_import(value, expected):
    env = dict(os.environ, PLUGTORCH_DEBUG=value)
    out = subprocess.run([sys.executable, "-c", "import plugtorch; print(plugtorch.is_debug())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


# -- samplers draw on the host ---------------------------------------------------------------

def _orders(seed):
    """The index orders the samplers give after ``manual_seed(seed)``, on the default backend."""
    plugtorch.manual_seed(seed)
    data = range(10)
    return {
        "random": [list(RandomSampler(data)) for _ in range(2)],
        "replacement": list(RandomSampler(data, replacement=True, num_samples=7)),
        "generator": list(RandomSampler(data, generator=plugtorch.Generator().manual_seed(seed))),
        "subset": list(SubsetRandomSampler([3, 5, 7, 9])),
        "distributed": list(DistributedSampler(data, num_replicas=3, rank=1, seed=seed)),
        "split": [list(s) for s in random_split(data, [4, 6])],
    }


def test_samplers_draw_on_the_host_whatever_the_default_backend(dev):
    expected = _orders(7)
    plugtorch.use(dev)
    assert plugtorch.current_backend() == dev
    with count_transfers(trace=True) as counts:
        got = _orders(7)
    assert counts.to_host[dev] == 0, counts.report("to_host")
    assert all(plugtorch.get_backend(b).host_memory for b in counts.to_host), counts
    assert got == expected
    assert got["random"][0] != got["random"][1]  # a new seed each pass
    assert sorted(got["random"][0]) == list(range(10))


def test_random_sampler_follows_its_generator_or_draws_a_seed_at_iteration():
    data = range(20)
    a = RandomSampler(data, generator=plugtorch.Generator().manual_seed(3))
    b = RandomSampler(data, generator=plugtorch.Generator().manual_seed(3))
    first = list(a)
    plugtorch.manual_seed(123)  # the default generator does not touch a given generator
    assert list(b) == first
    assert list(a) != first  # the generator moved on: the next epoch is a new order
    s = RandomSampler(data)  # no generator: the seed is drawn when iteration starts
    plugtorch.manual_seed(5)
    one = list(s)
    plugtorch.manual_seed(5)
    assert list(s) == one
    assert list(s) != one


def test_dataloader_over_device_tensors_makes_no_host_sync(dev):
    plugtorch.use(dev)
    ds = TensorDataset(on(dev, np.arange(12, dtype=np.float32).reshape(6, 2)), on(dev, np.arange(6)))
    loader = DataLoader(ds, batch_size=4, shuffle=True, generator=plugtorch.Generator().manual_seed(0))
    with count_transfers(trace=True) as counts:
        batches = list(loader)
    assert counts.to_host[dev] == 0, counts.report("to_host")
    assert [b[0].backend for b in batches] == [dev, dev]


def test_tensor_dataset_batches_tensors_on_different_backends(dev):
    ds = TensorDataset(on(dev, np.arange(6, dtype=np.float32)), plugtorch.arange(6))
    x, y = ds.get_batch([4, 1])
    assert (x.backend, y.backend) == (dev, "numpy")
    assert x.tolist() == [4.0, 1.0] and y.tolist() == [4, 1]
