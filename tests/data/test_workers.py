"""DataLoader(num_workers>0): order, seeded determinism, worker info, clean shutdown, torch's errors."""
from __future__ import annotations

import multiprocessing
import os
import random
import time

import numpy as np
import pytest

import plugtorch
from plugtorch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info


class Noisy(Dataset):
    """Each sample draws from plugtorch's, Python's and NumPy's generators, and says who made it."""

    def __init__(self, n=40):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return {"index": i, "worker": -1 if info is None else info.id,
                "noise": plugtorch.rand(1).item(), "py": random.random(), "np": float(np.random.rand())}


class Failing(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if i == 37:
            raise KeyError(f"no sample {i}")
        time.sleep(0.001)
        return i


class Dying(Failing):
    def __getitem__(self, i):
        if i == 20:
            os._exit(3)  # a crash that raises nothing: the worker just disappears
        return i


def _workers_alive():
    return [p for p in multiprocessing.active_children() if p.name.startswith(("Process", "Fork", "Spawn"))]


def test_map_style_order_matches_one_process():
    ds = TensorDataset(plugtorch.arange(103), plugtorch.arange(103) * 3)
    def batches(**kw):
        gen = plugtorch.Generator().manual_seed(1)
        return [b[0].tolist() for b in DataLoader(ds, batch_size=10, generator=gen, **kw)]

    for kw in (dict(), dict(shuffle=True), dict(drop_last=True)):
        assert batches(num_workers=3, **kw) == batches(**kw), kw
    assert len(DataLoader(ds, batch_size=10, num_workers=2)) == 11
    assert list(DataLoader(range(5), batch_size=None, num_workers=2)) == [0, 1, 2, 3, 4]


def test_seeded_runs_repeat_and_workers_draw_different_streams():
    def run():
        plugtorch.manual_seed(11)
        return [s for batch in DataLoader(Noisy(), batch_size=4, num_workers=2)
                for s in zip(batch["worker"].tolist(), batch["noise"].tolist(), batch["py"].tolist(),
                             batch["np"].tolist())]

    a, b = run(), run()
    assert a == b                                   # reproducible with manual_seed
    assert {w for w, *_ in a} == {0, 1}             # both workers worked
    by_worker = {w: [n for ww, n, *_ in a if ww == w] for w in (0, 1)}
    assert by_worker[0][:4] != by_worker[1][:4]     # and did not draw the same numbers
    plugtorch.manual_seed(12)
    c = [n for batch in DataLoader(Noisy(), batch_size=4, num_workers=2) for n in batch["noise"].tolist()]
    assert c != [n for _, n, *_ in a]               # another seed, other draws


def test_worker_info_and_init_fn():
    seen = multiprocessing.get_context().Queue()

    def init(worker_id):
        info = get_worker_info()
        seen.put((worker_id, info.id, info.num_workers, type(info.dataset).__name__))

    list(DataLoader(Noisy(8), batch_size=2, num_workers=2, worker_init_fn=init))
    got = sorted(seen.get(timeout=10) for _ in range(2))
    assert got == [(0, 0, 2, "Noisy"), (1, 1, 2, "Noisy")]
    assert get_worker_info() is None  # in the main process

    def broken(worker_id):
        raise ValueError(f"cannot open the database in worker {worker_id}")

    with pytest.raises(ValueError, match="Caught ValueError in DataLoader worker process"):
        list(DataLoader(Noisy(8), batch_size=2, num_workers=2, worker_init_fn=broken))
    assert not _workers_alive()


def test_iterable_dataset_is_sharded_and_interleaved_as_torchs(torch):
    class Stream(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            return iter(range(info.id, 11, info.num_workers))

    class TorchStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            return iter(range(info.id, 11, info.num_workers))

    ours = [b.tolist() for b in DataLoader(Stream(), batch_size=2, num_workers=2)]
    theirs = [b.tolist() for b in torch.utils.data.DataLoader(TorchStream(), batch_size=2, num_workers=2)]
    assert ours == theirs == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]


def test_an_exception_in_a_worker_is_raised_here_and_every_worker_stops():
    start = time.perf_counter()
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process") as info:
        for _ in DataLoader(Failing(), batch_size=4, num_workers=3):
            pass
    assert "no sample 37" in str(info.value) and "Traceback" in str(info.value)
    assert time.perf_counter() - start < 10
    assert not _workers_alive()


def test_a_dead_worker_is_reported_not_waited_for():
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(DataLoader(Dying(), batch_size=4, num_workers=2))
    assert not _workers_alive()


def test_stopping_early_shuts_the_workers_down():
    it = iter(DataLoader(Failing(), batch_size=2, num_workers=2))
    next(it)
    assert len(_workers_alive()) == 2
    del it
    assert not _workers_alive()


def test_timeout():
    class Slow(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            time.sleep(5)
            return i

    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.3 seconds"):
        next(iter(DataLoader(Slow(), num_workers=1, timeout=0.3)))
    assert not _workers_alive()


def test_persistent_workers_serve_every_epoch():
    ds = TensorDataset(plugtorch.arange(20))
    loader = DataLoader(ds, batch_size=5, num_workers=2, persistent_workers=True, shuffle=True,
                        generator=plugtorch.Generator().manual_seed(0))
    first = [b[0].tolist() for b in loader]
    pids = [w.pid for w in loader._workers._workers]
    half = iter(loader)
    next(half)                                   # an epoch abandoned halfway ...
    second = [b[0].tolist() for b in loader]     # ... does not leak into the next one
    assert [w.pid for w in loader._workers._workers] == pids
    assert sorted(sum(first, [])) == sorted(sum(second, [])) == list(range(20))
    assert first != second                       # a new shuffle each epoch
    loader._workers.close()


def test_pin_memory_in_order_and_spawn_are_accepted():
    ds = TensorDataset(plugtorch.arange(12.0))
    batches = list(DataLoader(ds, batch_size=3, num_workers=2, pin_memory=True, in_order=False))
    assert sorted(x for b in batches for x in b[0].tolist()) == list(range(12))
    spawned = [b[0].tolist() for b in DataLoader(ds, batch_size=6, num_workers=1,
                                                 multiprocessing_context="spawn")]
    assert spawned == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]


def test_argument_errors_match_torch(torch):
    ds = list(range(4))
    cases = [dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
             dict(persistent_workers=True), dict(num_workers=1, prefetch_factor=-1),
             dict(multiprocessing_context="fork"), dict(num_workers=1, multiprocessing_context="nope")]
    for kw in cases:
        with pytest.raises(ValueError) as theirs:
            torch.utils.data.DataLoader(ds, **kw)
        with pytest.raises(ValueError) as ours:
            DataLoader(ds, **kw)
        assert str(ours.value) == str(theirs.value), kw


_DYING_WITH_SHARED_BATCHES = """
import os
import plugtorch
import plugtorch.multiprocessing  # its reducers: batches travel as shared memory the worker hands over
from plugtorch.utils.data import DataLoader, Dataset

class Dying(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if i == 20:
            os._exit(3)
        return plugtorch.full((4,), float(i))

try:
    list(DataLoader(Dying(), batch_size=4, num_workers=2))
except RuntimeError as e:
    print("raised:", e)
"""


def test_a_dead_worker_is_reported_when_batches_travel_in_shared_memory():
    # with plugtorch.multiprocessing imported, the parent fetches each batch's memory from the
    # worker that made it; a worker dying in between is still the clear error, not a socket's
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _DYING_WITH_SHARED_BATCHES], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "raised: DataLoader worker (pid(s)" in r.stdout and "exited unexpectedly" in r.stdout, r.stdout
