"""``DataLoader(num_workers=N)``: batches built in N worker processes, as torch's are.

The main process sends each worker, in turn, the indices of one batch (``prefetch_factor``
batches per worker in flight), and workers answer on one shared queue. Batches come back in
sampler order (reordered here when a worker finishes early) unless ``in_order=False``.
Each worker seeds plugtorch, ``random`` and NumPy's global generator with ``base_seed +
worker_id``, where ``base_seed`` is drawn from the loader's ``generator`` (or the default
one) when an epoch begins, before the sampler's order (``DataLoader.__iter__``), so a seeded
run is reproducible, workers draw different streams, and the order is the one of
``num_workers=0``. Persistent workers keep the seeds of their first epoch.

An exception in a worker is re-raised in the main process with the worker's traceback,
after every worker has been stopped; a worker that dies is reported within
``_STATUS_INTERVAL`` seconds. Workers exit when their parent does. Tensors travel by
pickling (``Tensor.__reduce_ex__``): values through the host, never the autograd graph.
"""
from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import pickle
import queue
import random
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from .dataloader import DataLoader

_STATUS_INTERVAL = 1.0  # seconds between liveness checks while waiting for a batch


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker (None in the main process)."""
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's id, the number of workers, its seed and its copy of the dataset; an
    ``IterableDataset`` uses it to give each worker its own share of the stream."""
    return _worker_info


class _ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as text."""

    def __init__(self, where: str) -> None:
        _, exc, tb = sys.exc_info()
        assert exc is not None, "_ExceptionWrapper is built only while an exception is handled"
        exc_type: type[BaseException] = type(exc)
        try:  # it must cross the process boundary; a class defined in a function cannot
            pickle.dumps(exc_type)
        except Exception:
            exc_type = RuntimeError
        self.exc_type = exc_type
        self.msg = f"Caught {type(exc).__name__} {where}.\nOriginal " + "".join(
            traceback.format_exception(type(exc), exc, tb))

    def reraise(self) -> NoReturn:
        try:
            exc = self.exc_type(self.msg)
        except Exception:  # an exception type that needs other arguments
            exc = RuntimeError(self.msg)
        raise exc


class _StreamEnd:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


class _Resume:
    """Start a new epoch with the same (persistent) workers."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch


class _Fetcher:
    def __init__(self, loader_state: dict[str, Any]) -> None:
        self.s = loader_state
        # the worker's stream of an iterable dataset; None for a map-style one
        self.stream: Iterator[Any] | None = iter(self.s["dataset"]) if self.s["iterable"] else None

    def fetch(self, indices: Any) -> Any:
        s, stream = self.s, self.stream
        if stream is not None:
            if not s["auto_collation"]:
                return s["collate_fn"](next(stream))
            batch = list(itertools.islice(stream, s["batch_size"]))
            if not batch or (s["drop_last"] and len(batch) < s["batch_size"]):
                raise StopIteration
            return s["collate_fn"](batch)
        dataset = s["dataset"]
        if not s["auto_collation"]:
            return s["collate_fn"](dataset[indices])
        if s["fast_batch"]:
            return dataset.get_batch(indices)
        getitems = getattr(dataset, "__getitems__", None)
        samples = getitems(indices) if callable(getitems) else [dataset[i] for i in indices]
        return s["collate_fn"](samples)


def _worker_loop(state, index_queue, result_queue, done_event, base_seed, worker_id, num_workers,
                 parent_pid):
    global _worker_info
    from ...core.random import manual_seed
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed % 2 ** 32)
    except ImportError:
        pass
    _worker_info = WorkerInfo(worker_id, num_workers, seed, state["dataset"])
    init_error = None
    try:
        if state["worker_init_fn"] is not None:
            state["worker_init_fn"](worker_id)
        fetcher = _Fetcher(state)
    except Exception:
        init_error = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
    stream_ended = False
    try:
        while True:
            try:
                task = index_queue.get(timeout=_STATUS_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent_pid:  # the main process is gone: nobody will read us
                    return
                continue
            if task is None:
                return
            if isinstance(task, _Resume):
                stream_ended = False
                if init_error is None:
                    fetcher = _Fetcher(state)
                continue
            if done_event.is_set() or stream_ended:
                continue
            task_epoch, idx, indices = task
            data: object  # a batch, an _ExceptionWrapper or a _StreamEnd
            if init_error is not None:  # every batch reports it: this worker cannot fetch
                data = init_error
            else:
                try:
                    data = fetcher.fetch(indices)
                except StopIteration:
                    if not state["iterable"]:
                        data = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
                    else:
                        data, stream_ended = _StreamEnd(worker_id), True
                except Exception:
                    data = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
            result_queue.put((task_epoch, idx, data))
            del data
    except KeyboardInterrupt:  # the main process handles the interrupt
        pass
    finally:
        if done_event.is_set():  # exit at once, even with batches nobody will read still queued
            result_queue.cancel_join_thread()


class MultiProcessIter:
    """The iterator ``iter(loader)`` returns when ``num_workers > 0``."""

    def __init__(self, loader: DataLoader, base_seed: int) -> None:
        # any start method's context has Process, Queue and Event; typeshed's BaseContext, which
        # get_context(str) is declared to return, lists no Process
        ctx: Any = loader.multiprocessing_context or multiprocessing.get_context()
        if isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self.loader = loader
        n = loader.num_workers
        state = {"dataset": loader.dataset, "iterable": loader._iterable,
                 "auto_collation": loader._auto_collation, "collate_fn": loader.collate_fn,
                 "fast_batch": loader._fast_batch, "batch_size": loader.batch_size,
                 "drop_last": loader.drop_last, "worker_init_fn": loader.worker_init_fn}
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        self._closed = False
        for worker_id in range(n):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            w = ctx.Process(target=_worker_loop, daemon=True,
                            args=(state, index_queue, self._result_queue, self._done_event,
                                  base_seed, worker_id, n, os.getpid()))
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._epoch = -1
        self._reset(first=True)

    def _reset(self, first: bool = False) -> None:
        """Begin an epoch: a fresh index order, every worker active, nothing in flight."""
        self._epoch += 1
        if not first:
            for q in self._index_queues:
                q.put(_Resume(self._epoch))
        loader = self.loader
        if loader._iterable:
            self._indices = itertools.repeat(None)
        else:
            self._indices = iter(loader.batch_sampler if loader._auto_collation else loader.sampler)
        self._active = [True] * len(self._workers)
        self._next_worker = itertools.cycle(range(len(self._workers)))
        self._sent = self._received = 0
        self._pending: dict[int, list] = {}  # idx -> [worker_id] or [worker_id, data]
        for _ in range(loader.prefetch_factor * len(self._workers)):
            self._send()

    def _send(self) -> None:
        if not any(self._active):
            return
        try:
            indices = next(self._indices)
        except StopIteration:
            return
        for _ in range(len(self._workers)):
            worker_id = next(self._next_worker)
            if self._active[worker_id]:
                break
        self._index_queues[worker_id].put((self._epoch, self._sent, indices))
        self._pending[self._sent] = [worker_id]
        self._sent += 1

    def __iter__(self) -> MultiProcessIter:
        return self

    def __next__(self) -> Any:
        while True:
            # skip the slots of workers whose stream has ended
            while self._received < self._sent:
                slot = self._pending.get(self._received)
                if slot is not None and (len(slot) == 2 or self._active[slot[0]]):
                    break
                self._pending.pop(self._received, None)
                self._received += 1
            else:
                if not self.loader.persistent_workers:
                    self.close()
                raise StopIteration
            slot = self._pending[self._received]
            if len(slot) == 2:
                del self._pending[self._received]
                self._received += 1
                return self._deliver(slot[1])
            epoch, idx, data = self._get()
            if epoch != self._epoch:  # left over from an epoch the user stopped early
                continue
            if isinstance(data, _StreamEnd):
                self._active[data.worker_id] = False
                self._send()
                continue
            if idx == self._received or not self.loader.in_order:
                self._pending.pop(idx, None)
                if idx == self._received:
                    self._received += 1
                return self._deliver(data)
            self._pending[idx].append(data)

    def _deliver(self, data):
        if isinstance(data, _ExceptionWrapper):
            self.close()
            data.reraise()
        self._send()
        return data

    def _get(self):
        timeout = self.loader.timeout
        waited = 0.0
        while True:
            wait = _STATUS_INTERVAL if timeout <= 0 else min(_STATUS_INTERVAL, timeout - waited)
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                waited += wait
                if timeout > 0 and waited >= timeout:
                    self.close()
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None
                self._raise_if_dead()
            except (ConnectionError, EOFError) as exc:
                # a batch's shared memory (plugtorch.multiprocessing's reducers) is fetched from the
                # worker that made it: that worker died before handing it over
                for _ in range(int(_STATUS_INTERVAL / 0.01)):
                    self._raise_if_dead()
                    time.sleep(0.01)
                self.close()
                raise RuntimeError(f"DataLoader: fetching a batch from its worker failed ({exc!r})") from exc

    def _raise_if_dead(self) -> None:
        dead = [w for w in self._workers if not w.is_alive()]
        if dead:
            self.close()
            raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(str(w.pid) for w in dead)}) "
                               f"exited unexpectedly (exit codes {[w.exitcode for w in dead]})") from None

    def close(self) -> None:
        """Stop every worker and release the queues (idempotent; also run on garbage collection)."""
        if self._closed:
            return
        self._closed = True
        self._done_event.set()
        for q in self._index_queues:
            q.put(None)
        for w in self._workers:
            w.join(timeout=_STATUS_INTERVAL)
            if w.is_alive():
                w.terminate()
                w.join()
        for q in (*self._index_queues, self._result_queue):
            q.cancel_join_thread()
            q.close()

    def __len__(self) -> int:
        return len(self.loader)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
