"""How the distributed tests launch ranks: ``mpiexec`` in a subprocess with a timeout.

A failed assert on any rank aborts the job (the MPI plugin's excepthook), so the
launcher's exit status is the verdict; a job that outlives its timeout is killed
with its whole process group and the test fails showing the job's output, so a
hanging rank fails the run instead of stalling it.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys

import pytest

SCRIPTS = pathlib.Path(__file__).parent / "mpi_scripts"
MPIEXEC = shutil.which("mpiexec") or shutil.which("mpirun")

try:
    import mpi4py  # noqa: F401  (only to know whether to skip; does not initialise MPI)
    HAVE_MPI4PY = True
except ImportError:
    HAVE_MPI4PY = False


def needs_mpi(test):
    """Mark a test that launches mpiexec: selectable with -m mpi, skipped (saying why) without MPI."""
    test = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH: pip install mpich mpi4py")(test)
    test = pytest.mark.skipif(not HAVE_MPI4PY, reason="mpi4py is not installed: pip install mpi4py")(test)
    return pytest.mark.mpi(test)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def _env(threads: str | None = "1", **extra):
    """The environment of a launched job; ``threads=None`` leaves every thread variable unset."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                        "PLUGTORCH_DISTRIBUTED_DEBUG", "PLUGTORCH_DISTRIBUTED_TIMEOUT") + THREAD_VARIABLES}
    if threads is not None:  # 2 cores shared by up to 4 ranks: one BLAS thread each
        env.update(OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    env.update(extra)
    return env


def launch(nprocs, script, *args, timeout=60, env=None):
    """Run ``script`` on ``nprocs`` ranks (0: plain python, no launcher); returns the result."""
    cmd = [sys.executable, str(SCRIPTS / script), *map(str, args)]
    if nprocs:
        cmd = [MPIEXEC, "-n", str(nprocs)] + cmd
    return run(cmd, timeout=timeout, env=env)


def script(name: str, *args) -> list[str]:
    """The command line that runs ``mpi_scripts/name`` with ``args`` (for a launcher to prefix)."""
    return [sys.executable, str(SCRIPTS / name), *map(str, args)]


def run(cmd, timeout=60, env=None):
    """Run ``cmd`` in a session of its own; kill the whole session and fail if it hangs."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or _env(), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} hung for {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def check(result, expected_lines: int):
    assert result.returncode == 0, (f"{' '.join(result.args)} exited {result.returncode}\n"
                                    f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    assert result.stdout.count(" ok on rank ") == expected_lines, result.stdout


