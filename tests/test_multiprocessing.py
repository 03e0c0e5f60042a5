"""plugtorch.multiprocessing: spawn as torch's, tensors shared (not copied) between processes.

Spawned children import this module to find their functions, which is why they live at its
top level. Spawning costs about a second and a half per process (each imports plugtorch), so
each test starts at most two.
"""
from __future__ import annotations

import gc
import os
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import plugtorch
import plugtorch.multiprocessing as mp
from plugtorch import nn, optim


def _shm_entries() -> set[str]:
    # what plugtorch (its fallback to /dev/shm files) or multiprocessing (named semaphores,
    # shared_memory segments) would leave; other programs' entries (MPI's) are not ours to count
    if not os.path.isdir("/dev/shm"):
        return set()
    return {n for n in os.listdir("/dev/shm") if n.startswith(("plugtorch", "sem.mp-", "psm_"))}


@pytest.fixture
def no_shm_leak():
    before = _shm_entries()
    yield
    gc.collect()  # multiprocessing's own named semaphores go with their Queue objects
    assert _shm_entries() - before == set()


# -- what the children run ------------------------------------------------------------------

def _write_rank(rank, table, scale):
    table[rank] = (rank + 1) * scale


def _fail_on_rank_1(rank):
    if rank == 1:
        raise ValueError(f"rank {rank} cannot go on")


def _add_one_from_the_queue(inbox, outbox):
    t = inbox.get(timeout=60)
    t.add_(1)  # in place: the parent's tensor is the same memory
    outbox.put((t.is_shared(), t.sum().item()))


def _hogwild_worker(rank, model, x, y):
    opt = optim.SGD(model.parameters(), lr=0.05)
    part = slice(rank * 32, (rank + 1) * 32)
    for _ in range(10):
        opt.zero_grad()
        loss = ((model(x[part]) - y[part]) ** 2).mean()
        loss.backward()
        opt.step()


# -- tests ------------------------------------------------------------------------------------

def test_it_reexports_multiprocessing():
    import multiprocessing
    assert mp.Process is multiprocessing.Process and mp.Queue is multiprocessing.Queue
    assert mp.get_context is multiprocessing.get_context
    assert mp.set_start_method is multiprocessing.set_start_method
    assert mp.get_sharing_strategy() == "file_descriptor"
    with pytest.raises(ValueError, match="file_system"):
        mp.set_sharing_strategy("file_system")


def test_its_names_and_signatures_are_torch_multiprocessings(torch):
    import inspect

    import torch.multiprocessing as tmp
    assert set(tmp.__all__) <= set(mp.__all__)
    for name in ("spawn", "start_processes"):
        assert inspect.signature(getattr(mp, name)) == inspect.signature(getattr(tmp, name))
    assert (inspect.signature(mp.ProcessContext.join).parameters.keys()
            == inspect.signature(tmp.ProcessContext.join).parameters.keys())


def test_share_memory_is_in_place_and_keeps_values():
    t = plugtorch.arange(6.0).reshape(2, 3)
    view_before = t.detach()
    assert not t.is_shared()
    assert t.share_memory_() is t and t.is_shared()
    assert t.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert t.share_memory_() is t  # already shared: nothing moves
    assert t[1].is_shared() and not view_before.is_shared()
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    params = list(model.parameters())
    assert model.share_memory() is model
    assert list(model.parameters()) == params  # the same Parameter objects, now shared
    assert all(p.is_shared() for p in model.parameters())
    assert all(b.is_shared() for b in model.buffers())


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                    reason="counts open descriptors through /proc, which only Linux has")
def test_shared_segments_are_freed_with_their_tensors():
    gc.collect()  # files earlier tests left to the collector close now, not while this counts
    fds = len(os.listdir("/proc/self/fd"))
    tensors = [plugtorch.ones(100).share_memory_() for _ in range(20)]
    assert len(os.listdir("/proc/self/fd")) >= fds + 20
    del tensors
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == fds


def test_what_cannot_be_shared_is_refused(monkeypatch):
    x = plugtorch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(x * 2)
    with monkeypatch.context() as m:  # a GPU backend's tensor, as a CuPy run would have
        m.setattr(plugtorch.Tensor, "backend", property(lambda self: "cupy"))
        with pytest.raises(RuntimeError, match=r"cupy backend.*CUDA IPC is not supported.*\.cpu\(\)"):
            plugtorch.ones(2).share_memory_()


def test_spawn_runs_each_rank_on_a_shared_tensor(no_shm_leak):
    table = plugtorch.zeros(3)
    assert mp.spawn(_write_rank, args=(table, 10.0), nprocs=2) is None
    assert table.tolist() == [10.0, 20.0, 0.0] and table.is_shared()


def test_an_exception_in_a_child_is_raised_naming_its_rank():
    context = mp.spawn(_fail_on_rank_1, nprocs=2, join=False)
    assert isinstance(context, mp.ProcessContext) and len(context.pids()) == 2
    with pytest.raises(mp.ProcessRaisedException, match="ValueError: rank 1 cannot go on") as info:
        while not context.join():
            pass
    assert info.value.error_index == 1
    assert "-- Process 1 terminated with the following error:" in str(info.value)
    assert not any(os.path.exists(f) for f in context.error_files)


def test_a_tensor_through_a_queue_is_the_same_memory(no_shm_leak):
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_add_one_from_the_queue, args=(inbox, outbox))
    child.start()
    t = plugtorch.arange(4.0)
    inbox.put(t)
    shared_there, total_there = outbox.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0 and shared_there and total_there == 10.0
    assert t.is_shared() and t.tolist() == [1.0, 2.0, 3.0, 4.0]  # the child's write, seen here
    for queue in (inbox, outbox):
        queue.close()
        queue.join_thread()


def test_hogwild_training_updates_the_shared_model(no_shm_leak):
    plugtorch.manual_seed(0)  # the model's initial weights
    g = plugtorch.Generator().manual_seed(0)
    x = plugtorch.randn(64, 4, generator=g)
    y = x @ plugtorch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 1.0
    model = nn.Linear(4, 1)
    model.share_memory()
    before = [p.detach().clone() for p in model.parameters()]
    with plugtorch.no_grad():
        loss_before = ((model(x) - y) ** 2).mean().item()
    mp.spawn(_hogwild_worker, args=(model, x, y), nprocs=2)
    for p, old in zip(model.parameters(), before):
        assert not np.allclose(p.detach().numpy(), old.numpy())
    with plugtorch.no_grad():
        assert ((model(x) - y) ** 2).mean().item() < 0.5 * loss_before
