"""One failing rank ends the whole job, with its traceback, instead of a hang.

Without this, a rank that raises exits while the others wait forever in their
next collective. As ``python -m mpi4py`` does, an uncaught exception is printed
and then ``MPI_Abort`` tears down every rank; the launcher exits non-zero.
"""
from __future__ import annotations

import sys
import threading


def abort_on_uncaught_exception(comm) -> None:
    previous = sys.excepthook
    previous_thread = threading.excepthook

    def excepthook(exc_type, exc, tb):
        try:
            sys.stderr.write(f"plugtorch.distributed: uncaught {exc_type.__name__} on rank "
                             f"{comm.Get_rank()} of {comm.Get_size()}; aborting all ranks\n")
            previous(exc_type, exc, tb)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            comm.Abort(1)

    def thread_excepthook(args):
        if args.exc_type is SystemExit:
            return previous_thread(args)
        excepthook(args.exc_type, args.exc_value, args.exc_traceback)

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
