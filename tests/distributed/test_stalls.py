"""No hang, ever: a rank that stops arriving ends the job with a diagnosis, and a rank
that dies around a checkpoint leaves a complete one behind.

Each job runs under ``mpiexec`` with a short process-group timeout; the harness kills
and fails any job that outlives its own limit, so a regression to a hang fails here.
"""
from __future__ import annotations

import hashlib
import re
import time

import pytest
from mpi_harness import _env, launch, needs_mpi

import plugtorch
from plugtorch.apps.train import MLP

TIMEOUT_S = 2


def stalled(nprocs, mode, **env):
    start = time.monotonic()
    result = launch(nprocs, "stall.py", mode, *([] if env else [TIMEOUT_S]), timeout=40, env=_env(**env))
    elapsed = time.monotonic() - start
    assert result.returncode != 0, f"the job must fail\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    # the timeout, at most two seconds asking the others, and the launcher's teardown
    assert elapsed < TIMEOUT_S + 12, f"took {elapsed:.1f} s\n{result.stderr}"
    return result.stderr


@needs_mpi
def test_a_rank_stuck_in_its_own_code_is_named():
    err = stalled(2, "sleep")
    assert re.search(r"collective #\d+ all_reduce\(SUM, float32\[161\]\) did not complete within 2 s on rank 0 "
                     r"of 2\. Ranks that did not arrive: \[1\]; ranks waiting in it: \[0\]", err), err
    assert "rank 1 did not arrive" in err and "in no collective: running its own code" in err, err
    assert "PLUGTORCH_DISTRIBUTED_TIMEOUT" in err


@needs_mpi
def test_a_rank_spinning_in_python_is_named_among_four():
    # the timeout comes from the environment here; the spinning rank's thread still answers
    err = stalled(4, "spin", PLUGTORCH_DISTRIBUTED_TIMEOUT=str(TIMEOUT_S))
    assert "Ranks that did not arrive: [3]; ranks waiting in it: [0, 1, 2]" in err, err
    assert err.count("did not complete within") == 1, "one rank reports the stall"


@needs_mpi
def test_a_rank_that_left_early_is_reported_as_silent():
    err = stalled(2, "exit")
    assert "Ranks that did not arrive: [1]" in err and "rank 1 did not answer" in err, err


@needs_mpi
def test_ranks_in_different_collectives_are_told_apart():
    err = stalled(2, "mismatch")
    assert "Ranks that did not arrive: []" in err, err
    assert "a different collective" in err and "broadcast(float32[3], src=0)" in err, err


def _digest(state) -> str:
    h = hashlib.sha256()
    for name, t in sorted(state.items()):
        h.update(name.encode() + t.numpy().tobytes())
    return h.hexdigest()


@needs_mpi
@pytest.mark.parametrize("mode, epoch", [("after", 2), ("during", 1)])
def test_checkpoint_survives_a_rank_dying(mode, epoch, data_root, tmp_path):
    """after: rank 1 is killed right after the epoch-2 checkpoint; during: rank 0 is killed
    with the epoch-2 checkpoint written but not renamed into place. Either way the file at
    the checkpoint path is a complete checkpoint, the one written last before the crash."""
    path = tmp_path / "run.ckpt"
    result = launch(2, "checkpoint_crash.py", mode, path, data_root, timeout=60)
    assert result.returncode != 0 and "outlived" not in result.stdout, result.stdout + result.stderr
    digests = dict(re.findall(r"epoch (\d+) digest (\w+)", result.stdout))
    state = plugtorch.load(path)
    assert state["epoch"] == epoch
    assert _digest(state["model"]) == digests[str(epoch)]
    MLP().load_state_dict(state["model"])
    # only rank 0 writes: nothing else appears beside the checkpoint (at most the dead write's temp file)
    others = [p.name for p in tmp_path.iterdir() if p != path]
    assert others == [] if mode == "after" else all(n.startswith(".run.ckpt.") for n in others), others
