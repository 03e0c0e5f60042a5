"""The per-rank start of ``python -m plugtorch.distributed.run``: torchrun's env, then the script.

``mpiexec`` runs ``python -m plugtorch.distributed._bootstrap [-m] target args...`` on
every rank. This sets the variables torchrun gives each worker from the ones MPI gives
the rank (``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``; Open MPI's as well), then
forks: the child runs the target with :mod:`runpy` (so ``sys.argv`` and ``__main__`` are
the script's), and this process waits for it and writes its exit status where the
launcher reads it, because a rank that ends with ``os._exit`` or a signal leaves no
trace of its own, and ``mpiexec`` reports only an exit code, not which rank gave it.
The fork comes before the script imports MPI, so the child alone is the MPI process.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import runpy
import signal
import sys
import time

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_LOCAL_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK")


def _first(names, default=None):
    for name in names:
        if name in os.environ:
            return int(os.environ[name])
    if default is None:
        raise RuntimeError("plugtorch.distributed._bootstrap: no MPI rank variable "
                           f"({', '.join(names)}) is set; it is started by python -m plugtorch.distributed.run")
    return default


def worker_env(environ) -> dict[str, str]:
    """torchrun's per-worker variables for this rank, from MPI's and the launcher's."""
    rank, size = _first(_RANK_VARS), _first(_SIZE_VARS)
    nproc = int(environ.get("PLUGTORCH_RUN_NPROC_PER_NODE", size))
    local = _first(_LOCAL_VARS, rank % nproc)
    return {"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": str(rank // nproc),
            "GROUP_WORLD_SIZE": str(max(1, size // nproc)), "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(size), "ROLE_NAME": environ.get("PLUGTORCH_RUN_ROLE", "default"),
            "TORCHELASTIC_USE_AGENT_STORE": "False"}


def _die_with_parent() -> None:
    # If mpiexec kills this rank's waiting parent, the script must not run on orphaned.
    with contextlib.suppress(OSError, AttributeError):  # not Linux: no such guard
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run_target(argv: list[str]) -> None:
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # python script.py's, not -m's cwd
        runpy.run_path(argv[0], run_name="__main__")


def _record(code: int, pid: int) -> None:
    """Write this rank's exit status for the launcher; the first writer (the worker, before an
    abort that kills this rank's processes, or else the waiting parent) wins."""
    where = os.environ.get("PLUGTORCH_RUN_STATUS_DIR")
    if not where:
        return
    try:
        with open(os.path.join(where, f"rank-{os.environ['RANK']}.json"), "x") as f:
            json.dump({"rank": int(os.environ["RANK"]), "local_rank": int(os.environ["LOCAL_RANK"]),
                       "exitcode": code, "pid": pid, "time": time.time(), "host": os.uname().nodename}, f)
    except FileExistsError:
        pass


def _record_uncaught_exceptions() -> None:
    # The MPI plugin's hook, installed later, calls this one before it aborts every rank.
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        _record(1, os.getpid())
        previous(exc_type, exc, tb)

    sys.excepthook = hook


def _end_job_on_error_exit(code) -> None:
    """A worker that exits with an error status while in an MPI world would wait forever in
    MPI's shutdown, as its peers in their next collective; torchrun would see it exit, so
    end the whole job now, with its status (what ``plugtorch.distributed.abort`` does)."""
    if code in (None, 0):
        return
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return
    status = code if isinstance(code, int) else 1
    _record(status, os.getpid())
    if not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
    sys.stderr.write(f"plugtorch.distributed.run: rank {os.environ['RANK']} exited with status {status}; "
                     "ending every rank of the job\n")
    sys.stdout.flush()
    sys.stderr.flush()
    mpi.COMM_WORLD.Abort(status)


def _forward(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the worker has already ended
        os.kill(pid, sig)


def main() -> None:
    argv = sys.argv[1:]
    if not argv or argv == ["-m"]:
        raise SystemExit("usage: python -m plugtorch.distributed._bootstrap [-m] target [args...]")
    os.environ.update(worker_env(os.environ))
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        _die_with_parent()
        _record_uncaught_exceptions()
        try:
            _run_target(argv)  # an uncaught exception ends the job through the MPI plugin's hook
        except SystemExit as e:
            _end_job_on_error_exit(e.code)
            raise
        return
    for sig in (signal.SIGTERM, signal.SIGINT):  # mpiexec's stop reaches the script
        signal.signal(sig, lambda s, _f: _forward(child, s))
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    _record(code, child)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


if __name__ == "__main__":
    main()
