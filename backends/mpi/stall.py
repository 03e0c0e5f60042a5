"""The stall report: what did not complete, who did not arrive, where every rank is.

Kept apart from the engine (and from mpi4py) so that it can be read, and tested, alone.
A rank's state, as it answers the watchdog's question, is a dict: ``rank``, ``posted``
(how many collectives it has posted), ``last`` (the latest, in words) and ``open``
(``[(seq, what)]`` of those posted and not complete).
"""
from __future__ import annotations


def _words(seconds: float) -> str:
    return f"{seconds:g} s"


def diagnosis(work, rank: int, size: int, timeout: float, replies: dict, grace: float) -> str:
    """The stall report: what did not complete, who did not arrive, where everyone is."""
    seq = work.seq
    absent, waiting, lines = [], [], []
    for r in range(size):
        state = replies.get(r)
        if state is None:
            absent.append(r)
            lines.append(f"  rank {r} did not answer within {_words(grace)} (it may have exited or died, "
                         "or be blocked in native code that holds the Python GIL)")
            continue
        mine = dict(state["open"])
        if state["posted"] < seq:
            absent.append(r)
            where = (f"waiting in #{state['open'][0][0]} {state['open'][0][1]}" if state["open"]
                     else "in no collective: running its own code (stuck, deadlocked, or waiting on I/O?)")
            lines.append(f"  rank {r} did not arrive: it has posted {state['posted']} collectives "
                         f"(the last {state['last']}) and is {where}")
        elif seq in mine:
            waiting.append(r)
            if mine[seq] != work.what:
                lines.append(f"  rank {r} is in #{seq} {mine[seq]}, a different collective: the ranks called "
                             "different collectives (PLUGTORCH_DISTRIBUTED_DEBUG=1 names the first difference)")
        else:
            lines.append(f"  rank {r} has completed #{seq} and posted {state['posted']} collectives "
                         f"(the last {state['last']})")
    head = (f"plugtorch.distributed: collective #{seq} {work.what} did not complete within "
            f"{_words(timeout)} on rank {rank} of {size}. Ranks that did not arrive: {absent}; "
            f"ranks waiting in it: {waiting}.\n")
    tail = ("Aborting the job. The limit is init_process_group(timeout=...) / "
            "plugtorch.distributed.init(timeout=...) or PLUGTORCH_DISTRIBUTED_TIMEOUT (seconds).\n")
    return head + "".join(line + "\n" for line in lines) + tail
