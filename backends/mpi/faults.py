"""One failing rank ends the whole job, with its traceback, instead of a hang.

Without this, a rank that raises exits while the others wait forever in their
next collective (and the failed rank itself waits in MPI's shutdown). As
``python -m mpi4py`` does, an uncaught exception in the main thread is printed
and then ``MPI_Abort`` tears down every rank; the launcher exits non-zero.
A rank that stops with an error *status* instead of an exception must call
``plugtorch.distributed.abort(status)`` (``plugtorch train`` does).
"""
from __future__ import annotations

import sys


def abort_on_uncaught_exception(comm) -> None:
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        try:
            sys.stderr.write(f"plugtorch.distributed: uncaught {exc_type.__name__} on rank "
                             f"{comm.Get_rank()} of {comm.Get_size()}; aborting all ranks\n")
            previous(exc_type, exc, tb)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            comm.Abort(1)

    sys.excepthook = excepthook
