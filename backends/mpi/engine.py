"""The process group's communication thread: progress for posted collectives, and a watchdog.

Progress. MPI advances a non-blocking collective only while some thread is inside
an MPI call. Left to the training loop, a posted gradient bucket moves only when a
later gradient hook happens to poll it, and a long matrix product in between
stalls it (over TCP, after one socket buffer's worth). So while collectives are
posted and the main thread is not itself blocked in ``MPI_Wait``, this thread calls
``MPI_Testsome`` on them every ``POLL_S``; NumPy releases the GIL in its kernels,
so the polls run beside backward's heavy work. ``PLUGTORCH_MPI_PROGRESS_THREAD=0``
turns polling off (the watchdog stays), for comparison.

Watchdog. Every collective gets a deadline, ``timeout`` after it is posted (torch's
``init_process_group(timeout=)``, as NCCL's watchdog does). When one passes, this
rank asks every other rank, on a communicator of its own, which collective it has
reached; each rank's thread answers, even while its main thread sleeps, waits on
I/O or spins in Python. The lowest rank that timed out prints a diagnosis — the
collective, its sequence number, the ranks that did not arrive and where they are
— and aborts the job (the stall inspector of Horovod, in the small).

Waiting. MPI_Wait spins, which is fastest while each rank has a core of its own. With
more ranks than cores, a rank that spins on an async work (a gradient bucket) takes the core
another rank needs to finish its backward, so there the main thread sleeps until the
progress thread has seen the work complete. A collective waited on at once spins even so:
every rank is on its way into it, and one that sleeps moves only at the thread's polls (on
4 ranks over 2 cores a 1 MB all-reduce ran at 0.28x raw MPI's speed sleeping, 0.88x
spinning). ``PLUGTORCH_MPI_WAIT=spin`` or ``sleep`` sets both.

Only the thread that completes a request touches it: the main thread *claims* a
work before spinning on it, and the thread tests only unclaimed ones.

Waited at once. A collective whose caller waits on it right away (``async_op=False``) is,
where waits spin, waited on as it is posted (``run_waited``), and the thread is not woken for
it: it has nothing to progress, and waking it took ~40 µs of a small collective on busy
cores. The watchdog still covers it: the thread looks at every deadline each ``IDLE_S``. Every
collective stays a non-blocking MPI call even so: MPI never matches a blocking collective
with a non-blocking one, and whether a caller waits is this rank's business (a joined rank
waits on the join protocol's all-reduces that the training ranks post async, as in torch),
so choosing MPI's blocking calls here would hang ranks that chose differently.
"""
from __future__ import annotations

import atexit
import itertools
import os
import sys
import threading
import time

from mpi4py import MPI

from .stall import diagnosis

POLL_S = 2e-4       # between MPI_Testsome calls while collectives are pending
IDLE_S = 0.05       # between watchdog rounds otherwise
GRACE_S = 2.0       # how long a diagnosing rank waits for the others' answers
QUERY, REPLY = 1, 2  # tags on the diagnostic communicator


class Engine:
    """One per MPI process group; see the module docstring."""

    def __init__(self, comm, timeout: float, oversubscribed: bool = False):
        self.comm = comm
        self.diag = comm.Dup()
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = timeout
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)
        self.open: dict = {}      # seq -> posted work the thread has not seen complete
        self.waiting: dict = {}   # thread id -> the work that thread is blocked on in MPI_Wait
        self._seqs = itertools.count(1)  # next() is atomic under the GIL
        self.seq = 0              # the latest collective's number: how many were posted
        self.latest = None        # the latest one's ``what`` (put in words only when asked)
        self.deferred_to: int | None = None  # a lower rank that is already diagnosing a stall
        self.stopping = False
        self.progress = os.environ.get("PLUGTORCH_MPI_PROGRESS_THREAD", "1") != "0"
        self.threaded = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        wait = os.environ.get("PLUGTORCH_MPI_WAIT")  # "spin", "sleep", or unset: by the core share
        self.sleep_in_wait = (wait == "sleep" or (wait is None and oversubscribed)) and self.progress
        self.thread = None
        if self.threaded and self.size > 1:
            self.thread = threading.Thread(target=self._run, name="plugtorch-mpi", daemon=True)
            self.thread.start()
            atexit.register(self.stop)  # before mpi4py finalises MPI
        # collectives waited on at once spin in MPI_Wait (see "Waiting" and run_waited)
        self.quiet_waits = self.thread is not None and not (wait == "sleep" and self.progress)

    # -- the main thread's side ----------------------------------------------------------
    def post(self, work) -> None:
        """Number ``work``, give it its deadline and wake the thread to progress it."""
        with self.lock:
            work.seq = self.seq = next(self._seqs)
            work.deadline = time.monotonic() + self.timeout
            self.open[work.seq] = work
            self.latest = work._what
            self.wakeup.notify_all()

    def run_waited(self, request, status, what) -> None:
        """Number the collective of ``request`` and wait for it at once, here (``quiet_waits`` only).

        Nothing is locked, no work object is made and the thread is not woken: the request never
        enters ``open`` (so the thread never tests it), and ``waiting`` shows it to the watchdog
        as (number, deadline, what). Each dict operation is atomic under the GIL and each
        thread has its own key. A waited collective's every step counts: after a 1 MB
        collective has evicted the caches, each Python object the next call touches is a cache
        miss, and plugtorch's Python time around a 1 MB call on two ranks was 3x its warm time."""
        self.seq = seq = next(self._seqs)
        self.latest = what
        me = threading.get_ident()
        self.waiting[me] = (seq, time.monotonic() + self.timeout, what)
        try:
            request.Wait(status)
        finally:
            del self.waiting[me]

    def wait(self, work) -> None:
        """Block until ``work``'s request (posted with ``post``) is complete (the watchdog keeps
        its deadline)."""
        if self.thread is None:
            while not self.test(work):  # no thread to watch: watch from here
                self.service()
                time.sleep(POLL_S)
            return
        with self.lock:
            if self.sleep_in_wait:  # the progress thread completes it and wakes us
                while not work.completed:
                    self.wakeup.wait()
            if work.completed:
                return
            work.claimed = True  # the thread no longer tests it: one thread per request
            me = threading.get_ident()
            self.waiting[me] = (work.seq, work.deadline, work._what)
        try:
            work.request.Wait(work.status)
        finally:
            del self.waiting[me]
            with self.lock:
                work.completed = True
                self.open.pop(work.seq, None)

    def test(self, work) -> bool:
        """Whether ``work``'s request is complete; never blocks."""
        if work.completed or (self.thread is not None and self.progress):
            return work.completed  # the thread tests it
        with self.lock:
            if not work.completed and work.request.Test(work.status):
                work.completed = True
                self.open.pop(work.seq, None)
        return work.completed

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            self.wakeup.notify_all()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()
        if not MPI.Is_finalized() and self.diag != MPI.COMM_NULL:
            self.diag.Free()

    # -- the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while self._step():
                self.service()
        except BaseException:  # a dead watchdog would turn the next stall into a hang
            sys.stderr.write(f"plugtorch.distributed: the communication thread of rank {self.rank} failed; "
                             "aborting the job\n")
            import traceback
            traceback.print_exc()
            sys.stderr.flush()
            self.comm.Abort(1)

    def _step(self) -> bool:
        """Drive pending requests once, or sleep until there are some; False once stopping."""
        with self.lock:
            if self.stopping:
                return False
            pending = []
            if self.progress and not self.waiting:  # none while a thread is inside MPI_Wait
                pending = [w for w in self.open.values() if not w.claimed]
            if pending:
                # a receive from any rank keeps its status (the sender); statuses[k] is done[k]'s
                statuses = [MPI.Status() for _ in pending] if any(w.status is not None for w in pending) else None
                done = MPI.Request.Testsome([w.request for w in pending], statuses) or ()
                for k, i in enumerate(done):
                    if statuses is not None and pending[i].status is not None:
                        pending[i].status = statuses[k]
                    pending[i].completed = True
                    self.open.pop(pending[i].seq, None)
                if done:
                    self.wakeup.notify_all()
            else:
                self.wakeup.wait(IDLE_S)
        if pending:
            time.sleep(POLL_S)
        return True

    def service(self) -> None:
        """Answer other ranks' questions; diagnose and abort on a passed deadline."""
        self._answer_queries()
        now = time.monotonic()
        with self.lock:
            late = [w for w in self.open.values() if not w.completed and now > w.deadline]
            for w in late:
                # a work nobody waits on and nothing polls (progress off) may simply be done
                if not w.claimed and w.request.Test(w.status):
                    w.completed = True
                    self.open.pop(w.seq, None)
            late = [w for w in late if not w.completed]
        late += [_Waited(seq, what) for seq, deadline, what in list(self.waiting.values())  # list(): a snapshot,
                 if now > deadline and seq not in self.open]                                 # atomic under the GIL
        if late:
            self._stalled(min(late, key=lambda w: w.seq))

    # -- the stall protocol --------------------------------------------------------------
    def _state(self) -> dict:
        with self.lock:
            works = {seq: _Waited(seq, what) for seq, _, what in list(self.waiting.values())}
            works.update((w.seq, w) for w in self.open.values() if not w.completed)
            waiting = [(seq, works[seq].what) for seq in sorted(works)]
            last = "none yet" if self.latest is None else f"#{self.seq} {in_words(self.latest)}"
            return {"rank": self.rank, "posted": self.seq, "last": last, "open": waiting}

    def _answer_queries(self) -> None:
        status = MPI.Status()
        while self.diag.Iprobe(source=MPI.ANY_SOURCE, tag=QUERY, status=status):
            source = status.Get_source()
            self.diag.recv(source=source, tag=QUERY)
            if source < self.rank and (self.deferred_to is None or source < self.deferred_to):
                self.deferred_to = source
            self.diag.send(self._state(), dest=source, tag=REPLY)  # small: sent eagerly

    def _defer(self) -> None:
        """A lower rank diagnoses this stall and will abort the job: answer it, and give it time."""
        deadline = time.monotonic() + 3 * GRACE_S
        while self.deferred_to is not None and time.monotonic() < deadline:
            self._answer_queries()
            time.sleep(0.01)

    def _stalled(self, work) -> None:
        self._defer()
        for r in range(self.size):
            if r != self.rank:
                self.diag.send(work.seq, dest=r, tag=QUERY)
        replies = {self.rank: self._state()}
        status = MPI.Status()
        deadline = time.monotonic() + min(GRACE_S, self.timeout / 2)
        while len(replies) < self.size and time.monotonic() < deadline:
            self._answer_queries()
            while self.diag.Iprobe(source=MPI.ANY_SOURCE, tag=REPLY, status=status):
                replies[status.Get_source()] = self.diag.recv(source=status.Get_source(), tag=REPLY)
            time.sleep(0.01)
        self._defer()  # two ranks timed out together: the lower one reports
        sys.stdout.flush()
        sys.stderr.write(diagnosis(work, self.rank, self.size, self.timeout, replies,
                                   min(GRACE_S, self.timeout / 2)))
        sys.stderr.flush()
        self.comm.Abort(1)


def in_words(what) -> str:
    """A collective's ``what``: words, or a function that says them."""
    return what if isinstance(what, str) else what()


class _Waited:
    """A collective waited on where it was posted (``run_waited``), as the watchdog reports it."""

    __slots__ = ("seq", "_what")

    def __init__(self, seq: int, what):
        self.seq, self._what = seq, what

    @property
    def what(self) -> str:
        return in_words(self._what)
