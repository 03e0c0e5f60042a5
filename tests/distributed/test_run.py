"""``python -m plugtorch.distributed.run``, the torchrun launcher on top of ``mpiexec``.

Each test runs the launcher in a subprocess with a timeout (mpi_harness.run), so a hanging
job fails the test with its output instead of stalling the run.
"""
from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest
from mpi_harness import SCRIPTS, _env, launch, needs_mpi, run

import plugtorch.distributed as dist
from plugtorch.distributed import run as launcher


def torchrun(*args, timeout=60):
    return run([sys.executable, "-m", "plugtorch.distributed.run", *map(str, args)], timeout=timeout)


def ok(result):
    assert result.returncode == 0, f"exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 3])
def test_workers_get_torchruns_environment(nprocs, tmp_path):
    ok(torchrun("--nproc_per_node", nprocs, "--rdzv-id", "job7", "--max-restarts", 1,
                SCRIPTS / "run_env.py", tmp_path, "a", "--b"))
    rows = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(nprocs)]
    assert [r["RANK"] for r in rows] == [str(r) for r in range(nprocs)]
    for r, row in enumerate(rows):
        assert row == {"argv": ["a", "--b"], "main": "__main__", "launched": True, "RANK": str(r),
                       "LOCAL_RANK": str(r), "WORLD_SIZE": str(nprocs), "LOCAL_WORLD_SIZE": str(nprocs),
                       "GROUP_RANK": "0", "ROLE_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "0",
                       "TORCHELASTIC_MAX_RESTARTS": "1", "TORCHELASTIC_RUN_ID": "job7"}


@needs_mpi
def test_module_target_and_standalone(tmp_path):
    ok(run([sys.executable, "-m", "plugtorch.distributed.run", "--standalone", "--nproc-per-node=2",
            "-m", "run_env", tmp_path, "x"], env=_env(PYTHONPATH=str(SCRIPTS))))
    rows = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(2)]
    assert len(rows) == 2 and all(r["argv"] == ["x"] and r["main"] == "__main__" for r in rows)
    assert {r["MASTER_ADDR"] for r in rows} == {"localhost"} and rows[0]["MASTER_PORT"] != "29500"
    assert len({r["TORCHELASTIC_RUN_ID"] for r in rows}) == 1 and rows[0]["TORCHELASTIC_RUN_ID"] != "none"


@needs_mpi
@pytest.mark.parametrize("name", ["gloo", "nccl"])
def test_env_init_and_all_reduce(name):
    result = ok(torchrun("--nproc-per-node", 2, SCRIPTS / "run_allreduce.py", name))
    assert result.stdout.count("all_reduce ok on rank") == 2
    assert result.stderr.count("NCCL needs CUDA devices") == (2 if name == "nccl" else 0)
    plain = ok(launch(2, "run_allreduce.py", name))  # plain mpiexec: no RANK/WORLD_SIZE to check
    assert plain.stdout.count("all_reduce ok on rank") == 2


@needs_mpi
def test_a_failing_rank_fails_the_job_naming_it():
    result = torchrun("--nproc-per-node", 2, SCRIPTS / "run_allreduce.py", "gloo", 1, timeout=30)
    assert result.returncode == 1, result.stderr  # torchrun's status for a failed worker group
    assert "Root Cause (first observed failure):\n  rank: 1 (local_rank: 1)" in result.stderr, result.stderr
    assert "exitcode: 3" in result.stderr and "FAILED after 0 restarts" in result.stderr


@needs_mpi
def test_restarts_run_out():
    result = torchrun("--nproc-per-node", 2, "--max-restarts", 1, SCRIPTS / "run_allreduce.py", "gloo", 0,
                      timeout=30)
    assert result.returncode == 1 and "restarting (1/1)" in result.stderr, result.stderr
    assert "FAILED after 1 restart\n" in result.stderr and "rank: 0 (local_rank: 0)" in result.stderr


@needs_mpi
def test_elastic_restart_resumes_to_the_uninterrupted_result(tmp_path):
    ok(torchrun("--nproc-per-node", 2, SCRIPTS / "run_elastic.py", tmp_path / "a.pt", tmp_path / "a.npz", -1))
    result = ok(torchrun("--nproc-per-node", 2, "--max-restarts", 2, SCRIPTS / "run_elastic.py",
                         tmp_path / "b.pt", tmp_path / "b.npz", 2))
    assert "worker group failed (attempt 0): rank: 1 (local_rank: 1)" in result.stderr, result.stderr
    assert "exitcode: 1; restarting (1/2)" in result.stderr
    assert result.stdout.count("restart 1") == 2, result.stdout  # the second attempt finished the job
    want, got = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    assert sorted(want) == sorted(got)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_command_line_checks():
    with pytest.raises(SystemExit, match="needs --hostfile"):
        launcher.plan(launcher.parser().parse_args(["--nnodes", "2", "--nproc-per-node", "2", "s.py"]))
    with pytest.raises(SystemExit, match="--nproc-per-node must be"):
        launcher.plan(launcher.parser().parse_args(["--nproc-per-node", "0", "s.py"]))
    cmd, env = launcher.plan(launcher.parser().parse_args(
        ["--nnodes", "1:2", "--nproc_per_node", "3", "--hostfile", "hosts", "--rdzv_endpoint", "node0:1234",
         "s.py", "--lr", "1"]))
    assert cmd[1:7] == ["-n", "6", "-f", "hosts", "-ppn", "3"] and cmd[-3:] == ["s.py", "--lr", "1"]
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["PLUGTORCH_RUN_NPROC_PER_NODE"]) == ("node0", "1234", "3")


def test_torch_backend_names_outside_a_launcher(monkeypatch):
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(dist, "_warned_nccl", False)
    with pytest.warns(UserWarning, match="NCCL needs CUDA devices"):
        dist.init_process_group("nccl", init_method="env://")
    try:
        assert dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        dist.init_process_group("cpu:gloo,cuda:nccl")
        dist.destroy_process_group()
    with pytest.raises(ValueError, match="unknown distributed backend 'ucc'"):
        dist.init_process_group("ucc")


@needs_mpi
def test_a_stall_aborted_by_the_watchdog_is_restarted():
    result = ok(torchrun("--nproc-per-node", 2, "--max-restarts", 1, SCRIPTS / "run_stall.py", timeout=30))
    assert "did not complete within 2 s" in result.stderr and "restarting (1/1)" in result.stderr, result.stderr
    assert result.stdout.count("all_reduce ok on rank") == 2
